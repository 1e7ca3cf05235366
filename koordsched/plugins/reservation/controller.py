"""The reservation controller's sync (Koordinator runs it inside koord-scheduler, spec 3.2).

Pure functions over the Reservation store and the cache's owner records, so both backends
write the same statuses: currentOwners and allocated follow the pods allocated from each
reservation, an allocateOnce reservation ends (Succeeded) with its first owner, and an expired
reservation, or an Available one whose node is gone, becomes Failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from koordsched.api.reservation import (
    Reservation,
    allocate_once,
    expired,
    expiry_time,
    is_active,
    is_available,
    reservation_uid,
    with_owners,
)
from koordsched.framework.types import PodInfo


def owner_updates(
    reservations: Mapping[str, Reservation],
    owners_of: Callable[[str], Mapping[str, PodInfo]],
    wall: float,
    keys: Iterable[str] | None = None,
    allocate_once_only: bool = False,
) -> list[tuple[str, Reservation]]:
    """(key, new object) for Available reservations whose owners' record changed; ``keys`` limits
    the check to these reservations (those a confirmed bind named), ``allocate_once_only`` to the
    ones an owner ends."""
    items = reservations.items() if keys is None else ((k, reservations.get(k)) for k in keys)
    out = []
    for key, r in items:
        if r is None or not is_available(r) or (allocate_once_only and not allocate_once(r)):
            continue
        uid = reservation_uid(r)
        owners = [p for p in owners_of(uid).values() if p.pod.spec.node_name]
        allocated: dict[str, int] = {}
        for p in owners:
            for name, amount in p.requests.items():
                allocated[name] = allocated.get(name, 0) + amount
        new = with_owners(r, [p.pod for p in owners], allocated, wall)
        if new.status != r.status:
            out.append((key, new))
    return out


def expiry_updates(
    reservations: Mapping[str, Reservation],
    wall: float,
    node_exists: Callable[[str], bool],
    created: float | None = None,
) -> list[tuple[str, Reservation]]:
    """(key, new object) for reservations that expired (or lost their node) by ``wall``;
    ``created`` stands for a missing creationTimestamp."""
    out = []
    for key, r in reservations.items():
        exists = node_exists(r.status.node_name) if r.status.node_name else True
        new = expired(r, wall, exists, created)
        if new is not None:
            out.append((key, new))
    return out


def next_expiry(reservations: Mapping[str, Reservation], created: float | None = None) -> float | None:
    """The earliest wall time at which an active reservation expires, or None."""
    times = [t for r in reservations.values() if is_active(r) and (t := expiry_time(r, created)) is not None]
    return min(times) if times else None
