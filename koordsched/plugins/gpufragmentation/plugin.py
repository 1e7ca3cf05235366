"""GPUFragmentation: place pods where they raise the cluster's expected GPU fragmentation least.

The fragmentation gradient descent of "Beware of Fragmentation" (USENIX ATC '23), as a Score
plugin: a node's score is how little placing the pod there raises the node's fragmentation
over the workload mix (the measure: :mod:`koordsched.plugins.gpufragmentation.kernels`; the
mix: :mod:`koordsched.plugins.gpufragmentation.mix`). NormalizeScore gives the least increase
100 and one point less per 1 % of a card more (0 from a card on): a fixed scale, so how much
better a node is does not depend on how bad the worst feasible node happens to be. Pods
without GPUs are scored too: their cpu and memory strand GPUs, which the measure counts.

As DeviceShare's :class:`~koordsched.plugins.deviceshare.SharedGPUAdvisor` it also chooses,
at Reserve, the GPU of a pod that shares one: the GPU that leaves the node least fragmented
(DeviceShare's partition, topology and reservation rules still decide which GPUs may be used).

Scores are remembered per row while the row and the mix tables do not change, per pod shape
(:class:`~koordsched.framework.batch.BatchEvaluator`): a pod of a shape seen before costs a
kernel call on the rows changed since.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Final

import numpy as np

from koordsched.api.core import Pod
from koordsched.api.kinds import DEVICES
from koordsched.api.koordinator import NVIDIA_GPU
from koordsched.framework.batch import BatchEvaluator
from koordsched.framework.cycle_state import CycleState, StateData
from koordsched.framework.interface import Handle, Rows, Scores
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import MAX_NODE_SCORE, PodInfo
from koordsched.plugins.deviceshare import DeviceStore
from koordsched.plugins.deviceshare.scorer import MOST_ALLOCATED, DeviceScorer
from koordsched.plugins.gpufragmentation import kernels as kf
from koordsched.plugins.gpufragmentation.args import GPUFragmentationArgs
from koordsched.plugins.gpufragmentation.demand import (
    Shape,
    access_mask,
    models_placement,
    pod_shape,
    requests_shape,
)
from koordsched.plugins.gpufragmentation.mix import LearnedMix, MixTables, build_tables
from koordsched.plugins.gpufragmentation.nodes import (
    SLOT_RESOURCES,
    NodeEpoch,
    NodeTable,
    fragments,
    node_sizes,
    node_table,
    refresh_rows,
)
from koordsched.plugins.helper import as_rows
from koordsched.plugins.nodeaffinity.selector import Masks

NAME: Final = "GPUFragmentation"
_STATE_KEY: Final = "PreScore" + NAME
#: The learned mix's tables are rebuilt once it has moved by this share of its weight.
MIX_DRIFT: Final = 0.05
#: NormalizeScore's step: 1 % of a card of expected fragmentation (values are scaled by SCALE,
#: a card is 100), so the scale ends at a whole card.
RESOLUTION: Final = kf.SCALE


class _PodState(StateData):
    __slots__ = ("shape",)

    def __init__(self, shape: Shape) -> None:
        self.shape = shape

    def clone(self) -> _PodState:
        return self


class _SlotScorer(DeviceScorer):
    """Ranks one node's GPUs for a shared-GPU pod by the fragmentation each choice leaves."""

    __slots__ = ("_after",)
    decisive = True

    def __init__(self, after: dict[tuple[tuple[int, ...], tuple[int, ...]], int]) -> None:
        super().__init__(MOST_ALLOCATED, {})
        self._after = after

    def score_device(
        self, pod_request: Mapping[str, int], total: Mapping[str, int], free: Mapping[str, int]
    ) -> int:
        key = (_amounts(free), _amounts(total))
        after = self._after.get(key)
        return 0 if after is None else kf.NO_FIT - after


