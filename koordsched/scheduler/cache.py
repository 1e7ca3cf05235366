"""The scheduler's view of nodes and of the pods that use them, with assumed pods.

A pod is *assumed* on its node at Reserve, before its bind completes, so the next
cycle already sees the capacity as taken. The bind either succeeds (the watch then
reports the pod bound, which confirms the assumption) or fails (the pod is
forgotten: exactly what was added is removed). Pods that arrive bound to a node the
cache does not know yet are parked and counted once the node appears, as
kube-scheduler keeps a NodeInfo without a Node for them.

A *reserve pod* (a Reservation standing on its node, ``api.reservation``) holds what its
owners have not taken: the pods allocated from it (by the ``reservation-allocated``
annotation once bound, by :meth:`Cache.allocate_from` while assumed) count in full, and the
reserve pod counts only its remainder, so a pod that is no owner sees exactly what is free
and nothing is counted twice. For one cycle a pod may be *lent* the remainder of the
reservations it matched (:meth:`Cache.lend`); the cycle's end puts them back
(:meth:`Cache.end_lending`), carved by whatever the cycle took from them.
"""

from __future__ import annotations

import logging

import msgspec

from koordsched.api.core import Node
from koordsched.api.quantity import QuantityError
from koordsched.api.reservation import allocated_reservation, is_reserve_pod
from koordsched.api.resources import resource_list
from koordsched.framework.snapshot import NodeInfo, Snapshot, allocatable_problem
from koordsched.framework.types import PodInfo

log = logging.getLogger(__name__)


class CacheError(Exception):
    """An event the cache cannot apply (unknown pod, double assume); the object is skipped."""


class PodState(msgspec.Struct, gc=False):
    """One per pod in the cache: a struct the cyclic collector does not track (it refers to
    nothing that could lead back to it)."""

    pod: PodInfo
    node_name: str
    assumed: bool = False


