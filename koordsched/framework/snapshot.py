"""The cluster as the scheduling cycle sees it: struct-of-arrays node columns plus per-node objects.

Numeric state lives in contiguous numpy columns, one row per node, so the Filter and
Score kernels see every node in one call. What cannot be a number (labels, taints,
ports, the pods themselves) stays on :class:`NodeInfo`, one per row.

The scheduler runs on a single asyncio loop and a scheduling cycle never yields, so
the cache can mutate this structure in place between cycles: there is no copy per
cycle, only the rows an event touched change ("incremental" by construction). Every
mutation bumps ``generation`` (and the row's own generation) so callers can tell
whether anything moved.

Row order is insertion order; removing a node moves the last row into its place.
Code that keeps per-row arrays of its own (device state, NUMA topology) subscribes
as a :class:`SnapshotListener` to follow those moves.

Amounts are int64. A node's allocatable must fit (the cache leaves out a node whose
allocatable does not, see :func:`allocatable_problem`); pods' requests are at most
``INT64_MAX`` each (PodInfo creation sees to it), and a column whose pods' sum would pass
``INT64_MAX`` saturates there (the node is full for that resource) while the exact sum is
kept aside, so removing pods gives back exactly what they added. All of it is checked when
a node or pod is added or removed, never in a cycle.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

import numpy as np
import numpy.typing as npt

from koordsched.api.core import Node, Taint
from koordsched.api.resources import INT64_MAX, too_large
from koordsched.framework.types import PodInfo
from koordsched.kernels.memo import changed_rows

I64 = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"


class ResourceIndex:
    """Maps resource names to columns. cpu, memory and ephemeral-storage are always 0, 1, 2."""

    FIXED = (CPU, MEMORY, EPHEMERAL_STORAGE)

    def __init__(self) -> None:
        self.names: list[str] = list(self.FIXED)
        self.index: dict[str, int] = {n: i for i, n in enumerate(self.names)}

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.index

    def get(self, name: str) -> int | None:
        return self.index.get(name)

    def _add(self, name: str) -> int:
        i = len(self.names)
        self.names.append(name)
        self.index[name] = i
        return i


def pod_host_ports(pod: PodInfo) -> list[tuple[str, str, int]]:
    """(hostIP, protocol, port) of each host port; "0.0.0.0" stands for every address."""
    return [
        (p.host_ip or "0.0.0.0", p.protocol or "TCP", p.host_port)
        for c in pod.pod.spec.containers
        for p in c.ports
        if p.host_port > 0
    ]


def allocatable_problem(
    allocatable: Mapping[str, int], written: Mapping[str, object] | None = None
) -> str | None:
    """Why a node's allocatable cannot be a row (an amount beyond int64), or None; ``written``:
    the quantities as the node states them, quoted in the answer."""
    for name, amount in allocatable.items():
        if amount > INT64_MAX:
            q = written[name] if written is not None and name in written else amount
            return f"resource {name!r}: {too_large(name, q, amount)}"
    return None


class NodeInfo:
    """One node's non-numeric state and accessors into its row of the columns."""

    __slots__ = ("generation", "name", "node", "pods", "row", "saturated", "snapshot", "used_ports")

    def __init__(self, snapshot: Snapshot, node: Node, row: int) -> None:
        self.snapshot = snapshot
        self.node = node
        self.name = node.metadata.name
        self.row = row
        self.pods: dict[str, PodInfo] = {}
        self.used_ports: dict[tuple[str, str, int], int] = {}
        self.generation = 0
        #: Column -> the exact sum of the pods' requests where it passed INT64_MAX (the column
        #: then holds INT64_MAX); None while no column of the node saturated.
        self.saturated: dict[int, int] | None = None

    @property
    def labels(self) -> dict[str, str]:
        return self.node.metadata.labels

    @property
    def taints(self) -> list[Taint]:
        return self.node.spec.taints

    def allocatable(self, resource: str) -> int:
        col = self.snapshot.resources.get(resource)
        return 0 if col is None else int(self.snapshot.alloc[self.row, col])

    def requested(self, resource: str) -> int:
        col = self.snapshot.resources.get(resource)
        return 0 if col is None else int(self.snapshot.used[self.row, col])

    @property
    def allowed_pods(self) -> int:
        return int(self.snapshot.max_pods[self.row])

    def allocatable_map(self) -> dict[str, int]:
        s = self.snapshot
        return {n: int(s.alloc[self.row, i]) for n, i in s.resources.index.items() if s.alloc[self.row, i]}

    def requested_map(self) -> dict[str, int]:
        s = self.snapshot
        return {n: int(s.used[self.row, i]) for n, i in s.resources.index.items() if s.used[self.row, i]}

    def port_conflicts(self, ports: list[tuple[str, str, int]]) -> bool:
        for ip, proto, port in ports:
            for uip, uproto, uport in self.used_ports:
                if uport == port and uproto == proto and (ip == uip or "0.0.0.0" in (ip, uip)):
                    return True
        return False

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, row={self.row}, pods={len(self.pods)})"


