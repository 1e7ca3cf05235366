"""NodeNUMAResource's Filter on one node (spec 4.2, "Filter").

Koordinator's Filter step by step, including the error strings (they reach users in
events): the merged NUMA policy, the amplified-cpu check, the CPU-binding checks (with a
real allocation when a required bind policy applies without a NUMA policy), and NUMA
alignment through the topology manager's Admit, which merges this plugin's hints with every
other provider's (DeviceShare's GPUs) and stores the admitted affinity in the cycle.
"""

from __future__ import annotations

from koordsched.api.resources import CPU
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.nodenumaresource.effective import Allocator, merge_topology_policy, request_cpu_bind
from koordsched.plugins.nodenumaresource.hints import HintProviders
from koordsched.plugins.nodenumaresource.options import (
    CPU_BIND_FULL_PCPUS,
    CPU_BIND_SPREAD_BY_PCPUS,
    NODE_CPU_BIND_FULL_PCPUS_ONLY,
    NODE_CPU_BIND_SPREAD_BY_PCPUS,
    NodeView,
    amplify,
)
from koordsched.plugins.nodenumaresource.prefilter import PreFilterState
from koordsched.plugins.nodenumaresource.resource_manager import ERR_INVALID_CPU_TOPOLOGY
from koordsched.plugins.topologymanager import manager
from koordsched.plugins.topologymanager.merge import EXCLUSIVE_REQUIRED
from koordsched.plugins.topologymanager.policy import POLICIES, POLICY_NONE

ERR_NOT_MATCH_NUMA_TOPOLOGY = "node(s) NUMA Topology policy not match"
ERR_SMT_ALIGNMENT = "node(s) requested cpus not multiple cpus per core"
ERR_CPU_BIND_POLICY_CONFLICT = "node(s) cpu bind policy conflicts with pod's required cpu bind policy"
ERR_INVALID_CPU_AMPLIFICATION_RATIO = "node(s) invalid CPU amplification ratio"
ERR_INSUFFICIENT_AMPLIFIED_CPU = "Insufficient amplified cpu"
ERR_MISSING_NUMA_RESOURCES = "node(s) missing NUMA resources"
#: Not in Koordinator (which panics on an unknown policy string): rejects only that node.
ERR_INVALID_NUMA_POLICY = 'node(s) invalid NUMA Topology policy "{}"'


class NodeFilter:
    """Koordinator's Filter for a pod on one node."""

    def __init__(self, allocator: Allocator, providers: HintProviders) -> None:
        self._allocator = allocator
        self._providers = providers

    def filter_node(self, state: CycleState, st: PreFilterState, pod: PodInfo, info: NodeInfo) -> Status:
        view = self._allocator.state.view(info)
        exclusive = st.pod_numa_exclusive
        if not exclusive and st.pod_numa_policy:
            exclusive = EXCLUSIVE_REQUIRED
        policy = merge_topology_policy(view.numa_policy, st.pod_numa_policy)
        if policy is None:
            return Status.unresolvable(ERR_NOT_MATCH_NUMA_TOPOLOGY)
        bind, status = request_cpu_bind(st, view.node_cpu_bind_policy)
        if not status.ok:
            return status
        if bind or policy != POLICY_NONE:
            # Which CPUs or NUMA resources are taken there cannot be read: nothing is bound or aligned.
            refused = self._allocator.state.refusal(info)
            if refused is not None:
                return refused
        status = self._filter_amplified_cpus(st, info, view, bind)
        if not status.ok:
            return status
        if bind:
            topology = view.topology
            if not topology.is_valid():
                return Status.unresolvable(ERR_INVALID_CPU_TOPOLOGY)
            required = st.required_cpu_bind_policy
            if view.node_cpu_bind_policy == NODE_CPU_BIND_FULL_PCPUS_ONLY:
                required = CPU_BIND_FULL_PCPUS
            elif view.node_cpu_bind_policy == NODE_CPU_BIND_SPREAD_BY_PCPUS:
                required = CPU_BIND_SPREAD_BY_PCPUS
            if st.required_cpu_bind_policy and st.required_cpu_bind_policy != required:
                return Status.unresolvable(ERR_CPU_BIND_POLICY_CONFLICT)
            if required == CPU_BIND_FULL_PCPUS and st.num_cpus_needed % topology.cpus_per_core:
                return Status.unresolvable(ERR_SMT_ALIGNMENT)
            if required and policy == POLICY_NONE:
                return self._allocator.trial(st, pod, info, view, bind, None)
        if policy != POLICY_NONE:
            if policy not in POLICIES:
                return Status.unresolvable(ERR_INVALID_NUMA_POLICY.format(policy))
            return self._filter_by_numa_node(state, pod, info, view, policy, exclusive)
        return SUCCESS

    def _filter_amplified_cpus(
        self, st: PreFilterState, info: NodeInfo, view: NodeView, bind: bool
    ) -> Status:
        """With a cpu amplification ratio > 1, bound CPUs count amplified against the node's allocatable."""
        pod_cpu = st.cpu_milli
        if pod_cpu == 0:
            return SUCCESS
        settings = view.settings
        if settings.ratios_invalid:
            return Status.unresolvable(ERR_INVALID_CPU_AMPLIFICATION_RATIO)
        ratio = settings.cpu_ratio
        if ratio <= 1:
            return SUCCESS
        if bind:
            pod_cpu = amplify(pod_cpu, ratio)
        if view.options.has_nrt and not view.topology.is_valid():
            return Status.unresolvable(ERR_INVALID_CPU_TOPOLOGY)
        na = self._allocator.state.manager.nodes.get(info.name)
        bound = 1000 * (len(na.cpu_refs) if na is not None else 0)
        requested = info.requested(CPU)
        if requested >= bound > 0:
            requested = requested - bound + amplify(bound, ratio)
        if pod_cpu > info.allocatable(CPU) - requested:
            return Status.unschedulable(ERR_INSUFFICIENT_AMPLIFIED_CPU)
        return SUCCESS

    def _filter_by_numa_node(
        self, state: CycleState, pod: PodInfo, info: NodeInfo, view: NodeView, policy: str, exclusive: str
    ) -> Status:
        numa_nodes = view.options.numa_nodes
        if not numa_nodes:
            return Status.unresolvable(ERR_MISSING_NUMA_RESOURCES)
        na = self._allocator.state.manager.nodes.get(info.name)
        statuses = na.numa_statuses(view.topology) if na is not None else {}
        return manager.admit(state, pod, info, numa_nodes, policy, exclusive, statuses, self._providers.all())
