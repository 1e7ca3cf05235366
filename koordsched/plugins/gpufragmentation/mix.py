"""The workload mix the measure is taken over: shapes with weights, learned or fixed.

**Learned** (the default): every pod the scheduler sees, pending or bound, counts once, when
it is added (the informer's add: at start-up, every pod then in the cluster), with weight
``2 ** (t / halfLife)``: a pod seen one half-life ago
weighs half what one seen now does, so the mix follows a changing workload. Weights are kept
relative to an anchor that moves forward when they grow large, which changes no ratio.

**Fixed**: the shapes and weights of the plugin's args.

**Scarcity.** A shape's weight in the measure is its share of the pods times ``(G / G_t) ** 1.5``,
where ``G`` is every GPU of the cluster and ``G_t`` the GPUs on the nodes that could hold the
shape when empty (enough allocatable cpu, memory and GPUs, and a node its placement allows). Shapes only a
few nodes can hold (an 8-GPU task asking for 120 cores) thus weigh in proportion to how
scarce their nodes are, and placements keep those nodes whole; shapes no node can hold do not
count. Without scarcity the largest tasks, rare in number, are the first to lose every node
that could run them.

The kernel's tables (:class:`MixTables`) are rebuilt only when the mix has moved by more
than ``drift`` of its weight, or when nodes came, went or changed labels or taints, so that the
per-node fragmentation can be remembered between pods (its ``version`` is part of the key).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from koordsched.plugins.gpufragmentation.demand import Shape
from koordsched.plugins.gpufragmentation.kernels import T_COLS

#: Once the newest weight passes 2**this, weights are rescaled to a later anchor.
_REANCHOR_EXPONENT: Final = 40.0
#: How steeply scarcity weighs: 1 (the GPUs' ratio) still let small pods break the few nodes an
#: 8-GPU task can use on the openb trace (losses from half of the arrivals on); 2 kept them
#: but lost multi-GPU variants at 100 % arrival (bench/README.md).
SCARCITY_EXPONENT: Final = 1.5


@dataclass(frozen=True, slots=True)
class MixTables:
    """The mix as the kernels read it, for one set of node models."""

    version: int
    shapes: tuple[Shape, ...]
    #: Kernel rows (``kernels.T_*`` columns).
    rows: npt.NDArray[np.int64]
    #: The measure's weight of each shape (scarcity included), summing to 1.
    weights: npt.NDArray[np.float64]
    #: Each shape's share of the pods (without scarcity), for reports.
    shares: npt.NDArray[np.float64]
    #: ``access[t, row]``: shape t may use the node at ``row``.
    access: npt.NDArray[np.bool_]


def build_tables(
    version: int,
    masses: Sequence[tuple[Shape, float]],
    access: Callable[[Shape], npt.NDArray[np.bool_]],
    nodes: npt.NDArray[np.int64],
    scarcity: bool,
) -> MixTables:
    """Tables for shapes with their masses. ``access(shape)``: the rows the shape may use;
    ``nodes``: per row, allocatable cpu and memory, GPU count and one GPU's core, ratio, memory,
    AI cores."""
    shapes = [s for s, w in masses if w > 0]
    mass = np.array([w for _, w in masses if w > 0], dtype=np.float64)
    total_mass = float(mass.sum())
    shares = mass / total_mass if total_mass > 0 else mass
    weights = shares.copy()
    n = len(nodes)
    table = np.zeros((len(shapes), max(1, n)), dtype=np.bool_)
    gpus = nodes[:, 2]
    all_gpus = int(gpus.sum())
    for i, shape in enumerate(shapes):
        mask = access(shape)
        table[i, :n] = mask
        if not scarcity:
            continue
        holds = mask & (nodes[:, 0] >= shape.cpu) & (nodes[:, 1] >= shape.memory)
        if shape.gpus:
            holds &= (
                (gpus >= shape.gpus)
                & (nodes[:, 3] >= shape.core)
                & (nodes[:, 4] >= shape.ratio)
                & (nodes[:, 5] >= shape.gpu_memory)
                & (nodes[:, 6] >= shape.npu_core)
            )
        reach = int(gpus[holds].sum())
        weights[i] = 0.0 if reach == 0 else weights[i] * (all_gpus / reach) ** SCARCITY_EXPONENT
    if scarcity and shapes:
        s = float(weights.sum())
        if s > 0:
            weights /= s
    rows = np.array([s.row for s in shapes], dtype=np.int64).reshape(len(shapes), T_COLS)
    return MixTables(version, tuple(shapes), rows, weights, shares, table)


class LearnedMix:
    """Shapes of the pods seen, each pod once, with decaying weights."""

    def __init__(self, half_life: float, max_shapes: int, drift: float) -> None:
        self._half_life = half_life
        self._max_shapes = max_shapes
        self._drift = drift
        self._anchor: float | None = None
        self._mass: dict[Shape, float] = {}
        #: Mass added since the tables were last built, and the total then.
        self._added = 0.0
        self._built_total = 0.0

    def observe(self, shape: Shape, now: float) -> None:
        """One pod of ``shape``, seen at ``now``."""
        if self._anchor is None:
            self._anchor = now
        exponent = (now - self._anchor) / self._half_life
        if exponent > _REANCHOR_EXPONENT:
            factor = 2.0**-exponent
            self._mass = {s: m * factor for s, m in self._mass.items() if m * factor > 1e-12}
            self._added *= factor
            self._built_total *= factor
            self._anchor, exponent = now, 0.0
        weight = 2.0**exponent
        self._mass[shape] = self._mass.get(shape, 0.0) + weight
        self._added += weight
        if len(self._mass) > 2 * self._max_shapes:
            self._prune(shape)

    def _prune(self, newest: Shape) -> None:
        """Keep the heaviest shapes, and the one just seen (a new shape gets to grow)."""
        kept = dict(sorted(self._mass.items(), key=lambda kv: -kv[1])[: self._max_shapes])
        kept.setdefault(newest, self._mass[newest])
        self._mass = kept

    @property
    def stale(self) -> bool:
        """The mix moved by more than the drift since the tables were built."""
        if self._added == 0.0:
            return False
        return self._built_total == 0.0 or self._added > self._drift * self._built_total

    def masses(self) -> list[tuple[Shape, float]]:
        """The heaviest ``max_shapes`` shapes and their masses; marks the tables as built from them."""
        kept = sorted(self._mass.items(), key=lambda kv: (-kv[1], kv[0].row))[: self._max_shapes]
        self._built_total = math.fsum(m for _, m in self._mass.items())
        self._added = 0.0
        return kept
