"""DeviceShare and reservations (spec 4.1 "Reservation interaction", ``tryAllocateFromReservation``).

The reservations a pod matched on a node are lent to its cycle (their reserve pods leave the
node, so the store counts their devices free). An allocation through one of them, R, must
still leave the others' devices alone: :func:`reservation_view` gives the allocator

* ``held``: what every other matched reservation still holds (its devices less what its owners
  took on them), kept out of reach;
* ``preferred``: R's own minors, taken first;
* for a Restricted R, ``required_minors`` (only R's minors) and ``required`` (per minor, what R
  has left plus what preemption victims allocated from R would give back; an empty remainder
  means zero capacity, as Koordinator);
* ``preemptible``: victims outside reservations, plus those allocated from R.

With R None the pod goes beside every matched reservation: all of them are held.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from koordsched.api.koordinator import ANNOTATION_DEVICE_ALLOCATED
from koordsched.api.resources import subtract_non_negative
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Handle
from koordsched.framework.reservation_points import read_restored
from koordsched.framework.reservations import NominatedReservation, holder_of
from koordsched.framework.status import Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare.allocation import (
    AllocationFormatError,
    PodAllocations,
    parse_device_allocated,
)
from koordsched.plugins.deviceshare.cycle import NAME, CycleData
from koordsched.plugins.deviceshare.model import DeviceResources
from koordsched.plugins.deviceshare.node_state import NodeDeviceState, add_resources

#: Not in Koordinator (which leaves such a reservation without devices): counted as holding all.
ERR_RESERVATION_UNREADABLE = (
    "Reservation(s) device allocation of reservation {name} unreadable ({annotation}): {error}"
)


@dataclass(frozen=True, slots=True)
class ReservationDevices:
    """What the allocator is given for an allocation through a reservation (or beside them)."""

    preferred: dict[str, set[int]] | None
    required_minors: dict[str, set[int]] | None
    required: dict[str, DeviceResources] | None
    held: dict[str, DeviceResources]
    preemptible: dict[str, DeviceResources] | None


def victim_holder(state: CycleState, data: CycleData, victim: PodInfo) -> str | None:
    """The reservation a preemption victim was allocated from; the first such victim also reads
    which reservations the pod matched (for the usage they would give back)."""
    holder = holder_of(victim)
    if holder is not None and not data.matched:
        got = read_restored(state, NAME)
        if got is not None:
            data.matched = got.uids()
    return holder


def held_by(reservation: NominatedReservation) -> PodAllocations | Status:
    """The devices the reservation holds (``device-allocated`` written at its bind)."""
    raw = reservation.annotations.get(ANNOTATION_DEVICE_ALLOCATED)
    if not raw:
        return {}
    try:
        return parse_device_allocated(raw)
    except (AllocationFormatError, ValueError) as err:
        return Status.unresolvable(
            ERR_RESERVATION_UNREADABLE.format(
                name=reservation.name, annotation=ANNOTATION_DEVICE_ALLOCATED, error=err
            )
        )


def remained(
    held: PodAllocations, owners: Mapping[str, PodInfo], st: NodeDeviceState
) -> dict[str, DeviceResources]:
    """Per type and minor, what the reservation holds less what its owners took there (zeros kept:
    a Restricted reservation with nothing left offers zero, not the node's free)."""
    out: dict[str, DeviceResources] = {}
    for device_type, entries in held.items():
        minors: DeviceResources = {}
        for a in entries:
            minors[a.minor] = add_resources(minors.get(a.minor, {}), a.resources)
        for uid in owners:
            for a in st.allocs.get(uid, {}).get(device_type, ()):
                if a.minor in minors:
                    minors[a.minor] = subtract_non_negative(minors[a.minor], a.resources)
        if minors:
            out[device_type] = minors
    return out


def _add_into(into: dict[str, DeviceResources], usage: Mapping[str, DeviceResources] | None) -> None:
    for device_type, minors in (usage or {}).items():
        target = into.setdefault(device_type, {})
        for minor, res in minors.items():
            target[minor] = add_resources(target.get(minor, {}), res)


def reservation_view(
    handle: Handle,
    state: CycleState,
    data: CycleData,
    st: NodeDeviceState,
    node_name: str,
    nominated: NominatedReservation | None,
) -> ReservationDevices | Status | None:
    """What an allocation of the pod through ``nominated`` (None: beside all matched reservations)
    is given; None when no reservation concerns the pod's devices on this node."""
    got = read_restored(state, NAME)
    matched = got.on(node_name) if got is not None else []
    if nominated is None and not matched:
        return None
    held: dict[str, DeviceResources] = {}
    for r in matched:
        if nominated is not None and r.uid == nominated.uid:
            continue
        devices = held_by(r)
        if isinstance(devices, Status):
            return devices
        if devices:
            _add_into(held, remained(devices, handle.reserved_owners(r.uid), st))
    preemptible = data.preemptible.get(node_name)
    preferred = required_minors = required = None
    if nominated is not None:
        inside = data.preemptible_in_rrs.get((node_name, nominated.uid))
        if inside:
            merged: dict[str, DeviceResources] = {}
            _add_into(merged, preemptible)
            _add_into(merged, inside)
            preemptible = merged
        own = held_by(nominated)
        if isinstance(own, Status):
            return own
        minors = {t: {a.minor for a in entries} for t, entries in own.items() if entries}
        if minors:
            preferred = minors
            if nominated.restricted:
                required_minors = minors
                required = remained(own, handle.reserved_owners(nominated.uid), st)
                _add_into(required, inside)
    if not held and preferred is None and (nominated is None or not data.preemptible_in_rrs):
        return None  # the lent view is exactly what the pod may use
    return ReservationDevices(preferred, required_minors, required, held, preemptible)
