"""NodeNUMAResource's Score on one node (spec 4.2, "Score"; no NormalizeScore).

Without a NUMA policy the node is scored over its requested and allocatable resources,
bound CPUs counted amplified (``scoreWithAmplifiedCPUs``). With one, a trial allocation
within the affinity the topology manager admitted decides which NUMA nodes count: the score
is over their totals and what is allocated on them.
"""

from __future__ import annotations

import logging

from koordsched.api.resources import CPU, add_into
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.nodenumaresource.effective import Allocator, node_policy, request_cpu_bind
from koordsched.plugins.nodenumaresource.options import NodeView, amplify
from koordsched.plugins.nodenumaresource.prefilter import PreFilterState
from koordsched.plugins.nodenumaresource.resource_manager import ResourceOptions, allocate
from koordsched.plugins.nodenumaresource.scoring import ResourceScorer
from koordsched.plugins.topologymanager.interface import AffinityStore
from koordsched.plugins.topologymanager.policy import POLICY_NONE

log = logging.getLogger(__name__)


class NodeScore:
    """Koordinator's Score for a pod on one node."""

    def __init__(self, allocator: Allocator, scorer: ResourceScorer) -> None:
        self._allocator = allocator
        self._scorer = scorer

    def score_node(self, st: PreFilterState, pod: PodInfo, info: NodeInfo, store: AffinityStore) -> int:
        numa = self._allocator.state
        view = numa.view(info)
        policy = node_policy(view, st)
        bind, status = request_cpu_bind(st, view.node_cpu_bind_policy)
        if not status.ok or (bind and not view.topology.is_valid()):
            return 0
        affinity = store.get(info.name)
        try:
            options = self._allocator.options(st, info, view, bind, affinity.affinity if affinity else None)
        except ValueError:
            return 0
        if policy == POLICY_NONE:
            return self._score_with_amplified_cpus(st, info, view, options)
        na = numa.manager.node(info.name)
        result = allocate(na, options, pod.uid)
        if isinstance(result, Status):
            # Koordinator fails the cycle here; after a passing Filter this only means state moved on.
            log.debug("pod %s: NUMA score allocation on %s failed: %s", pod.key, info.name, result.message())
            return 0
        if result.numa:
            zones = {z.node: z for z in view.zones}
            _, allocated = na.available_numa(view.zones, view.cpu_ratio, view.topology, options.reusable)
            allocatable: dict[str, int] = {}
            requested: dict[str, int] = {}
            for n in result.numa:
                if held := allocated.get(n.node):
                    add_into(requested, held)
                if (zone := zones.get(n.node)) is not None:
                    add_into(allocatable, zone.resources)
        else:
            allocatable = info.allocatable_map()
            requested = info.requested_map()
        if result.cpuset:
            bound = len(na.allocated_cpus(options.preferred_cpus - result.cpuset))
            requested[CPU] = amplify(bound * 1000, view.cpu_ratio)
        return self._scorer.score(requested, allocatable, options.requests)

    def _score_with_amplified_cpus(
        self, st: PreFilterState, info: NodeInfo, view: NodeView, options: ResourceOptions
    ) -> int:
        ratio = view.cpu_ratio
        requested = info.requested_map()
        if st.cpu_milli and ratio > 1:
            if view.options.has_nrt and not view.topology.is_valid():
                return 0
            na = self._allocator.state.manager.nodes.get(info.name)
            bound = 1000 * (len(na.cpu_refs) if na is not None else 0)
            requested[CPU] = requested.get(CPU, 0) - bound + amplify(bound, ratio)
        return self._scorer.score(requested, info.allocatable_map(), options.requests)
