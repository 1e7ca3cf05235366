"""The Reservations at the end of a simulated run, as its report shows them.

The simulator hands over the scheduler's object stores and the cache's owner records; which
kind holds Reservations, and how an object reads, stays in this package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from koordsched.api.kinds import RESERVATIONS
from koordsched.api.reservation import PHASE_PENDING, allocatable_of, is_available, reservation_uid
from koordsched.framework.types import PodInfo


@dataclass
class ReservationResult:
    """A Reservation at the end of the run: its phase, node, owners and what it has left.

    Amounts are canonical (cpu in millicores, else base units); ``remaining`` is what the
    reservation still holds for owners (allocatable less what its owners took, not below 0).
    """

    name: str
    phase: str
    node: str | None
    owners: list[str] = field(default_factory=list)
    allocatable: dict[str, int] = field(default_factory=dict)
    allocated: dict[str, int] = field(default_factory=dict)
    remaining: dict[str, int] = field(default_factory=dict)
    #: Why it is not Available: the last failed attempt, or the Ready condition's reason.
    message: str = ""


def reservation_results(
    objects: Mapping[str, Mapping[str, Any]], owners_of: Callable[[str], Mapping[str, PodInfo]]
) -> list[ReservationResult]:
    """Every Reservation in ``objects`` (kind name -> key -> object), by name."""
    out = []
    for r in sorted(objects.get(RESERVATIONS.kind, {}).values(), key=lambda r: r.metadata.name):
        try:
            alloc = allocatable_of(r)
        except (ValueError, msgspec.DecodeError):
            alloc = {}
        owners = owners_of(reservation_uid(r))
        allocated: dict[str, int] = {}
        for p in owners.values():
            for name, amount in p.requests.items():
                if name in alloc:
                    allocated[name] = allocated.get(name, 0) + amount
        phase = r.status.phase or PHASE_PENDING
        remaining = {n: max(0, a - allocated.get(n, 0)) for n, a in alloc.items()} if is_available(r) else {}
        message = ""
        for c in r.status.conditions:
            if c.status == "False":
                message = c.message or c.reason
        out.append(
            ReservationResult(
                name=r.metadata.name,
                phase=phase,
                node=r.status.node_name or None,
                owners=sorted(p.key for p in owners.values()),
                allocatable=alloc,
                allocated=allocated,
                remaining=remaining,
                message=message,
            )
        )
    return out
