"""Pods assigned to each node and when (wall time): LoadAware's ``podAssignCache``.

A pod placed recently is not yet (fully) in its node's NodeMetric, so LoadAware adds an
estimate for it (spec 4.6, "needs estimation"); that takes the pod's assign time. The cache
is fed from two sides, keyed by pod uid per node so no pod counts twice:

* Reserve/Unreserve of this scheduler, with the wall time of the Reserve;
* the snapshot (as a :class:`~koordsched.framework.snapshot.SnapshotListener`): every pod
  added to or removed from a node, so pods bound before a restart and pods bound by other
  schedulers count too. A pod first seen this way is stamped with its ``PodScheduled``
  condition's ``lastTransitionTime`` when it has one (the real bind time; newer Koordinator
  does the same), else with the current wall time as v1.6 does.

A pod already known on its node keeps its first stamp when seen again (our own pod being
confirmed bound after Reserve, an update of its object): a re-stamp would make it look
freshly placed. Every change marks the node's snapshot row changed, so per-row results
are recomputed there.

One cache serves every LoadAware instance on a snapshot (profiles share the cluster).

Reserve pods (a Reservation standing on its node) are not pods that run: Koordinator's cache is
fed from the pod informer, which never sees them, so they are left out here too (the scheduler
also takes them off and puts them back on their node while owners come and go, which would
otherwise re-stamp them as freshly placed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import msgspec

from koordsched.api.core import Node, Pod
from koordsched.api.node_metric import MetricError, parse_time
from koordsched.api.reservation import is_reserve_pod
from koordsched.framework.snapshot import NodeInfo, Snapshot
from koordsched.framework.types import PodInfo

_POD_SCHEDULED = "PodScheduled"


class AssignInfo(msgspec.Struct, gc=False):
    """One per pod on a node, held as long as the pod is there: a struct the cyclic collector
    does not track (it refers to no container that could lead back to it)."""

    pod: PodInfo
    #: Unix seconds the pod was assigned to the node.
    timestamp: float


def scheduled_time(pod: Pod) -> float | None:
    """The ``PodScheduled=True`` condition's ``lastTransitionTime`` in Unix seconds, if set and readable."""
    for cond in pod.status.conditions:
        if cond.type == _POD_SCHEDULED and cond.status == "True" and cond.last_transition_time:
            try:
                return parse_time(cond.last_transition_time)
            except MetricError:
                return None
    return None


class AssignCache:
    def __init__(self, snapshot: Snapshot, wall: Callable[[], float]) -> None:
        self.snapshot = snapshot
        self._wall = wall
        #: node name -> pod uid -> assign info.
        self._nodes: dict[str, dict[str, AssignInfo]] = {}
        for info in snapshot.infos:
            for pod in info.pods.values():
                self.on_pod_added(info, pod)

    @classmethod
    def of(cls, snapshot: Snapshot, wall: Callable[[], float]) -> AssignCache:
        """The cache attached to ``snapshot``, attaching one on first use."""
        for listener in snapshot.listeners:
            if isinstance(listener, cls):
                return listener
        cache = cls(snapshot, wall)
        snapshot.listeners.append(cache)
        return cache

    def pods_on(self, node: str) -> Mapping[str, AssignInfo]:
        return self._nodes.get(node, {})

    def assign(self, node: str, pod: PodInfo, timestamp: float | None = None) -> bool:
        """Record ``pod`` on ``node``; a pod already there keeps its stamp. True when something changed."""
        pods = self._nodes.setdefault(node, {})
        known = pods.get(pod.uid)
        if known is not None:
            if known.pod is pod:
                return False
            known.pod = pod
            return True
        pods[pod.uid] = AssignInfo(pod, self._wall() if timestamp is None else timestamp)
        return True

    def unassign(self, node: str, uid: str) -> bool:
        pods = self._nodes.get(node)
        if pods is None or pods.pop(uid, None) is None:
            return False
        if not pods:
            del self._nodes[node]
        return True

    # --- Reserve / Unreserve ----------------------------------------------------------------

    def reserve(self, node: str, pod: PodInfo) -> None:
        if is_reserve_pod(pod.pod):
            return
        if self.assign(node, pod):
            self.snapshot.touch(node)

    def unreserve(self, node: str, pod: PodInfo) -> None:
        if self.unassign(node, pod.uid):
            self.snapshot.touch(node)

    # --- SnapshotListener -------------------------------------------------------------------
    # Pod changes already mark the row changed; node events carry no assignment.

    def on_node_added(self, info: NodeInfo) -> None:
        pass

    def on_node_updated(self, info: NodeInfo, old: Node) -> None:
        pass

    def on_node_removed(self, info: NodeInfo, moved: NodeInfo | None) -> None:
        pass

    def on_pod_added(self, info: NodeInfo, pod: PodInfo) -> None:
        if not is_reserve_pod(pod.pod):
            self.assign(info.name, pod, scheduled_time(pod.pod))

    def on_pod_removed(self, info: NodeInfo, pod: PodInfo) -> None:
        self.unassign(info.name, pod.uid)

    def on_pod_replaced(self, info: NodeInfo, old: PodInfo, new: PodInfo) -> None:
        """Our bind confirmed (the cache swapped the PodInfo): keep the new one only, with its stamp.
        The row is not touched: the cache swaps only a pod counted the same (requests and labels,
        which the estimate reads), so what was remembered for the row still holds."""
        known = self._nodes.get(info.name, {}).get(new.uid)
        if known is not None:
            known.pod = new