def _amounts(res: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(res.get(name, 0) for name in SLOT_RESOURCES)


class GPUFragmentation:
    name = NAME

    def __init__(self, args: GPUFragmentationArgs | None, handle: Handle) -> None:
        args = args if args is not None else GPUFragmentationArgs()
        args.validate()
        self._args = args
        self._handle = handle
        self._store = DeviceStore.of(handle.snapshot, lambda: handle.objects(DEVICES))
        self._epoch = NodeEpoch.of(handle.snapshot)
        self._masks = Masks()
        self._learned: LearnedMix | None = None
        self._fixed: list[tuple[Shape, float]] = []
        if args.workload_mix:
            for entry in args.workload_mix:
                shape = requests_shape(entry.parsed_requests(), models_placement(entry.gpu_models))
                self._fixed.append((shape, entry.weight))
        else:
            self._learned = LearnedMix(args.half_life_seconds, args.max_shapes, MIX_DRIFT)
        self._tables: MixTables | None = None
        #: Whether the profile runs DeviceShare (known once every plugin is built).
        self._with_devices: bool | None = None
        #: (snapshot generation, (rows, capacity, card column), table) of the last build.
        self._node_cache: tuple[int, tuple[int, int, int | None], NodeTable] | None = None
        self._tables_nodes: tuple[int, int] = (-1, -1)
        self._score = BatchEvaluator()

    # --- the mix -----------------------------------------------------------------------------

    def on_pod_event(self, old: Pod | None, new: Pod | None, info: PodInfo | None) -> None:
        # Each pod once, when added (updates rebuild the PodInfo; its shape cannot change).
        if old is None and info is not None and self._learned is not None:
            self._learned.observe(pod_shape(info), self._handle.clock.now())

    def tables(self) -> MixTables:
        """The mix tables, rebuilt when the mix drifted or the nodes changed."""
        snap = self._handle.snapshot
        nodes = (snap.n, self._epoch.epoch)
        tables = self._tables
        learned = self._learned
        if tables is None or nodes != self._tables_nodes or (learned is not None and learned.stale):
            masses = learned.masses() if learned is not None else self._fixed
            sizes = node_sizes(snap, self._node_table())
            version = 0 if tables is None else tables.version + 1
            masks = self._masks
            tables = build_tables(
                version,
                masses,
                lambda shape: access_mask(snap, masks, shape.placement),
                sizes,
                self._args.scarcity_weighting,
            )
            self._tables, self._tables_nodes = tables, nodes
        return tables

    def _flags(self, flags: Scores) -> Scores:
        """DeviceShare's row flags; none (every node as whole cards from its requests) when the
        profile does not run DeviceShare, which alone records what pods hold of each device."""
        if self._with_devices is None:
            self._with_devices = "DeviceShare" in self._handle.plugins()
        return flags if self._with_devices else np.zeros_like(flags)

    def _node_table(self) -> NodeTable:
        """The kernels' node inputs, built once per snapshot generation (every change to a row,
        its devices included, moves it)."""
        store = self._store
        store.sync()
        dev = store.flush_rows()
        snap = self._handle.snapshot
        shape = (snap.n, len(snap.row_gen), snap.resources.get(NVIDIA_GPU))
        cached = self._node_cache
        if cached is not None and cached[1] == shape and cached[2].dev is dev:
            generation, _, table = cached
            if generation != snap.generation:
                # Only the rows that changed since (every change to a row moves its generation).
                refresh_rows(table, snap, snap.rows_changed_since(generation))
                self._node_cache = (snap.generation, shape, table)
            return table
        table = node_table(snap, dev)
        self._node_cache = (snap.generation, shape, table)
        return table

    # --- score -------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        state.write(_STATE_KEY, _PodState(pod_shape(pod)))
        return SUCCESS

    def _pod(self, state: CycleState, pod: PodInfo) -> _PodState:
        data = state.read_optional(_STATE_KEY, _PodState)
        return data if data is not None else _PodState(pod_shape(pod))

    def fragmentation(self, rows: Rows, shape: Shape | None = None) -> Scores:
        """Each row's fragmentation (scaled by ``kernels.SCALE``), with a pod of ``shape``
        placed there when given (the largest value where it does not fit)."""
        return self._fragmentation(self.tables(), self._node_table(), rows, shape)

    def _fragmentation(self, tables: MixTables, t: NodeTable, rows: Rows, shape: Shape | None) -> Scores:
        return fragments(t, tables, rows, shape, self._flags(t.dev.flags))

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        rows = as_rows(rows)
        data = self._pod(state, pod)
        tables = self.tables()
        if not len(tables.shapes):
            return np.zeros(len(rows), dtype=np.int64)
        snap = self._handle.snapshot
        table = self._node_table()
        version = tables.version
        shape = data.shape

        def kernel(stale: Rows) -> tuple[Scores, None]:
            before = self._fragmentation(tables, table, stale, None)
            return before - self._fragmentation(tables, table, stale, shape), None

        # Higher is better: the fragmentation the placement removes (negative: adds). Remembered
        # per row while the row and the tables do not change, per pod shape.
        return self._score.evaluate(snap, rows, memo_key=(version, shape), content_key=None, kernel=kernel)

    def normalize_score(self, state: CycleState, pod: PodInfo, rows: Rows, scores: Scores) -> Status:
        """100 for the least increase, one point less per ``RESOLUTION`` more (1 % of a card of
        expected fragmentation), 0 from a card more on: a fixed scale rather than min-max, so a
        node slightly worse than the best never ties with it because one far worse node widened
        the range."""
        kf.normalize(scores, RESOLUTION, MAX_NODE_SCORE)
        return SUCCESS

    def explain_score(self, state: CycleState, pod: PodInfo, row: int) -> dict[str, object]:
        """The node's expected fragmentation (in GPUs) before and after the pod, for ``--explain``."""
        rows = np.asarray([row], dtype=np.int64)
        shape = self._pod(state, pod).shape
        before = int(self.fragmentation(rows)[0])
        after = int(self.fragmentation(rows, shape)[0])
        scale = kf.SCALE * 100
        return {
            "fragmentationBefore": round(before / scale, 4),
            "fragmentationAfter": round(after / scale, 4) if after < kf.NO_FIT else None,
        }

    # --- DeviceShare's GPU choice ------------------------------------------------------------

    def shared_gpu_scorer(
        self, state: CycleState, pod: PodInfo, node_name: str
    ) -> tuple[DeviceScorer, Hashable] | None:
        info = self._handle.snapshot.by_name.get(node_name)
        if info is None:
            return None
        tables = self.tables()
        if not len(tables.shapes):
            return None
        shape = self._pod(state, pod).shape
        t = self._node_table()
        d = t.dev
        row = info.row
        if not self._flags(d.flags)[row] & 1:
            return None
        n = int(d.nslot[row, 0])
        # The measure reads a card's core, memory ratio, memory and AI cores: DeviceShare's first
        # columns (SLOT_RESOURCES).
        free = np.ascontiguousarray(d.free[row, 0, :n, : kf.NR])
        total = np.ascontiguousarray(d.total[row, 0, :n, : kf.NR])
        cpu = int(t.node[row, 0]) - shape.cpu
        mem = int(t.node[row, 1]) - shape.memory
        mix = (tables.rows, tables.weights, tables.access)
        values = kf.slot_frags(free, total, n, cpu, mem, row, *mix, shape.vector)
        after: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
        for s, value in enumerate(values.tolist()):
            if value >= 0:
                after.setdefault((tuple(free[s].tolist()), tuple(total[s].tolist())), round(value * kf.SCALE))
        # DeviceShare's choice follows from the node's devices (its own key) and this ranking alone.
        ranking = tuple(sorted(after, key=lambda k: (after[k], k)))
        return _SlotScorer(after), ranking
