"""The fragmentation measure, from the paper's definition (table-driven), and the mix weights.

Each case is one node (GPU slots as free core/ratio/memory, free cpu and memory) and a mix; the
expected value is worked out by hand from the definition in the kernels' docstring: a shape
that cannot use the node (no GPU, not allowed there, short of cpu or memory for one copy)
makes every free GPU share a fragment; otherwise the fragment is what the copies that fit
cannot use.
"""

from __future__ import annotations

import numpy as np
import pytest

from koordsched.plugins.gpufragmentation import kernels as kf
from koordsched.plugins.gpufragmentation.demand import Shape
from koordsched.plugins.gpufragmentation.mix import LearnedMix, build_tables

GI = 1024**3


def _slot(values: tuple[int, ...]) -> tuple[int, ...]:
    """A slot of (core, ratio, memory) or (core, ratio, memory, AI cores)."""
    return (*values, 0) if len(values) == kf.NR - 1 else values


def _row(values: tuple[int, ...]) -> tuple[int, ...]:
    """A mix row without or with its AI-cores column."""
    return (*values, 0) if len(values) == kf.T_COLS - 1 else values


def frag(
    gpus: list[int | tuple[int, ...]],
    shapes: list[tuple[tuple[int, ...], float]],
    *,
    cpu: int = 64_000,
    mem: int = 512 * GI,
    access: list[bool] | None = None,
    total: tuple[int, ...] = (100, 100, 80 * GI),
) -> float:
    """The node's fragment (in percent of a card) over ``shapes`` (kernel mix rows, weights)."""
    free = np.array(
        [_slot(g) if isinstance(g, tuple) else (g, g, g * total[2] // 100, 0) for g in gpus], dtype=np.int64
    ).reshape(len(gpus), kf.NR)
    tot = np.array([_slot(total)] * max(1, len(gpus)), dtype=np.int64)
    mix = np.array([_row(s) for s, _ in shapes], dtype=np.int64).reshape(len(shapes), kf.T_COLS)
    weights = np.array([w for _, w in shapes], dtype=np.float64)
    acc = np.array([[a] for a in (access or [True] * len(shapes))], dtype=np.bool_)
    return float(kf.frag_of(np.ascontiguousarray(free), tot, len(gpus), cpu, mem, 0, mix, weights, acc))


#: cpu, memory, GPUs, core, ratio, memory per GPU.
CPU_ONLY = (4000, 8 * GI, 0, 0, 0, 0)
HALF = (4000, 8 * GI, 1, 50, 50, 0)
THIRD = (2000, 4 * GI, 1, 30, 30, 0)
ONE = (8000, 32 * GI, 1, 100, 100, 0)
TWO = (16_000, 64 * GI, 2, 100, 100, 0)
MEM_20G = (1000, GI, 1, 0, 0, 20 * GI)
#: Ascend NPUs (gpu devices with AI cores, no gpu-core), on cards of 20 AI cores and 64Gi:
#: a full NPU (npu-core 20 + ratio 100) and a vNPU (5 AI cores, 16Gi).
NPU_CARD = (0, 100, 64 * GI, 20)
FULL_NPU = (8000, 32 * GI, 1, 0, 100, 0, 20)
VNPU = (2000, 4 * GI, 1, 0, 0, 16 * GI, 5)


@pytest.mark.parametrize(
    ("gpus", "shapes", "kw", "expected"),
    [
        # No GPU asked: every free share is a fragment for it.
        ([100, 30], [(CPU_ONLY, 1.0)], {}, 130),
        # Does not fit on the node (too little cpu for one copy): all of it.
        ([100, 100], [(ONE, 1.0)], {"cpu": 4000}, 200),
        # Not allowed on the node (model, selector, taint): all of it.
        ([100, 100], [(ONE, 1.0)], {"access": [False]}, 200),
        # The paper's case: a GPU with less free than the task's share is a fragment.
        ([100, 30], [(HALF, 1.0)], {}, 30),
        # What copies leave over on a GPU is a fragment too (100 = 3 x 30 + 10).
        ([100], [(THIRD, 1.0)], {}, 10),
        # Whole GPUs: partly used ones are fragments, and so are free ones beyond the copies.
        ([100, 100, 100, 40], [(TWO, 1.0)], {}, 140),
        ([100, 100, 100, 100], [(TWO, 1.0)], {}, 0),
        # cpu for one copy only: seven free GPUs are stranded for a one-GPU task.
        ([100] * 8, [(ONE, 1.0)], {"cpu": 8000}, 700),
        # memory for two copies: six stranded.
        ([100] * 8, [(ONE, 1.0)], {"mem": 64 * GI}, 600),
        # Nothing free: nothing fragmented.
        ([0, 0], [(ONE, 1.0), (CPU_ONLY, 1.0)], {}, 0),
        # A GPU-memory request: 80Gi GPUs hold 4 copies of 20Gi; a copy takes a quarter of a card.
        ([100], [(MEM_20G, 1.0)], {}, 0),
        ([(100, 100, 50 * GI)], [(MEM_20G, 1.0)], {}, 50),
        # The mix: the weighted sum over shapes.
        ([100, 30], [(HALF, 0.25), (CPU_ONLY, 0.75)], {}, 0.25 * 30 + 0.75 * 130),
        ([100, 100, 50], [(ONE, 0.5), (HALF, 0.5)], {}, 0.5 * 50 + 0.5 * 0),
        # NPUs: a card's free share is its free AI cores in percent; two free cards hold two full NPUs.
        ([NPU_CARD, NPU_CARD], [(FULL_NPU, 1.0)], {"total": NPU_CARD}, 0),
        # 12 of 20 AI cores free (60 %), 48Gi: two 5-core vNPUs (25 % each) fit, 10 % left over.
        ([(0, 75, 48 * GI, 12)], [(VNPU, 1.0)], {"total": NPU_CARD}, 10),
        # ... and no full NPU fits: all 60 % is a fragment for it.
        ([(0, 75, 48 * GI, 12)], [(FULL_NPU, 1.0)], {"total": NPU_CARD}, 60),
        # No AI core left: nothing of the card is free for the measure.
        ([(0, 40, 25 * GI, 0)], [(VNPU, 1.0)], {"total": NPU_CARD}, 0),
        # A GPU task cannot use an NPU: every free share is a fragment for it.
        ([NPU_CARD], [(HALF, 1.0)], {"total": NPU_CARD}, 100),
    ],
)
def test_measure(
    gpus: list[int], shapes: list[tuple[tuple[int, ...], float]], kw: dict, expected: float
) -> None:
    assert frag(gpus, shapes, **kw) == pytest.approx(expected)


def test_placed_takes_the_gpu_that_leaves_least() -> None:
    """A half-GPU pod on a node with GPUs free 100 and 50: on the half-free one, the node can
    still give a whole GPU (fragment 0 for one-GPU tasks); on the free one it cannot (150)."""
    rows = np.zeros(1, dtype=np.int64)
    flags = np.ones(1, dtype=np.int64)
    nslot = np.array([[2, 0, 0]], dtype=np.int64)
    dev_free = np.zeros((1, 3, 2, kf.NR), dtype=np.int64)
    dev_free[0, 0, 0, :2] = 100
    dev_free[0, 0, 1, :2] = 50
    dev_total = np.zeros((1, 3, 2, kf.NR), dtype=np.int64)
    dev_total[0, 0, :, :2] = 100
    card = np.zeros(1, dtype=np.int64)
    node = np.array([[64_000, 512 * GI, 0]], dtype=np.int64)
    mix = np.array([_row(ONE)], dtype=np.int64)
    weights = np.ones(1)
    access = np.ones((1, 1), dtype=np.bool_)
    best = np.zeros(1, dtype=np.int64)
    pod = np.array(_row(HALF), dtype=np.int64)
    after = kf.placed_frags(
        rows, flags, nslot, dev_free, dev_total, card, card, node, mix, weights, access, pod, best
    )
    assert best.tolist() == [1]
    assert after.tolist() == [0]
    before = kf.node_frags(rows, flags, nslot, dev_free, dev_total, card, card, node, mix, weights, access)
    assert before.tolist() == [50 * kf.SCALE]


def test_cards_without_a_device_cr_are_whole_gpus() -> None:
    """A node offering nvidia.com/gpu without a Device CR: one slot per card, free when unrequested."""
    rows = np.zeros(1, dtype=np.int64)
    flags = np.zeros(1, dtype=np.int64)  # no Device CR
    nslot = np.zeros((1, 3), dtype=np.int64)
    dev = np.zeros((1, 3, 1, kf.NR), dtype=np.int64)
    node = np.array([[64_000, 512 * GI, 0]], dtype=np.int64)
    mix = np.array([_row(TWO)], dtype=np.int64)
    access = np.ones((1, 1), dtype=np.bool_)
    out = kf.node_frags(
        rows, flags, nslot, dev, dev, np.array([4]), np.array([1]), node, mix, np.ones(1), access
    )
    assert out.tolist() == [100 * kf.SCALE]  # 3 free cards hold one 2-GPU copy: one stranded


def _shape(cpu: int, gpus: int = 0, core: int = 0) -> Shape:
    return Shape(cpu, GI, gpus, core, core)


def test_scarcity_weights_shapes_by_how_few_nodes_can_hold_them() -> None:
    """Two shapes with equal counts; one fits on 1 of 4 equal nodes: it weighs 4 ** 1.5 = 8 times
    the other."""
    nodes = np.array(
        [[128_000, 1024 * GI, 8, 100, 100, 80 * GI, 0]] + [[32_000, 1024 * GI, 8, 100, 100, 80 * GI, 0]] * 3,
        dtype=np.int64,
    )
    big, small = _shape(120_000, 8, 100), _shape(1000, 1, 100)
    tables = build_tables(0, [(big, 1.0), (small, 1.0)], lambda s: np.ones(4, dtype=np.bool_), nodes, True)
    assert tables.shares.tolist() == [0.5, 0.5]
    assert tables.weights.tolist() == pytest.approx([8 / 9, 1 / 9])
    plain = build_tables(0, [(big, 1.0), (small, 1.0)], lambda s: np.ones(4, dtype=np.bool_), nodes, False)
    assert plain.weights.tolist() == [0.5, 0.5]


def test_a_shape_no_node_can_hold_does_not_count() -> None:
    nodes = np.array([[32_000, 1024 * GI, 8, 100, 100, 80 * GI, 0]], dtype=np.int64)
    huge, small = _shape(64_000, 1, 100), _shape(1000, 1, 100)
    tables = build_tables(0, [(huge, 3.0), (small, 1.0)], lambda s: np.ones(1, dtype=np.bool_), nodes, True)
    assert tables.weights.tolist() == [0.0, 1.0]


def test_learned_mix_decays() -> None:
    mix = LearnedMix(half_life=100.0, max_shapes=8, drift=0.05)
    a, b = _shape(1000), _shape(2000, 1, 50)
    mix.observe(a, now=0.0)
    mix.observe(b, now=100.0)  # one half-life later: twice the weight
    assert mix.stale
    masses = dict(mix.masses())
    assert masses[a] == pytest.approx(1.0)
    assert masses[b] == pytest.approx(2.0)
    assert not mix.stale
    mix.observe(a, now=100.0)  # +2 on a mass of 3: more than 5 % drift
    assert mix.stale


def test_learned_mix_keeps_the_heaviest_shapes() -> None:
    mix = LearnedMix(half_life=1e9, max_shapes=2, drift=0.05)
    shapes = [_shape(1000 * (i + 1)) for i in range(5)]
    for i, s in enumerate(shapes):
        for _ in range(i + 1):
            mix.observe(s, now=0.0)
    kept = [s for s, _ in mix.masses()]
    assert kept == [shapes[4], shapes[3]]


def test_learned_mix_reanchors_without_changing_ratios() -> None:
    mix = LearnedMix(half_life=1.0, max_shapes=8, drift=0.05)
    a, b = _shape(1000), _shape(2000)
    mix.observe(a, now=0.0)
    mix.observe(b, now=60.0)  # 2**60 times heavier: the anchor moves, a all but vanishes
    masses = dict(mix.masses())
    assert masses[b] == pytest.approx(1.0)
    assert masses.get(a, 0.0) < 1e-12
