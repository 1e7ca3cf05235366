"""cpu and memory counted the "non-zero" way, as NodeResourcesFit's scores count them.

kube-scheduler scores LeastAllocated, MostAllocated and RequestedToCapacityRatio with
``NodeInfo.NonZeroRequested``: a container that does not state a cpu (memory) request is
counted as asking for 100m (200Mi), so a node full of request-less pods does not look
empty. The snapshot only keeps true requests, so :class:`NonZeroRequested` keeps this
second pair of columns next to it, following pod and node changes as a
:class:`~koordsched.framework.snapshot.SnapshotListener`.

Two upstream computations differ for sidecars (restartable init containers), and both
are reproduced: the node side (``calculateResource``) takes the larger of the regular
containers' sum and each init step, the pod side (``PodRequests`` with
``NonMissingContainerRequests``) adds sidecars to the regular sum.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from koordsched.api.core import Container, Node, Pod, ResourceList
from koordsched.api.quantity import QuantityError
from koordsched.api.resources import container_requests, resource_list
from koordsched.framework.shared_memo import IdentityMemo
from koordsched.framework.snapshot import I64, NodeInfo, Snapshot
from koordsched.framework.types import PodInfo

DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

#: The non-zero requests per (spec, requests) object pair: they depend on nothing else.
_MEMO: IdentityMemo[tuple[int, int, int, int]] = IdentityMemo()
_CPU = "cpu"
_MEMORY = "memory"
#: The most one pod counts for (2**53: a thousand such pods on a node still sum within int64).
_MAX_NONZERO = 2**53


def _nonzero(reqs: Mapping[str, int]) -> tuple[int, int]:
    """``GetNonzeroRequests``: a missing key gets the default, an explicit 0 stays 0."""
    return (
        reqs.get(_CPU, DEFAULT_MILLI_CPU_REQUEST),
        reqs.get(_MEMORY, DEFAULT_MEMORY_REQUEST),
    )


def _requests(c: Container) -> dict[str, int]:
    try:
        return container_requests(c)
    except QuantityError:
        return {}


def _overhead(overhead: ResourceList) -> tuple[int, int]:
    if not overhead:
        return 0, 0
    try:
        parsed = resource_list(overhead)
    except QuantityError:
        return 0, 0
    return parsed.get(_CPU, 0), parsed.get(_MEMORY, 0)


def compute_nonzero(pod: Pod) -> tuple[int, int, int, int]:
    """(node-side cpu, node-side memory, pod-side cpu, pod-side memory) non-zero requests."""
    spec = pod.spec
    node_cpu = node_mem = 0
    for c in spec.containers:
        cpu, mem = _nonzero(_requests(c))
        node_cpu += cpu
        node_mem += mem
    pod_cpu, pod_mem = node_cpu, node_mem
    init_node_cpu = init_node_mem = 0
    init_pod_cpu = init_pod_mem = 0
    side_raw: dict[str, int] = {}
    side_cpu = side_mem = 0
    for c in spec.init_containers:
        raw = _requests(c)
        cpu, mem = _nonzero(raw)
        if c.restart_policy == "Always":
            pod_cpu += cpu
            pod_mem += mem
            side_cpu += cpu
            side_mem += mem
            for k, v in raw.items():
                side_raw[k] = side_raw.get(k, 0) + v
            # Node side: the callback sees the cumulative sidecar list and defaults its missing keys.
            step_node = _nonzero(side_raw)
            step_pod = (side_cpu, side_mem)
        else:
            step_raw = dict(raw)
            for k, v in side_raw.items():
                step_raw[k] = step_raw.get(k, 0) + v
            step_node = _nonzero(step_raw)
            step_pod = (cpu + side_cpu, mem + side_mem)
        init_node_cpu = max(init_node_cpu, step_node[0])
        init_node_mem = max(init_node_mem, step_node[1])
        init_pod_cpu = max(init_pod_cpu, step_pod[0])
        init_pod_mem = max(init_pod_mem, step_pod[1])
    over_cpu, over_mem = _overhead(spec.overhead)
    return (
        max(node_cpu, init_node_cpu) + over_cpu,
        max(node_mem, init_node_mem) + over_mem,
        max(pod_cpu, init_pod_cpu) + over_cpu,
        max(pod_mem, init_pod_mem) + over_mem,
    )


def _single_container_nonzero(pod: PodInfo) -> tuple[int, int, int, int] | None:
    """The common shape (one container, no init containers, no overhead) from the parsed requests.

    A resource the container names (in requests, or in limits that default them) counts as
    parsed, an explicit 0 included; a resource it does not name gets the default.
    """
    spec = pod.pod.spec
    if len(spec.containers) != 1 or spec.init_containers or spec.overhead:
        return None
    res = spec.containers[0].resources
    cpu = (
        pod.requests.get(_CPU, 0) if _CPU in res.requests or _CPU in res.limits else DEFAULT_MILLI_CPU_REQUEST
    )
    mem = (
        pod.requests.get(_MEMORY, 0)
        if _MEMORY in res.requests or _MEMORY in res.limits
        else DEFAULT_MEMORY_REQUEST
    )
    return cpu, mem, cpu, mem


def pod_nonzero(pod: PodInfo) -> tuple[int, int, int, int]:
    """:func:`compute_nonzero`, worked out once per spec object (see ``framework.shared_memo``)."""
    # Read from the spec and the requests dict, both shared by pods of one template.
    spec = pod.pod.spec
    cached = _MEMO.get(spec, pod.requests)
    if cached is None:
        values = _single_container_nonzero(pod) or compute_nonzero(pod.pod)
        # A bound pod's requests may be negative or beyond int64 (see HeldRequests): held to a
        # range whose per-node sums stay within the int64 columns, never below 0.
        cpu, mem, pod_cpu, pod_mem = (min(max(v, 0), _MAX_NONZERO) for v in values)
        cached = _MEMO.put(spec, (cpu, mem, pod_cpu, pod_mem), pod.requests)
    return cached


class NonZeroRequested:
    """Per-row non-zero cpu and memory of the pods on each node: a (rows, 2) C-contiguous int64 array."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.values: I64 = np.zeros((max(8, len(snapshot.pod_count)), 2), dtype=np.int64)
        for info in snapshot.infos:
            for pod in info.pods.values():
                self.on_pod_added(info, pod)

    @classmethod
    def of(cls, snapshot: Snapshot) -> NonZeroRequested:
        """The tracker attached to ``snapshot``, attaching one on first use (shared by every plugin)."""
        for listener in snapshot.listeners:
            if isinstance(listener, cls):
                return listener
        tracker = cls(snapshot)
        snapshot.listeners.append(tracker)
        return tracker

    def _ensure(self, row: int, snapshot: Snapshot) -> None:
        size = len(self.values)
        if row < size:
            return
        grown = np.zeros((max(2 * size, row + 1, len(snapshot.pod_count)), 2), dtype=np.int64)
        grown[:size] = self.values
        self.values = grown

    def on_node_added(self, info: NodeInfo) -> None:
        self._ensure(info.row, info.snapshot)
        self.values[info.row] = 0

    def on_node_updated(self, info: NodeInfo, old: Node) -> None:
        pass

    def on_node_removed(self, info: NodeInfo, moved: NodeInfo | None) -> None:
        last = info.snapshot.n  # the row that was vacated, now past the end
        if moved is not None:
            self.values[info.row] = self.values[last]
        self.values[last] = 0

    def on_pod_added(self, info: NodeInfo, pod: PodInfo) -> None:
        self._ensure(info.row, info.snapshot)
        cpu, mem, _, _ = pod_nonzero(pod)
        self.values[info.row, 0] += cpu
        self.values[info.row, 1] += mem

    def on_pod_removed(self, info: NodeInfo, pod: PodInfo) -> None:
        cpu, mem, _, _ = pod_nonzero(pod)
        self.values[info.row, 0] -= cpu
        self.values[info.row, 1] -= mem
