"""The pod's effective settings on one node, and allocations from them.

Koordinator recomputes these in Filter, Score, Reserve, PreBind and the hints (spec 4.2,
"Per-node effective settings"): whether the pod gets a cpuset there (``requestCPUBind``),
the CPU bind policy in force (``getCPUBindPolicy``), the merged NUMA policy
(``mergeTopologyPolicy``) and the :class:`ResourceOptions` of an allocation
(``getResourceOptions``). :class:`Allocator` builds the options and runs trial
allocations against NodeNUMAResource's cluster-wide state.
"""

from __future__ import annotations

from koordsched.api.resources import CPU
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.nodenumaresource.node_state import NUMANodeState
from koordsched.plugins.nodenumaresource.options import (
    CPU_BIND_FULL_PCPUS,
    CPU_BIND_SPREAD_BY_PCPUS,
    NODE_CPU_BIND_FULL_PCPUS_ONLY,
    NODE_CPU_BIND_NONE,
    NODE_CPU_BIND_SPREAD_BY_PCPUS,
    NodeView,
    amplify,
)
from koordsched.plugins.nodenumaresource.prefilter import (
    ANY_RESERVATION,
    ERR_INVALID_REQUESTED_CPUS,
    PreFilterState,
)
from koordsched.plugins.nodenumaresource.resource_manager import ResourceOptions, allocate
from koordsched.plugins.topologymanager.policy import POLICIES, POLICY_NONE


def merge_topology_policy(node_policy: str, pod_policy: str) -> str | None:
    """``mergeTopologyPolicy``: the pod's policy wins; None when both are set and differ."""
    if node_policy and pod_policy and node_policy != pod_policy:
        return None
    return pod_policy or node_policy


def node_policy(view: NodeView, st: PreFilterState) -> str:
    """The merged NUMA policy where Filter already vetted it (a mismatch counts as none)."""
    policy = merge_topology_policy(view.numa_policy, st.pod_numa_policy)
    if policy is None or policy not in POLICIES:
        return POLICY_NONE
    return policy


def request_cpu_bind(st: PreFilterState, node_bind_policy: str) -> tuple[bool, Status]:
    """``requestCPUBind``: the pod asked for it, or the node binds every integer cpu request."""
    if st.request_cpu_bind:
        return True, SUCCESS
    cpu = st.cpu_milli
    if cpu == 0:
        return False, SUCCESS
    if node_bind_policy and node_bind_policy != NODE_CPU_BIND_NONE:
        if cpu % 1000:
            return False, Status.unresolvable(ERR_INVALID_REQUESTED_CPUS)
        return True, SUCCESS
    return False, SUCCESS


def cpu_bind_policy(view: NodeView, st: PreFilterState) -> tuple[str, bool]:
    """``getCPUBindPolicy``: (policy, required) with the node's bind policy forcing a required one."""
    if st.required_cpu_bind_policy:
        return st.required_cpu_bind_policy, True
    if view.node_cpu_bind_policy == NODE_CPU_BIND_SPREAD_BY_PCPUS:
        return CPU_BIND_SPREAD_BY_PCPUS, True
    if view.node_cpu_bind_policy == NODE_CPU_BIND_FULL_PCPUS_ONLY:
        return CPU_BIND_FULL_PCPUS, True
    return st.preferred_cpu_bind_policy, False


class Allocator:
    """Allocations of a pod on a node: the options Koordinator's ``resourceManager.Allocate`` takes,
    and trial allocations (nothing recorded) against the cluster-wide state."""

    def __init__(self, state: NUMANodeState, default_strategy: str) -> None:
        self.state = state
        #: The args' NUMA allocate strategy, for nodes whose label names none.
        self._default_strategy = default_strategy

    def options(
        self,
        st: PreFilterState,
        info: NodeInfo,
        view: NodeView,
        bind: bool,
        hint: int | None,
        through: str | None = ANY_RESERVATION,
    ) -> ResourceOptions:
        """``getResourceOptions``; ValueError when the node's amplification ratios cannot be read.
        ``through``: the reservation the allocation goes through (see ``preemptible_for``)."""
        if view.zones_error:
            raise ValueError(view.zones_error)
        requests = st.requests
        ratio = view.cpu_ratio
        if bind and ratio > 1 and requests.get(CPU, 0):
            requests = dict(requests)
            requests[CPU] = amplify(requests[CPU], ratio)
        policy, required = cpu_bind_policy(view, st)
        preempt = st.preemptible_for(info.name, through)
        return ResourceOptions(
            view=view,
            num_cpus_needed=st.num_cpus_needed,
            request_cpu_bind=bind,
            requests=requests,
            original_requests=st.requests,
            required_cpu_bind_policy=required,
            cpu_bind_policy=policy,
            cpu_exclusive_policy=st.preferred_cpu_exclusive_policy,
            numa_allocate_strategy=view.settings.numa_allocate_strategy or self._default_strategy,
            hint=hint,
            request_formats=st.request_formats,
            preemptible_cpus=preempt.cpus() if preempt is not None else frozenset(),
            reusable={k: dict(v) for k, v in preempt.numa.items()} if preempt is not None else {},
        )

    def trial(
        self, st: PreFilterState, pod: PodInfo, info: NodeInfo, view: NodeView, bind: bool, hint: int | None
    ) -> Status:
        """Whether the pod can be allocated on ``info`` (within ``hint``); nothing is recorded."""
        try:
            options = self.options(st, info, view, bind, hint)
        except ValueError as err:
            return Status.unresolvable(str(err))
        result = allocate(self.state.manager.node(info.name), options, pod.uid)
        return result if isinstance(result, Status) else SUCCESS
