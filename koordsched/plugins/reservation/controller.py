"""The reservation controller (Koordinator runs it inside koord-scheduler, spec 3.2).

Its sync is pure functions over the Reservation store and the cache's owner records, so both
backends write the same statuses: currentOwners and allocated follow the pods allocated from
each reservation, an allocateOnce reservation ends (Succeeded) with its first owner, and an
expired reservation, or an Available one whose node is gone, becomes Failed.

:class:`ReservationController` declares it (:mod:`koordsched.framework.controllers`): in a
cluster, while this instance leads, a round every second writes what the sync finds, each a
status write computed from the Reservation's resourceVersion, so the backend sends one per
version (shared with the port's writes of a reserve pod's failed attempt). The simulator runs no
rounds of it: it syncs the owners of the Reservations a delivered bind or deletion named right
after it, fails expired ones when the input is loaded and whenever virtual time lets pods out of
backoff, and syncs every owner when the run settles.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from koordsched.api.core import Pod
from koordsched.api.kinds import RESERVATIONS, ObjectKind
from koordsched.api.reservation import (
    Reservation,
    allocate_once,
    allocated_reservation,
    expired,
    expiry_time,
    is_active,
    is_available,
    reservation_uid,
    with_owners,
)
from koordsched.framework.controllers import Controller, Moment, StatusWrite, Write, WriteResult
from koordsched.framework.interface import Handle
from koordsched.framework.types import PodInfo
from koordsched.plugins.reservation.plugin import Reservation as ReservationPlugin

log = logging.getLogger(__name__)

#: How often a cluster round runs (Koordinator's reservation controller resyncs on events and
#: periodically; a second keeps expiry within a second of its time).
SYNC_INTERVAL = 1.0
#: A status write unanswered this long is abandoned (the next round sends it again).
WRITE_TIMEOUT = 30.0
#: Status writes in flight at once.
WORKERS = 32


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


class ReservationController:
    """Writes Reservations' owners, allocateOnce's end and expiry (see the module docstring)."""

    name = "reservation-status"
    description = "the reservation controller"
    watches: tuple[ObjectKind[Any], ...] = (RESERVATIONS,)
    interval = SYNC_INTERVAL
    workers = WORKERS
    write_timeout = WRITE_TIMEOUT
    simulated = False  # the simulator calls after_pods and at instead

    def __init__(self, handle: Handle) -> None:
        #: Every profile's plugin shares the scheduler's store, cache and clock: one serves all.
        self.handle = handle

    def _writes(self, updates: Iterable[tuple[str, Reservation]]) -> list[Write]:
        store = self.handle.objects(RESERVATIONS)
        out: list[Write] = []
        for key, new in updates:
            old = store.get(key)
            if old is not None:
                out.append(StatusWrite(RESERVATIONS, key, new, old.metadata.resource_version))
        return out

    def _owners(self, keys: Iterable[str] | None = None) -> list[tuple[str, Reservation]]:
        h = self.handle
        return owner_updates(h.objects(RESERVATIONS), h.reserved_owners, h.clock.wall(), keys)

    def _expiry(self, created: float | None) -> list[tuple[str, Reservation]]:
        nodes = self.handle.snapshot.by_name
        return expiry_updates(
            self.handle.objects(RESERVATIONS), self.handle.clock.wall(), lambda n: n in nodes, created
        )

    def reconcile(self) -> list[Write]:
        # Owners first: an expiry of the same version waits for the watch to bring the owners.
        return self._writes(self._owners() + self._expiry(None))

    def applied(self, write: Write, result: WriteResult) -> None:
        if not result.ok and isinstance(write, StatusWrite):
            log.warning("%s %s: status not written: %s", write.kind.kind, write.key, result.error)

    def next_due(self) -> float | None:
        return None

    def after_pods(self, pods: Sequence[Pod]) -> list[Write]:
        """The owners of the reservations these pods are allocated from (a preempted owner gives
        its share back); the reservations are named as the cache keys their owners."""
        touched = {a.uid or a.name for p in pods if (a := allocated_reservation(p)) is not None}
        return self._writes(self._owners(touched)) if touched else []

    def at(self, moment: Moment, loaded_at: float) -> list[Write]:
        if moment is Moment.SETTLED:
            return self._writes(self._owners())  # the controller's last word
        # A Reservation without creationTimestamp counts from the input's load.
        return self._writes(self._expiry(loaded_at))


def reservation_controllers(plugins: Sequence[object]) -> list[Controller]:
    """One reservation controller for the scheduler, through the first profile's plugin."""
    found = [p for p in plugins if isinstance(p, ReservationPlugin)]
    return [ReservationController(found[0].handle)] if found else []