class Cache:
    def __init__(self, snapshot: Snapshot | None = None) -> None:
        self.snapshot = snapshot or Snapshot()
        self._pods: dict[str, PodState] = {}
        self._parked: dict[str, dict[str, PodInfo]] = {}
        #: Nodes whose status could not be parsed: name -> reason. They are left out of scheduling.
        self.bad_nodes: dict[str, str] = {}
        #: Reserve pod uid -> the pods allocated from it (by uid); owner uid -> its reserve pod's uid.
        self._owners: dict[str, dict[str, PodInfo]] = {}
        self._holder_of: dict[str, str] = {}
        #: Reserve pods taken off their node for the current cycle: uid -> node.
        self._lent: dict[str, str] = {}

    # --- nodes ---------------------------------------------------------------------------------

    def _allocatable(self, node: Node) -> dict[str, int] | None:
        """The node's allocatable as a row can hold it, or None (the node is then left out).

        An amount beyond int64 leaves the node out rather than being clamped: whatever the
        node really has, the scheduler would be handing out a number nobody reported.
        """
        field = "status.allocatable" if node.status.allocatable else "status.capacity"
        written = node.status.allocatable or node.status.capacity
        problem: str | None
        try:
            alloc = resource_list(written)
            problem = allocatable_problem(alloc, written)
        except QuantityError as err:
            problem = str(err)
        if problem is not None:
            reason = f"node {node.metadata.name}: invalid {field}: {problem}"
            log.error("%s; node left out of scheduling", reason)
            self.bad_nodes[node.metadata.name] = reason
            return None
        self.bad_nodes.pop(node.metadata.name, None)
        return alloc

    def add_node(self, node: Node) -> NodeInfo | None:
        name = node.metadata.name
        if name in self.snapshot.by_name:
            return self.update_node(node)
        alloc = self._allocatable(node)
        if alloc is None:
            return None
        info = self.snapshot.add_node(node, alloc)
        for pod in self._parked.pop(name, {}).values():
            self.snapshot.add_pod(info, pod)
        return info

    def update_node(self, node: Node) -> NodeInfo | None:
        name = node.metadata.name
        if name not in self.snapshot.by_name:
            return self.add_node(node)
        alloc = self._allocatable(node)
        if alloc is None:
            self.remove_node(name)
            return None
        return self.snapshot.update_node(node, alloc)

    def remove_node(self, name: str) -> None:
        info = self.snapshot.by_name.get(name)
        if info is None:
            self.bad_nodes.pop(name, None)
            return
        # Pods still bound there keep counting if the node comes back (same as upstream).
        if info.pods:
            self._parked[name] = dict(info.pods)
        for pod in list(info.pods.values()):
            self.snapshot.remove_pod(info, pod)
        self.snapshot.remove_node(name)

    def node(self, name: str) -> NodeInfo | None:
        return self.snapshot.by_name.get(name)

    # --- pods ----------------------------------------------------------------------------------

    def _carved(self, pod: PodInfo) -> PodInfo:
        """A reserve pod as it stands on its node: what its owners have not taken."""
        owners = self._owners.get(pod.uid)
        if not owners or not is_reserve_pod(pod.pod):
            return pod
        taken: dict[str, int] = {}
        for owner in owners.values():
            for name, amount in owner.requests.items():
                taken[name] = taken.get(name, 0) + amount
        remaining = {name: max(0, amount - taken.get(name, 0)) for name, amount in pod.requests.items()}
        return PodInfo(pod.pod, remaining, pod.priority)

    def _link(self, pod: PodInfo, holder: str | None) -> None:
        """Record that ``pod`` allocates from reserve pod ``holder`` (None: from none) and re-carve."""
        old = self._holder_of.pop(pod.uid, None)
        if old is not None:
            owners = self._owners.get(old)
            if owners is not None:
                owners.pop(pod.uid, None)
                if not owners:
                    del self._owners[old]
        if holder is not None and holder != pod.uid and not is_reserve_pod(pod.pod):
            self._holder_of[pod.uid] = holder
            self._owners.setdefault(holder, {})[pod.uid] = pod
        for h in {old, holder}:
            if h is not None:
                self._recarve(h)

    def _recarve(self, holder: str) -> None:
        state = self._pods.get(holder)
        if state is None or holder in self._lent:
            return
        self._unplace(state.pod, state.node_name)
        self._place(state.pod, state.node_name)

    @staticmethod
    def _annotated_holder(pod: PodInfo) -> str | None:
        allocated = allocated_reservation(pod.pod)
        return None if allocated is None else allocated.uid or allocated.name

    def _place(self, pod: PodInfo, node_name: str) -> None:
        pod = self._carved(pod)
        info = self.snapshot.by_name.get(node_name)
        if info is None:
            self._parked.setdefault(node_name, {})[pod.uid] = pod
        else:
            self.snapshot.add_pod(info, pod)

    def _unplace(self, pod: PodInfo, node_name: str) -> None:
        info = self.snapshot.by_name.get(node_name)
        if info is None:
            parked = self._parked.get(node_name)
            if parked is not None:
                parked.pop(pod.uid, None)
                if not parked:
                    del self._parked[node_name]
        elif pod.uid in info.pods:
            self.snapshot.remove_pod(info, info.pods[pod.uid])

    def assume(self, pod: PodInfo, node_name: str) -> None:
        if pod.uid in self._pods:
            raise CacheError(f"pod {pod.key} is already in the cache; cannot assume it")
        self._place(pod, node_name)
        self._pods[pod.uid] = PodState(pod, node_name, assumed=True)

    def forget(self, uid: str) -> PodInfo | None:
        """Undo an assume; a no-op for a pod that is not (or no longer) assumed."""
        state = self._pods.get(uid)
        if state is None or not state.assumed:
            return None
        self._unplace(state.pod, state.node_name)
        del self._pods[uid]
        self._link(state.pod, None)
        return state.pod

    def add_pod(self, pod: PodInfo, node_name: str) -> None:
        """A bound pod was observed (a watch event or a simulated bind being confirmed)."""
        state = self._pods.get(pod.uid)
        if state is not None:
            if state.assumed and state.node_name == node_name:
                # Confirmation of our own bind: what was reserved stays; only the object is swapped
                # (it now carries the allocation annotations), so no column is touched twice. Labels
                # or a deletion changed since the assume change what the pod is counted as
                # (framework.pod_topology): then it is taken off and put back.
                info = self.snapshot.by_name.get(node_name)
                before = state.pod.pod.metadata
                after = pod.pod.metadata
                if (
                    info is not None
                    and pod.requests == state.pod.requests
                    and after.labels == before.labels
                    and after.deletion_timestamp == before.deletion_timestamp
                    and pod.uid in info.pods
                    and pod.uid not in self._owners
                ):
                    self.snapshot.replace_pod(info, pod)
                else:
                    self._unplace(state.pod, node_name)
                    self._place(pod, node_name)
                self._pods[pod.uid] = PodState(pod, node_name)
                self._link(pod, self._annotated_holder(pod) or self._holder_of.get(pod.uid))
                return
            self._unplace(state.pod, state.node_name)
        self._place(pod, node_name)
        self._pods[pod.uid] = PodState(pod, node_name)
        self._link(pod, self._annotated_holder(pod))

    def update_pod(self, pod: PodInfo, node_name: str) -> None:
        state = self._pods.get(pod.uid)
        if state is None or state.assumed:
            self.add_pod(pod, node_name)
            return
        self._unplace(state.pod, state.node_name)
        self._place(pod, node_name)
        self._pods[pod.uid] = PodState(pod, node_name)
        self._link(pod, self._annotated_holder(pod))

    def remove_pod(self, uid: str) -> PodInfo | None:
        state = self._pods.pop(uid, None)
        if state is None:
            return None
        self._unplace(state.pod, state.node_name)
        self._link(state.pod, None)
        return state.pod

    # --- reserve pods ----------------------------------------------------------------------------

    def allocate_from(self, uid: str, holder: str | None) -> None:
        """The (assumed) pod ``uid`` allocates from reserve pod ``holder`` (None: from none)."""
        state = self._pods.get(uid)
        if state is not None:
            self._link(state.pod, holder)

    def owners_of(self, holder: str) -> dict[str, PodInfo]:
        """The pods allocated from reserve pod ``holder``, by uid (assumed ones included)."""
        return self._owners.get(holder, {})

    def lend(self, holders: list[str]) -> None:
        """Take these reserve pods off their nodes until :meth:`end_lending` (one cycle's view)."""
        for holder in holders:
            state = self._pods.get(holder)
            if state is None or holder in self._lent or state.node_name not in self.snapshot.by_name:
                continue
            self._unplace(state.pod, state.node_name)
            self._lent[holder] = state.node_name

    def end_lending(self) -> None:
        """Put lent reserve pods back, carved by what their owners now take."""
        if not self._lent:
            return
        lent, self._lent = self._lent, {}
        for holder in lent:
            state = self._pods.get(holder)
            if state is not None:
                self._place(state.pod, state.node_name)

    def is_assumed(self, uid: str) -> bool:
        state = self._pods.get(uid)
        return state is not None and state.assumed

    def pod_state(self, uid: str) -> PodState | None:
        return self._pods.get(uid)

    def pods(self) -> list[PodState]:
        return list(self._pods.values())

    def sizes(self) -> dict[str, int]:
        return {
            "nodes": len(self.snapshot),
            "pods": len(self._pods),
            "assumed_pods": sum(1 for s in self._pods.values() if s.assumed),
        }
