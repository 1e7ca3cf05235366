"""Per-row numpy arrays of every node's devices, the input of the DeviceShare kernels.

One row per snapshot row (rows move when a node is removed, and so do these). For each
device type of the demand table (gpu, rdma, fpga) a node's devices occupy up to ``MAX_SLOTS``
slots, in ascending minor order; each slot holds the device's capacity and free amount of the
type's resource columns (gpu: core, memory ratio, memory; rdma; fpga) and how many of its VFs
are free. GPU rows also hold their partition table (interned in :class:`PartitionTables`),
the masks of used and healthy GPU minors, and each GPU's NUMA and PCIe scope in the
topology tree.

A node the tables cannot describe exactly (more devices of a type than slots, a GPU minor
above 62, a partition table the kernel cannot hold, device resources the slots do not
carry) is flagged ``FLAG_OVERFLOW`` and always checked by the exact Python allocator.

Rows are rewritten from :class:`~koordsched.plugins.deviceshare.node_state.NodeDeviceState`
only when that node's state changed (:attr:`DeviceRows.dirty`), just before a kernel call.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Final

import numpy as np

import koordsched.plugins.deviceshare.demand as demand
from koordsched.api.koordinator import (
    DEVICE_GPU,
)
from koordsched.framework.snapshot import I64
from koordsched.plugins.deviceshare.kernels import (
    FLAG_HAS_MODEL,
    FLAG_HAS_TREE,
    FLAG_HAS_VF,
    FLAG_NODE_HONOR,
    FLAG_OVERFLOW,
    FLAG_WELL_PLANNED,
    G_COLS,
    G_HEALTHY,
    G_TABLE,
    G_USED,
    MAX_MINOR,
    MAX_PARTITION_SIZE,
    MAX_SLOTS,
)
from koordsched.plugins.deviceshare.model import (
    DeviceModel,
    PartitionIndex,
    is_zero,
    partition_index_for,
    partition_labels,
)
from koordsched.plugins.deviceshare.node_state import NodeDeviceState

_INT64_MAX: Final = 2**63 - 1
#: Larger amounts could overflow the kernel's sums (16 devices x amount x 100): exact path.
_MAX_AMOUNT: Final = 2**50


class PartitionTables:
    """Every distinct partition index seen, flattened for the kernel.

    ``tab[t, n]`` = (first group, group count) of table ``t`` for ``n`` GPUs; ``grp[g]`` =
    (first partition, partition count); ``parts[p]`` = (minor mask, ring bus bandwidth or
    -1). Tables are interned by content, so the same table on many nodes (or a Device CR
    rewritten with the same table) is stored once.
    """

    def __init__(self) -> None:
        self._ids: dict[Hashable, int] = {}
        self._tab: list[list[tuple[int, int]]] = []
        self._grp: list[tuple[int, int]] = []
        self._parts: list[tuple[int, int]] = []
        self._arrays: tuple[I64, I64, I64] | None = None

    @staticmethod
    def _key(index: PartitionIndex) -> Hashable | None:
        groups = []
        for n, gs in sorted(index.items()):
            entry = []
            for g in gs:
                parts = []
                for p in g.partitions:
                    if any(m < 0 or m > MAX_MINOR for m in p.minors):
                        return None
                    bw = p.ring_bus_bandwidth
                    if bw is None:
                        value = -1
                    else:
                        value = math.floor(bw)  # partition >= ceil(pod) <=> floor(partition) >= ceil(pod)
                        if value > _INT64_MAX or value < 0:
                            return None
                    parts.append((p.mask, value))
                entry.append(tuple(parts))
            groups.append((n, tuple(entry)))
        return tuple(groups)

    def intern(self, index: PartitionIndex) -> int | None:
        """The table's id; None when the kernel cannot represent it."""
        key = self._key(index)
        if key is None:
            return None
        tid = self._ids.get(key)
        if tid is not None:
            return tid
        tid = len(self._tab)
        sizes = [(0, 0)] * (MAX_PARTITION_SIZE + 1)
        for n, entry in key:  # type: ignore[attr-defined]
            if not 0 <= n <= MAX_PARTITION_SIZE or not entry:
                continue
            sizes[n] = (len(self._grp), len(entry))
            for parts in entry:
                self._grp.append((len(self._parts), len(parts)))
                self._parts.extend(parts)
        self._tab.append(sizes)
        self._ids[key] = tid
        self._arrays = None
        return tid

    def arrays(self) -> tuple[I64, I64, I64]:
        if self._arrays is None:
            tab = np.zeros((max(1, len(self._tab)), MAX_PARTITION_SIZE + 1, 2), dtype=np.int64)
            for t, sizes in enumerate(self._tab):
                tab[t] = sizes
            grp = np.asarray(self._grp or [(0, 0)], dtype=np.int64).reshape(-1, 2)
            parts = np.asarray(self._parts or [(0, 0)], dtype=np.int64).reshape(-1, 2)
            self._arrays = (np.ascontiguousarray(tab), np.ascontiguousarray(grp), np.ascontiguousarray(parts))
        return self._arrays


