"""NodeNUMAResource as a NUMA hint provider, and the profile's other providers.

:class:`NUMAHints` is this plugin's side of the topology manager
(:mod:`koordsched.plugins.topologymanager.manager`): Koordinator's
``GetPodTopologyHints`` (spec 4.2, "NodeNUMAResource hints") and ``Allocate`` within the
affinity the manager chose.

:class:`HintProviders` finds every hint provider of the profile (this plugin and
DeviceShare, in plugin order), whose hints the manager merges, and tells whether the
others can say what their hints read (``SignedHintProvider``): only then may a verdict
of the manager be remembered (:mod:`~koordsched.plugins.nodenumaresource.remembered`).
"""

from __future__ import annotations

import logging

from koordsched.framework.interface import Handle
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.nodenumaresource.effective import Allocator, node_policy, request_cpu_bind
from koordsched.plugins.nodenumaresource.prefilter import PreFilterState
from koordsched.plugins.nodenumaresource.resource_manager import HintsError, topology_hints
from koordsched.plugins.nodenumaresource.scoring import ResourceScorer
from koordsched.plugins.topologymanager.interface import (
    NUMATopologyHint,
    NUMATopologyHintProvider,
    SignedHintProvider,
    TopologyHints,
    providers,
)

log = logging.getLogger(__name__)

ERR_INSUFFICIENT_NUMA_NODE_RESOURCES = "node(s) Insufficient NUMA Node resources"


class HintProviders:
    """The profile's NUMA hint providers, as this plugin's Filter hands them to the topology manager."""

    def __init__(self, own: NUMATopologyHintProvider, handle: Handle) -> None:
        self._own = own
        self._handle = handle
        #: Set once the profile's plugins are all built (the list does not change after that).
        self._found: list[NUMATopologyHintProvider] | None = None
        self._signed: tuple[list[SignedHintProvider] | None] | None = None

    def all(self) -> list[NUMATopologyHintProvider]:
        """Every hint provider of the profile in plugin order (this plugin included, first if not listed)."""
        if self._found is not None:
            return self._found
        found = providers(self._handle)
        if not any(p is self._own for p in found):
            found = [self._own, *found]
            return found  # the profile's plugins are not all built yet: look again next time
        self._found = found
        return found

    def others(self) -> list[NUMATopologyHintProvider]:
        return [p for p in self.all() if p is not self._own]

    def signed(self) -> list[SignedHintProvider] | None:
        """The other hint providers, if every one can say what its hints read (else None)."""
        if self._signed is not None and self._found is not None:
            return self._signed[0]
        others = self.others()
        signed: list[SignedHintProvider] = [p for p in others if isinstance(p, SignedHintProvider)]
        out = signed if len(signed) == len(others) else None
        if self._found is not None:  # the profile's plugins are all built: it stays so
            self._signed = (out,)
        return out


class NUMAHints:
    """This plugin's hints for a pod on a node, and allocations within the affinity merged from them."""

    def __init__(self, allocator: Allocator, numa_scorer: ResourceScorer) -> None:
        self._allocator = allocator
        self._numa_scorer = numa_scorer

    def hints(self, st: PreFilterState, pod: PodInfo, node: NodeInfo) -> tuple[TopologyHints | None, Status]:
        """``GetPodTopologyHints``: per requested NUMA resource, the NUMA node sets that can hold it."""
        numa = self._allocator.state
        view = numa.view(node)
        policy = node_policy(view, st)
        bind, status = request_cpu_bind(st, view.node_cpu_bind_policy)
        if not status.ok:
            return None, status
        refused = numa.refusal(node)
        if refused is not None:
            return None, refused
        try:
            options = self._allocator.options(st, node, view, bind, None)
        except ValueError as err:
            return None, Status(Code.ERROR, str(err))
        options.numa_scorer = self._numa_scorer.score
        try:
            hints = topology_hints(numa.manager.node(node.name), options, policy, pod.uid)
        except HintsError as err:
            log.debug("pod %s: no NUMA hints on node %s: %s", pod.key, node.name, err)
            return None, Status.unschedulable(ERR_INSUFFICIENT_NUMA_NODE_RESOURCES)
        return hints, SUCCESS

    def allocate(
        self, st: PreFilterState, pod: PodInfo, node: NodeInfo, affinity: NUMATopologyHint
    ) -> Status:
        """A trial allocation within ``affinity`` (nothing is recorded: Reserve does that)."""
        view = self._allocator.state.view(node)
        bind, status = request_cpu_bind(st, view.node_cpu_bind_policy)
        if not status.ok:
            return status
        refused = self._allocator.state.refusal(node)
        if refused is not None:
            return refused
        return self._allocator.trial(st, pod, node, view, bind, affinity.affinity)
