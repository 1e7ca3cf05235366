"""NodeNUMAResource and reservations (spec 4.2 restore, Koordinator's ``tryAllocateFromReservation``).

The reservations a pod matched on a node are lent to its cycle, so the CPUs their reserve pods
hold are free in the resource manager. A cpuset for a pod allocated through reservation R:

* prefers R's remaining CPUs (its ``resource-status`` cpuset less its owners' cpusets);
* never takes what another matched reservation still holds (``held_cpus``);
* with R Restricted (and cpu among its restricted resources), only R's remaining CPUs
  (``required_cpus``): Koordinator checks only their number here, see docs/compatibility.md.

With R None (beside every matched reservation) all of them are held.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from koordsched.api.koordinator import ANNOTATION_RESOURCE_STATUS, ResourceStatus
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Handle
from koordsched.framework.reservation_points import read_restored
from koordsched.framework.reservations import NominatedReservation, holder_of
from koordsched.framework.status import Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.nodenumaresource.cpuset import EMPTY, CPUSet, parse_cpuset
from koordsched.plugins.nodenumaresource.prefilter import NAME, PreFilterState
from koordsched.plugins.nodenumaresource.resource_manager import ResourceManager, ResourceOptions

#: Not in Koordinator (which then restores nothing from it): it may hold any CPU, so a pod that
#: binds CPUs is refused on its node until the annotation can be read.
ERR_RESERVATION_UNREADABLE = "Reservation(s) cpuset of reservation {name} unreadable ({annotation}): {error}"


@dataclass(frozen=True, slots=True)
class ReservationCPUs:
    preferred: CPUSet
    held: CPUSet
    required: CPUSet | None


def victim_holder(state: CycleState, st: PreFilterState, victim: PodInfo) -> str | None:
    """The reservation a preemption victim was allocated from; the first such victim also reads
    which reservations the pod matched (for what they would give back)."""
    holder = holder_of(victim)
    if holder is not None and not st.matched:
        got = read_restored(state, NAME)
        if got is not None:
            st.matched = got.uids()
    return holder


def reserved_cpus(reservation: NominatedReservation) -> CPUSet | Status:
    raw = reservation.annotations.get(ANNOTATION_RESOURCE_STATUS)
    if not raw:
        return EMPTY
    try:
        return parse_cpuset(msgspec.json.decode(raw, type=ResourceStatus).cpuset)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as err:
        return Status.unresolvable(
            ERR_RESERVATION_UNREADABLE.format(
                name=reservation.name, annotation=ANNOTATION_RESOURCE_STATUS, error=err
            )
        )


def remaining_cpus(
    handle: Handle, manager: ResourceManager, node: str, reservation: NominatedReservation
) -> CPUSet | Status:
    """The reservation's CPUs less those its owners hold (Koordinator's ``reservedCPUs``)."""
    cpus = reserved_cpus(reservation)
    if isinstance(cpus, Status) or not cpus:
        return cpus
    for uid in handle.reserved_owners(reservation.uid):
        alloc = manager.get(node, uid)
        if alloc is not None and alloc.cpuset:
            cpus = cpus - alloc.cpuset
    return cpus


def reservation_cpus(
    handle: Handle,
    state: CycleState,
    manager: ResourceManager,
    node: str,
    nominated: NominatedReservation | None,
    restricts_cpu: bool,
) -> ReservationCPUs | Status | None:
    """What a cpuset through ``nominated`` (None: beside every matched reservation) is given;
    None when no reservation concerns the pod's CPUs on this node."""
    got = read_restored(state, NAME)
    matched = got.on(node) if got is not None else []
    if nominated is None and not matched:
        return None
    held: CPUSet = EMPTY
    for r in matched:
        if nominated is not None and r.uid == nominated.uid:
            continue
        cpus = remaining_cpus(handle, manager, node, r)
        if isinstance(cpus, Status):
            return cpus
        held = held | cpus
    preferred: CPUSet = EMPTY
    required: CPUSet | None = None
    if nominated is not None:
        own = remaining_cpus(handle, manager, node, nominated)
        if isinstance(own, Status):
            return own
        preferred = own
        if nominated.restricted and restricts_cpu and reserved_cpus(nominated):
            required = own
    if not held and not preferred and required is None:
        return None
    return ReservationCPUs(preferred, held, required)


def apply(options: ResourceOptions, cpus: ReservationCPUs) -> None:
    """Put what :func:`reservation_cpus` found into an allocation's options."""
    if cpus.preferred:
        options.preferred_cpus = cpus.preferred
    options.held_cpus = cpus.held
    options.required_cpus = cpus.required