_ROW_ARRAYS: Final = ("flags", "ndev", "nslot", "free", "total", "vf_free", "gpu_row", "gpu_group")
_FREE: Final = _ROW_ARRAYS.index("free")
_VF_FREE: Final = _ROW_ARRAYS.index("vf_free")
_GPU_ROW: Final = _ROW_ARRAYS.index("gpu_row")


class _Template:
    """A node's row with nothing in use, for its device model and partition labels.

    Most of a row depends on the model alone; rewriting a row after a pod came or went then
    costs a copy of the template plus the slots of the devices in use.
    """

    __slots__ = ("bus_ids", "row", "slot_of", "usage")

    def __init__(self, rows: DeviceRows, row: int, model: DeviceModel) -> None:
        types = rows.table.types
        self.row = tuple(getattr(rows, name)[row].copy() for name in _ROW_ARRAYS)
        #: Node fingerprint (``NodeDeviceState.fingerprint``) -> the row's free, vf_free and gpu_row
        #: parts: nodes of one model go through the same few usages, written once each.
        self.usage: dict[Hashable, tuple[I64, I64, I64]] = {}
        #: Per kernel type: minor -> slot (the first MAX_SLOTS minors, ascending).
        self.slot_of: tuple[dict[int, int], ...] = tuple(
            {m: s for s, m in enumerate(sorted(model.total.get(t, {}))[:MAX_SLOTS])} for t in types
        )
        #: Per kernel type and slot: the busIDs of the device's VFs.
        self.bus_ids: tuple[dict[int, frozenset[str]], ...] = tuple(
            {s: frozenset(vf.bus_id for _, vf in model.vfs_of(t, m)) for m, s in slot_of.items()}
            for t, slot_of in zip(types, self.slot_of, strict=True)
        )


