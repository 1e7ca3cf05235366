"""NodeNUMAResource's Reserve and Unreserve: recording the pod's CPU and NUMA allocation.

Reserve recomputes the pod's options on the chosen node within the affinity the topology
manager admitted there, allocates and records the allocation in the resource manager, so the
next cycle sees those CPUs and NUMA resources taken. A pod allocated from a reservation
(``framework.reservations``) takes the reservation's own CPUs first (spec 4.2 restore: its
``resource-status`` cpuset is preferred; the reservation is lent to the pod's cycle, so those
CPUs are free in it), never what the other matched reservations hold, and from a Restricted
one only its own (:mod:`.reservations`). Unreserve releases exactly what this cycle recorded.
"""

from __future__ import annotations

from koordsched.api.resources import CPU
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Handle
from koordsched.framework.reservations import NominatedReservation
from koordsched.framework.snapshot import NodeInfo, Snapshot
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.nodenumaresource.effective import Allocator, node_policy, request_cpu_bind
from koordsched.plugins.nodenumaresource.prefilter import PreFilterState
from koordsched.plugins.nodenumaresource.reservations import apply, reservation_cpus
from koordsched.plugins.nodenumaresource.resource_manager import ERR_INVALID_CPU_TOPOLOGY, allocate
from koordsched.plugins.topologymanager.interface import affinity_store
from koordsched.plugins.topologymanager.policy import POLICY_NONE


def reserve(
    allocator: Allocator,
    handle: Handle,
    snapshot: Snapshot,
    state: CycleState,
    st: PreFilterState,
    pod: PodInfo,
    info: NodeInfo,
) -> Status:
    """Allocate the pod on ``info`` (within the affinity admitted there in this cycle); record it in
    the resource manager and ``st``."""
    numa = allocator.state
    view = numa.view(info)
    policy = node_policy(view, st)
    bind, status = request_cpu_bind(st, view.node_cpu_bind_policy)
    if not status.ok:
        return status
    if not bind and policy == POLICY_NONE:
        return SUCCESS
    refused = numa.refusal(info)
    if refused is not None:
        return refused
    if bind and not view.topology.is_valid():
        return Status(Code.ERROR, ERR_INVALID_CPU_TOPOLOGY)
    affinity = affinity_store(state).get(info.name)
    nominated = handle.reservation_points().nominated_reservation(state, info.name)
    cpus = reservation_cpus(handle, state, numa.manager, info.name, nominated, CPU in st.requests)
    if isinstance(cpus, Status):
        return cpus
    try:
        options = allocator.options(
            st,
            info,
            view,
            bind,
            affinity.affinity if affinity else None,
            through=nominated.uid if nominated is not None else None,
        )
    except ValueError as err:
        return Status(Code.ERROR, str(err))
    if cpus is not None:
        apply(options, cpus)
    meta = pod.pod.metadata
    node_name = info.name
    result = allocate(numa.manager.node(node_name), options, pod.uid, meta.namespace, meta.name)
    if isinstance(result, Status):
        return result
    numa.manager.update(node_name, result)
    snapshot.touch(node_name)  # results remembered for the row read the old allocations
    st.allocation = result
    st.allocation_node = node_name
    return SUCCESS


def unreserve(
    allocator: Allocator, snapshot: Snapshot, st: PreFilterState, pod: PodInfo, node_name: str
) -> None:
    """Release what Reserve recorded in this cycle (nothing if it recorded nothing)."""
    if st.allocation is None:
        return
    manager = allocator.state.manager
    current = manager.get(node_name, pod.uid)
    # Release only what this cycle recorded (the annotation of a bound pod is the truth after that).
    if current is st.allocation:
        manager.release(node_name, pod.uid)
        snapshot.touch(node_name)
    st.allocation = None


def filter_reservation(
    allocator: Allocator,
    handle: Handle,
    state: CycleState,
    st: PreFilterState,
    pod: PodInfo,
    info: NodeInfo,
    nominated: NominatedReservation | None,
) -> Status:
    """``FilterNominateReservation``: a trial cpuset through ``nominated`` (or beside every matched
    reservation). Only a pod given a cpuset is concerned; what the node itself refuses is said by
    the Filter."""
    numa = allocator.state
    view = numa.view(info)
    bind, status = request_cpu_bind(st, view.node_cpu_bind_policy)
    if not status.ok or not bind or numa.refusal(info) is not None or not view.topology.is_valid():
        return SUCCESS
    cpus = reservation_cpus(handle, state, numa.manager, info.name, nominated, CPU in st.requests)
    if cpus is None:
        return SUCCESS
    if isinstance(cpus, Status):
        return cpus
    affinity = affinity_store(state).get(info.name)
    try:
        options = allocator.options(
            st,
            info,
            view,
            bind,
            affinity.affinity if affinity else None,
            through=nominated.uid if nominated is not None else None,
        )
    except ValueError:
        return SUCCESS  # the Filter says why
    apply(options, cpus)
    result = allocate(numa.manager.node(info.name), options, pod.uid)
    if not isinstance(result, Status) or nominated is None:
        return result if isinstance(result, Status) else SUCCESS
    return Status(result.code, *(f"Reservation(s) {r}" for r in result.reasons))