class SnapshotListener(Protocol):
    """Per-row state kept outside the snapshot follows node and pod changes through this."""

    def on_node_added(self, info: NodeInfo) -> None: ...
    def on_node_updated(self, info: NodeInfo, old: Node) -> None: ...
    def on_node_removed(self, info: NodeInfo, moved: NodeInfo | None) -> None:
        """``info`` left row ``info.row``; ``moved`` (if any) now occupies that row."""

    def on_pod_added(self, info: NodeInfo, pod: PodInfo) -> None: ...
    def on_pod_removed(self, info: NodeInfo, pod: PodInfo) -> None: ...


class Snapshot:
    def __init__(self, capacity: int = 64) -> None:
        self.resources = ResourceIndex()
        self.n = 0
        self._cap = max(8, capacity)
        r = len(self.resources)
        self.alloc: I64 = np.zeros((self._cap, r), dtype=np.int64)
        self.used: I64 = np.zeros((self._cap, r), dtype=np.int64)
        self.pod_count: I64 = np.zeros(self._cap, dtype=np.int64)
        self.max_pods: I64 = np.zeros(self._cap, dtype=np.int64)
        self.unschedulable: BoolArray = np.zeros(self._cap, dtype=np.bool_)
        # Nodes share few distinct taint sets; plugins check a pod against each set once.
        self.taint_class: npt.NDArray[np.int32] = np.zeros(self._cap, dtype=np.int32)
        #: Generation of each row's last change (see koordsched.framework.rowmemo).
        self.row_gen: I64 = np.zeros(self._cap, dtype=np.int64)
        self.taint_sets: list[tuple[Taint, ...]] = [()]
        self._taint_set_ids: dict[tuple[Taint, ...], int] = {(): 0}
        self.infos: list[NodeInfo] = []
        self.by_name: dict[str, NodeInfo] = {}
        self.generation = 0
        self.listeners: list[SnapshotListener] = []
        self._label_cols: dict[tuple[str, str | None], BoolArray] = {}
        #: The last :meth:`rows_changed_since` answer: (generation, n, since, rows).
        self._changed: tuple[int, int, int, list[int]] | None = None

    # --- views ---------------------------------------------------------------------------------

    def rows_changed_since(self, since: int) -> list[int]:
        """Rows whose generation moved past ``since``, remembered for one question: DeviceShare,
        NodeNUMAResource and LoadAware all look for changed per-node objects at a cycle's start,
        since the same generation (the answer holds while the snapshot's does not move)."""
        known = self._changed
        if known is not None and known[0] == self.generation and known[1] == self.n and known[2] == since:
            return known[3]
        rows: list[int] = changed_rows(self.row_gen, self.n, since).tolist()
        self._changed = (self.generation, self.n, since, rows)
        return rows

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[NodeInfo]:
        return iter(self.infos)

    def get(self, name: str) -> NodeInfo | None:
        return self.by_name.get(name)

    @property
    def names(self) -> list[str]:
        return [i.name for i in self.infos]

    def alloc_view(self) -> I64:
        return self.alloc[: self.n]

    # --- resources -----------------------------------------------------------------------------

    def ensure_resource(self, name: str) -> int:
        """Column of ``name``, adding a zero column when no node or pod has used it yet."""
        col = self.resources.get(name)
        if col is not None:
            return col
        col = self.resources._add(name)
        pad = np.zeros((self._cap, 1), dtype=np.int64)
        self.alloc = np.ascontiguousarray(np.hstack([self.alloc, pad]))
        self.used = np.ascontiguousarray(np.hstack([self.used, pad]))
        self.generation += 1
        return col

    def request_vector(self, requests: dict[str, int]) -> tuple[I64, I64]:
        """(columns, amounts) of a pod's non-zero requests, pods count excluded."""
        cols = []
        amounts = []
        for name, amount in requests.items():
            if amount and name != PODS:
                cols.append(self.ensure_resource(name))
                amounts.append(amount)
        return np.asarray(cols, dtype=np.int64), np.asarray(amounts, dtype=np.int64)

    # --- nodes ---------------------------------------------------------------------------------

    def _grow(self) -> None:
        cap = self._cap * 2
        for attr in ("alloc", "used"):
            old = getattr(self, attr)
            new = np.zeros((cap, old.shape[1]), dtype=np.int64)
            new[: self._cap] = old
            setattr(self, attr, new)
        for attr in ("pod_count", "max_pods", "unschedulable", "taint_class", "row_gen"):
            old = getattr(self, attr)
            new = np.zeros(cap, dtype=old.dtype)
            new[: self._cap] = old
            setattr(self, attr, new)
        self._cap = cap

    def _taint_class_of(self, node: Node) -> int:
        key = tuple(node.spec.taints)
        cid = self._taint_set_ids.get(key)
        if cid is None:
            cid = len(self.taint_sets)
            self.taint_sets.append(key)
            self._taint_set_ids[key] = cid
        return cid

    def _write_node_row(self, row: int, node: Node, allocatable: dict[str, int]) -> None:
        problem = allocatable_problem(allocatable)
        if problem is not None:
            raise ValueError(f"node {node.metadata.name}: allocatable cannot be a row: {problem}")
        self.alloc[row, :] = 0
        for name, amount in allocatable.items():
            if name == PODS:
                continue
            col = self.ensure_resource(name)
            self.alloc[row, col] = amount
        self.max_pods[row] = allocatable.get(PODS, 0)
        self.unschedulable[row] = node.spec.unschedulable
        self.taint_class[row] = self._taint_class_of(node)

    def add_node(self, node: Node, allocatable: dict[str, int]) -> NodeInfo:
        name = node.metadata.name
        if name in self.by_name:
            raise ValueError(f"node {name} is already in the snapshot")
        if self.n == self._cap:
            self._grow()
        row = self.n
        info = NodeInfo(self, node, row)
        self.n += 1
        self.infos.append(info)
        self.by_name[name] = info
        self.used[row, :] = 0
        self.pod_count[row] = 0
        self._write_node_row(row, node, allocatable)
        self._label_cols.clear()
        self._touch(info)
        for listener in self.listeners:
            listener.on_node_added(info)
        return info

    def update_node(self, node: Node, allocatable: dict[str, int]) -> NodeInfo:
        info = self.by_name[node.metadata.name]
        old = info.node
        info.node = node
        self._write_node_row(info.row, node, allocatable)
        if old.metadata.labels != node.metadata.labels:
            self._label_cols.clear()
        self._touch(info)
        for listener in self.listeners:
            listener.on_node_updated(info, old)
        return info

    def remove_node(self, name: str) -> NodeInfo:
        info = self.by_name.pop(name)
        row = info.row
        last = self.n - 1
        moved: NodeInfo | None = None
        if row != last:
            moved = self.infos[last]
            self.infos[row] = moved
            moved.row = row
            for arr in (self.alloc, self.used):
                arr[row, :] = arr[last, :]
            for arr1 in (self.pod_count, self.max_pods, self.unschedulable, self.taint_class):
                arr1[row] = arr1[last]
        self.infos.pop()
        self.n -= 1
        self._label_cols.clear()
        self.generation += 1
        # The row now holds another node (or nothing): whatever was remembered for it is void.
        self.row_gen[row] = self.generation
        if moved is not None:
            moved.generation = self.generation
        for listener in self.listeners:
            listener.on_node_removed(info, moved)
        return info

    # --- pods ----------------------------------------------------------------------------------

    def add_pod(self, info: NodeInfo, pod: PodInfo) -> None:
        if pod.uid in info.pods:
            raise ValueError(f"pod {pod.key} is already on node {info.name}")
        info.pods[pod.uid] = pod
        row = info.row
        for name, amount in pod.requests.items():
            if name != PODS and amount:
                # ensure_resource may replace self.used: resolve the column before indexing.
                col = self.ensure_resource(name)
                self._add_used(info, col, amount, 1)
        self.pod_count[row] += 1
        for port in pod_host_ports(pod):
            info.used_ports[port] = info.used_ports.get(port, 0) + 1
        self._touch(info)
        for listener in self.listeners:
            listener.on_pod_added(info, pod)

    def replace_pod(self, info: NodeInfo, pod: PodInfo) -> None:
        """Swap the PodInfo of a pod already on the node for a newer one counted the same (same
        requests, labels and ports: the cache checks), touching no column. Listeners that keep
        PodInfos and define ``on_pod_replaced(info, old, new)`` are told, so the old one is not
        kept alive beside the new one."""
        old = info.pods.get(pod.uid)
        if old is None:
            raise KeyError(f"pod {pod.key} is not on node {info.name}")
        info.pods[pod.uid] = pod
        for listener in self.listeners:
            replaced = getattr(listener, "on_pod_replaced", None)
            if replaced is not None:
                replaced(info, old, pod)

    def remove_pod(self, info: NodeInfo, pod: PodInfo) -> None:
        stored = info.pods.pop(pod.uid, None)
        if stored is None:
            raise KeyError(f"pod {pod.key} is not on node {info.name}")
        row = info.row
        for name, amount in stored.requests.items():
            col = self.resources.get(name)
            if col is not None and name != PODS:
                self._add_used(info, col, amount, -1)
        self.pod_count[row] -= 1
        for port in pod_host_ports(stored):
            left = info.used_ports.get(port, 0) - 1
            if left > 0:
                info.used_ports[port] = left
            else:
                info.used_ports.pop(port, None)
        self._touch(info)
        for listener in self.listeners:
            listener.on_pod_removed(info, stored)

    def _add_used(self, info: NodeInfo, col: int, request: int, sign: int) -> None:
        """``used += sign * request``, saturating at INT64_MAX with the exact sum kept on the NodeInfo.

        PodInfo creation keeps requests within 0..INT64_MAX; a request outside (a PodInfo made
        elsewhere) is held to that range, on removal as on addition, so it never frees capacity.
        """
        if request > INT64_MAX:
            request = INT64_MAX
        elif request < 0:
            request = 0
        used = self.used
        saturated = info.saturated
        if saturated is None:
            # The usual case, as cheap as ``+=``: no column of the node saturated, none does now.
            total = used.item(info.row, col) + sign * request
            if total <= INT64_MAX:
                used[info.row, col] = total
                return
        exact = saturated.get(col) if saturated is not None else None
        total = (used.item(info.row, col) if exact is None else exact) + sign * request
        if total > INT64_MAX:
            if saturated is None:
                saturated = info.saturated = {}
            saturated[col] = total
            total = INT64_MAX
        elif exact is not None and saturated is not None:
            del saturated[col]
            if not saturated:
                info.saturated = None
        used[info.row, col] = total

    def touch(self, name: str) -> None:
        """Mark a node's row changed though no column did: something plugins keep per node
        (its Device CR, its NodeResourceTopology) changed, so results remembered for the row
        must be recomputed."""
        info = self.by_name.get(name)
        if info is not None:
            self._touch(info)

    def _touch(self, info: NodeInfo) -> None:
        self.generation += 1
        info.generation = self.generation
        self.row_gen[info.row] = self.generation

    # --- label columns (vectorised selectors) --------------------------------------------------

    def label_column(self, key: str, value: str | None) -> BoolArray:
        """Rows whose label ``key`` equals ``value`` (or exists, when ``value`` is None).

        Columns are built on first use and kept until a node's labels or the row set
        change, so a selector costs a few numpy operations per pod, not a Python loop
        over nodes.
        """
        ck = (key, value)
        col = self._label_cols.get(ck)
        if col is None:
            if value is None:
                it = (key in i.node.metadata.labels for i in self.infos)
            else:
                it = (i.node.metadata.labels.get(key) == value for i in self.infos)
            col = np.fromiter(it, dtype=np.bool_, count=self.n)
            self._label_cols[ck] = col
        return col