class DeviceRows:
    __slots__ = (
        "_templates",
        "_written",
        "dirty",
        "flags",
        "free",
        "gpu_group",
        "gpu_row",
        "ndev",
        "nslot",
        "table",
        "tables",
        "total",
        "vf_free",
    )

    def __init__(self, capacity: int = 8) -> None:
        #: The demand table the arrays are laid out for (its types and columns).
        self.table = demand.TABLE
        self.dirty: set[str] = set()
        self.tables = PartitionTables()
        #: (model content id, partition labels) -> the row with nothing in use, or None when the
        #: model's rows cannot be written from a template (overflow).
        self._templates: dict[Hashable, _Template | None] = {}
        #: Row -> the template whose static part the row holds (written whole, not changed since).
        self._written: dict[int, _Template] = {}
        self._alloc(max(8, capacity))

    def _alloc(self, cap: int) -> None:
        self.flags: I64 = np.zeros(cap, dtype=np.int64)
        nt, nr = self.table.nt, self.table.nr
        self.ndev: I64 = np.zeros((cap, nt), dtype=np.int64)
        self.nslot: I64 = np.zeros((cap, nt), dtype=np.int64)
        self.free: I64 = np.zeros((cap, nt, MAX_SLOTS, nr), dtype=np.int64)
        self.total: I64 = np.zeros((cap, nt, MAX_SLOTS, nr), dtype=np.int64)
        self.vf_free: I64 = np.zeros((cap, nt, MAX_SLOTS), dtype=np.int64)
        self.gpu_row: I64 = np.zeros((cap, G_COLS), dtype=np.int64)
        self.gpu_group: I64 = np.zeros((cap, MAX_SLOTS, 2), dtype=np.int64)

    @property
    def capacity(self) -> int:
        return len(self.flags)

    def ensure(self, capacity: int) -> None:
        """Grow to at least ``capacity`` rows, keeping the content."""
        old = self.capacity
        if capacity <= old:
            return
        arrays = {name: getattr(self, name) for name in _ROW_ARRAYS}
        self._alloc(max(capacity, 2 * old))
        for name, arr in arrays.items():
            getattr(self, name)[:old] = arr

    def mark_dirty(self, name: str) -> None:
        self.dirty.add(name)

    def clear_row(self, row: int) -> None:
        self._written.pop(row, None)
        if row >= self.capacity:
            return
        for name in _ROW_ARRAYS:
            getattr(self, name)[row] = 0

    def move_row(self, src: int, dst: int) -> None:
        """Copy row ``src`` into ``dst`` and clear ``src`` (the snapshot's last-row move)."""
        for name in _ROW_ARRAYS:
            arr = getattr(self, name)
            arr[dst] = arr[src]
        template = self._written.get(src)
        self.clear_row(src)
        if template is not None:
            self._written[dst] = template
        else:
            self._written.pop(dst, None)

    def write_row(self, row: int, state: NodeDeviceState | None, node_labels: Mapping[str, str]) -> None:
        """Rewrite one row from the node's device state (None: the node has no device cache)."""
        if state is None or state.model is None:
            self.clear_row(row)
            return
        model = state.model
        key = (state.model_key, *partition_labels(node_labels))
        template = self._templates.get(key)
        if template is not None and self._written.get(row) is template:
            # The usual case: a pod came or went on a node whose row holds the template's static part.
            # A usage remembered under the node's fingerprint passed every check below when stored.
            usage = template.usage.get(state.fingerprint())
            if usage is not None:
                self.free[row], self.vf_free[row], self.gpu_row[row] = usage
                return
        if state.model_key < 0 or not _in_model(state, model) or state.blocked():
            # Blocked types (an allocation that cannot be read) read as not free: only the full
            # path, from NodeDeviceState.free, writes them so.
            self._write_full(row, state, node_labels)
            return
        if key not in self._templates:
            if len(self._templates) >= 1 << 14:
                self._templates.clear()
                self._written.clear()
            blank = _blank_state(state)
            self._write_full(row, blank, node_labels)
            overflow = self.flags[row] & FLAG_OVERFLOW != 0
            self._templates[key] = None if overflow else _Template(self, row, model)
        template = self._templates[key]
        if template is None:
            self._write_full(row, state, node_labels)
            return
        fingerprint = state.fingerprint()
        usage = template.usage.get(fingerprint)
        if self._written.get(row) is not template:
            for name, value in zip(_ROW_ARRAYS, template.row, strict=True):
                getattr(self, name)[row] = value
            self._written[row] = template
        elif usage is None:
            # The row holds this template's static part already: rewrite what usage changes.
            self.free[row] = template.row[_FREE]
            self.vf_free[row] = template.row[_VF_FREE]
            self.gpu_row[row] = template.row[_GPU_ROW]
        if usage is not None:
            self.free[row], self.vf_free[row], self.gpu_row[row] = usage
            return
        self._write_usage(row, state, node_labels, template)
        if self._written.get(row) is template:  # not rewritten whole by the exact path
            if len(template.usage) >= 1 << 12:
                template.usage.clear()
            template.usage[fingerprint] = (
                self.free[row].copy(),
                self.vf_free[row].copy(),
                self.gpu_row[row].copy(),
            )

    def _write_usage(
        self, row: int, state: NodeDeviceState, node_labels: Mapping[str, str], template: _Template
    ) -> None:
        """Write the free amounts, free VFs and used GPUs into a row holding the template's blank."""
        model = state.model
        assert model is not None
        free = self.free
        index, columns = self.table.index, self.table.columns
        for device_type, minors in state.used.items():
            ti = index.get(device_type)
            if ti is None:
                continue
            slot_of = template.slot_of[ti]
            totals = model.total[device_type]
            names = columns[ti]
            for minor, used in minors.items():
                slot = slot_of.get(minor)
                if slot is None:
                    continue
                cap = totals[minor]
                for ri, name in enumerate(names):
                    avail = max(0, cap.get(name, 0) - used.get(name, 0))
                    if avail > _MAX_AMOUNT:  # only a negative usage does this: let the full path flag it
                        self._write_full(row, state, node_labels)
                        return
                    free[row, ti, slot, ri] = avail
        for device_type, vf_minors in state.vf_used.items():
            ti = index.get(device_type)
            if ti is None:
                continue
            slot_of = template.slot_of[ti]
            for minor, holders in vf_minors.items():
                slot = slot_of.get(minor)
                if slot is not None:
                    self.vf_free[row, ti, slot] = len(template.bus_ids[ti][slot] - holders.keys())
        used_mask = 0
        for minor in state.used_minors(DEVICE_GPU):
            used_mask |= 1 << minor
        self.gpu_row[row, G_USED] = used_mask

    def _write_full(self, row: int, state: NodeDeviceState, node_labels: Mapping[str, str]) -> None:
        self.clear_row(row)
        if state.model is None:
            return
        model = state.model
        flags = FLAG_HAS_MODEL
        for ti, device_type in enumerate(self.table.types):
            total = state.total(device_type)
            free = state.free(device_type)
            minors = sorted(total)
            self.ndev[row, ti] = len(minors)
            if len(minors) > MAX_SLOTS:
                flags |= FLAG_OVERFLOW
                minors = minors[:MAX_SLOTS]
            self.nslot[row, ti] = len(minors)
            names = self.table.columns[ti]
            for slot, minor in enumerate(minors):
                t = total[minor]
                f = free[minor]
                for ri, name in enumerate(names):
                    cap = t.get(name, 0)
                    avail = f.get(name, 0)
                    if not (0 <= cap <= _MAX_AMOUNT and 0 <= avail <= _MAX_AMOUNT):
                        flags |= FLAG_OVERFLOW
                        cap = min(max(cap, 0), _MAX_AMOUNT)
                        avail = min(max(avail, 0), _MAX_AMOUNT)
                    self.total[row, ti, slot, ri] = cap
                    self.free[row, ti, slot, ri] = avail
                # Resources the slots do not carry (healthiness, weighted scores): exact path.
                if any(n not in names for n in t):
                    flags |= FLAG_OVERFLOW
                in_use = state.vfs_in_use(device_type, minor)
                bus_ids = {vf.bus_id for _, vf in model.vfs_of(device_type, minor)}
                self.vf_free[row, ti, slot] = len(bus_ids - in_use.keys())
            if model.has_vfs(device_type):
                flags |= FLAG_HAS_VF << ti
        flags |= self._write_gpu(row, state, node_labels)
        if model.secondary_well_planned:
            flags |= FLAG_WELL_PLANNED
        self.flags[row] = flags

    def _write_gpu(self, row: int, state: NodeDeviceState, node_labels: Mapping[str, str]) -> int:
        model = state.model
        assert model is not None
        flags = 0
        total = state.total(DEVICE_GPU)
        if any(m < 0 or m > MAX_MINOR for m in total) or any(
            m < 0 or m > MAX_MINOR for m in state.used_minors(DEVICE_GPU)
        ):
            return FLAG_OVERFLOW
        healthy = 0
        for m, res in total.items():
            if not is_zero(res):
                healthy |= 1 << m
        used = 0
        for m in state.used_minors(DEVICE_GPU):
            used |= 1 << m
        index, honor = partition_index_for(model, node_labels)
        table = -1
        if index is not None:
            tid = self.tables.intern(index)
            if tid is None:
                flags |= FLAG_OVERFLOW
            else:
                table = tid
        self.gpu_row[row, G_TABLE] = table
        self.gpu_row[row, G_USED] = used
        self.gpu_row[row, G_HEALTHY] = healthy
        if honor:
            flags |= FLAG_NODE_HONOR
        scope = model.gpu_scope
        self.gpu_group[row] = -1
        if scope is not None:
            flags |= FLAG_HAS_TREE
            slot_of = {m: s for s, m in enumerate(sorted(total)[:MAX_SLOTS])}
            pcie_index = 0
            for numa_index, numa in enumerate(scope.children):
                for m in numa.minors:
                    if m in slot_of:
                        self.gpu_group[row, slot_of[m], 0] = numa_index
                for pcie in numa.children:
                    for m in pcie.minors:
                        if m in slot_of:
                            self.gpu_group[row, slot_of[m], 1] = pcie_index
                    pcie_index += 1
            if len(scope.children) > MAX_SLOTS or pcie_index > MAX_SLOTS:
                flags |= FLAG_OVERFLOW
        return flags


def _in_model(state: NodeDeviceState, model: DeviceModel) -> bool:
    """Every device in use is one the model has (else the row's device list differs from the model's)."""
    for device_type, minors in state.used.items():
        totals = model.total.get(device_type)
        if totals is None or any(m not in totals for m in minors):
            return False
    return True


def _blank_state(state: NodeDeviceState) -> NodeDeviceState:
    """The node's device state with nothing in use."""
    blank = NodeDeviceState(state.name)
    blank.set_model(state.model, state.source, state.model_key)
    return blank
