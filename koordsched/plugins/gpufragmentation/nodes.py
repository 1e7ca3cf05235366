"""Every node as the measure reads it: free cpu and memory, GPU slots.

:func:`node_table` puts together what the kernels read for all rows at once; the GPU slots
are DeviceShare's rows (a node with a Device CR) or whole cards (``nvidia.com/gpu`` without
one). :class:`NodeEpoch` says when the nodes changed in a way that changes where shapes may
run or how scarce their nodes are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from koordsched.api.core import Node
from koordsched.api.koordinator import GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, NPU_CORE, NVIDIA_GPU
from koordsched.framework.snapshot import I64, NodeInfo, Snapshot
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare import DeviceRows
from koordsched.plugins.gpufragmentation import kernels as kf
from koordsched.plugins.gpufragmentation.demand import Shape
from koordsched.plugins.gpufragmentation.kernels import N_COLS, N_CPU, N_MEM
from koordsched.plugins.gpufragmentation.mix import MixTables

#: What the measure's slots hold (``kernels.R_*``): DeviceShare's first gpu columns, in its order.
SLOT_RESOURCES: Final = (GPU_CORE, GPU_MEMORY_RATIO, GPU_MEMORY, NPU_CORE)


class NodeEpoch:
    """Moves whenever a node comes or goes, or its labels, taints or allocatable change:
    what decides which nodes a shape may use (one per snapshot)."""

    def __init__(self) -> None:
        self.epoch = 0

    @classmethod
    def of(cls, snapshot: Snapshot) -> NodeEpoch:
        for listener in snapshot.listeners:
            if isinstance(listener, cls):
                return listener
        epoch = cls()
        snapshot.listeners.append(epoch)
        return epoch

    def on_node_added(self, info: NodeInfo) -> None:
        self.epoch += 1

    def on_node_updated(self, info: NodeInfo, old: Node) -> None:
        new = info.node
        if (
            new.metadata.labels != old.metadata.labels
            or new.spec.taints != old.spec.taints
            or new.status.allocatable != old.status.allocatable
        ):
            self.epoch += 1

    def on_node_removed(self, info: NodeInfo, moved: NodeInfo | None) -> None:
        self.epoch += 1

    def on_pod_added(self, info: NodeInfo, pod: PodInfo) -> None:
        pass

    def on_pod_removed(self, info: NodeInfo, pod: PodInfo) -> None:
        pass


@dataclass(frozen=True, slots=True)
class NodeTable:
    """The kernels' node inputs, for every row of the snapshot."""

    node: I64  # (rows, N_COLS): free cpu, free memory
    card_total: I64
    card_used: I64
    dev: DeviceRows


def node_table(snapshot: Snapshot, dev: DeviceRows) -> NodeTable:
    table = dev.table
    if table.gpu_type and table.columns[table.index[table.gpu_type]][: kf.NR] != SLOT_RESOURCES:
        # The kernels read the slots by position: a reordered demand table must not go unnoticed.
        raise RuntimeError(f"DeviceShare's gpu columns do not start with {SLOT_RESOURCES}")
    n = len(snapshot.row_gen)
    node = np.zeros((n, N_COLS), dtype=np.int64)
    m = snapshot.n
    alloc, used = snapshot.alloc, snapshot.used
    node[:m, N_CPU] = alloc[:m, 0] - used[:m, 0]
    node[:m, N_MEM] = alloc[:m, 1] - used[:m, 1]
    card_total = np.zeros(n, dtype=np.int64)
    card_used = np.zeros(n, dtype=np.int64)
    col = snapshot.resources.get(NVIDIA_GPU)
    if col is not None:
        card_total[:m] = alloc[:m, col]
        card_used[:m] = used[:m, col]
    return NodeTable(node, card_total, card_used, dev)


def refresh_rows(table: NodeTable, snapshot: Snapshot, rows: list[int]) -> None:
    """Rewrite ``rows`` of ``table`` in place (rows that changed; the row set did not)."""
    if not rows:
        return
    alloc, used = snapshot.alloc, snapshot.used
    col = snapshot.resources.get(NVIDIA_GPU)
    node, card_total, card_used = table.node, table.card_total, table.card_used
    if len(rows) > 16:
        idx = np.asarray(rows, dtype=np.int64)
        node[idx, N_CPU] = alloc[idx, 0] - used[idx, 0]
        node[idx, N_MEM] = alloc[idx, 1] - used[idx, 1]
        if col is not None:
            card_total[idx] = alloc[idx, col]
            card_used[idx] = used[idx, col]
        return
    # A cycle changes a row or two: scalar writes cost less than building index arrays.
    for row in rows:
        node[row, N_CPU] = alloc[row, 0] - used[row, 0]
        node[row, N_MEM] = alloc[row, 1] - used[row, 1]
        if col is not None:
            card_total[row] = alloc[row, col]
            card_used[row] = used[row, col]


def node_sizes(snapshot: Snapshot, table: NodeTable) -> I64:
    """Per live row: allocatable cpu and memory, GPU count, and one GPU's core, ratio, memory and
    AI cores."""
    m = snapshot.n
    dev = table.dev
    has_model = (dev.flags[:m] & 1) != 0
    gpus = np.where(has_model, dev.ndev[:m, 0], table.card_total[:m])
    per = np.where(
        has_model[:, None], dev.total[:m, 0, 0, : kf.NR], np.array([100, 100, 0, 0], dtype=np.int64)
    )
    return np.column_stack([snapshot.alloc[:m, 0], snapshot.alloc[:m, 1], gpus, per]).astype(np.int64)


def fragments(
    table: NodeTable, tables: MixTables, rows: I64, shape: Shape | None = None, flags: I64 | None = None
) -> I64:
    """Each row's fragmentation over the mix (scaled by ``kernels.SCALE``), with a pod of
    ``shape`` placed there when given (``kernels.NO_FIT`` where it does not fit). ``flags``
    replace DeviceShare's row flags (zeros: every node as whole cards)."""
    d = table.dev
    args = (
        d.flags if flags is None else flags,
        d.nslot,
        d.free,
        d.total,
        table.card_total,
        table.card_used,
        table.node,
        tables.rows,
        tables.weights,
        tables.access,
    )
    values: I64
    if shape is None:
        values = kf.node_frags(rows, *args)
    else:
        best = np.zeros(len(rows), dtype=np.int64)
        values = kf.placed_frags(rows, *args, shape.vector, best)
    return values
