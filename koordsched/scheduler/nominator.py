"""Pods nominated to a node by a preemption, not bound yet (kube-scheduler's nominator).

A preemptor is nominated to the node where its victims are being evicted: its
``status.nominatedNodeName``. Until it binds, lower-priority pods filtering that node count it
as if it were there (:mod:`koordsched.framework.nominated`), so the room the victims leave is
kept for it. A nomination comes from our own PostFilter (recorded at once, before the status
patch comes back) or from a pod's status (a restart, another scheduler instance); it ends when
the pod is assumed, bound or deleted, or when a later preemption clears it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from koordsched.api.core import Pod
from koordsched.framework.types import PodInfo
from koordsched.scheduler.cache import Cache


class Nominator:
    """Implements :class:`koordsched.framework.nominated.ClusterPods` for the framework."""

    def __init__(self, cache: Cache) -> None:
        self._cache = cache
        self._by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}

    # --- ClusterPods ---------------------------------------------------------------------------

    def any_nominated(self) -> bool:
        return bool(self._node_of)

    def nominated_on(self, node_name: str) -> Sequence[PodInfo]:
        pods = self._by_node.get(node_name)
        return list(pods.values()) if pods else ()

    def nominated_nodes(self) -> Collection[str]:
        return self._by_node.keys()

    def assumed(self, uid: str) -> bool:
        return self._cache.is_assumed(uid)

    # --- changes -------------------------------------------------------------------------------

    def node_of(self, uid: str) -> str | None:
        return self._node_of.get(uid)

    def add(self, pod: PodInfo, node_name: str) -> None:
        self.delete(pod.uid)
        if not node_name:
            return
        self._node_of[pod.uid] = node_name
        self._by_node.setdefault(node_name, {})[pod.uid] = pod

    def delete(self, uid: str) -> bool:
        node = self._node_of.pop(uid, None)
        if node is None:
            return False
        pods = self._by_node[node]
        del pods[uid]
        if not pods:
            del self._by_node[node]
        return True

    def update(self, old: Pod | None, pod: PodInfo) -> None:
        """A pending pod changed (upstream's ``UpdateNominatedPod``): its status names the node, or,
        when neither version names one, the nomination we recorded ourselves is kept."""
        named = pod.pod.status.nominated_node_name
        if named:
            self.add(pod, named)
            return
        known = self._node_of.get(pod.uid)
        if known is not None and (old is None or not old.status.nominated_node_name):
            self.add(pod, known)
        else:
            self.delete(pod.uid)

    def lower_priority_on(self, node_name: str, priority: int) -> list[PodInfo]:
        """Pods nominated to ``node_name`` with a priority below ``priority``."""
        return [p for p in self.nominated_on(node_name) if p.priority < priority]

    def __len__(self) -> int:
        return len(self._node_of)
