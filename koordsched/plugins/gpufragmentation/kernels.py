"""The fragmentation measure over many nodes at once (numba).

A node's GPUs, for the measure, are up to ``MAX_SLOTS`` slots of (core, memory ratio, memory,
NPU core) free and total, as DeviceShare's rows hold them (:mod:`koordsched.plugins.deviceshare.rows`);
a node without a Device CR that offers whole cards (``nvidia.com/gpu``) gets one slot per card,
free when not requested. Amounts are in DeviceShare's units: core and ratio in percent of a
card (100 = one card), memory in bytes, NPU core in AI cores (``huawei.com/npu-core``).

An Ascend NPU is a ``gpu`` device (Koordinator v1.7) with AI cores instead of ``gpu-core``: its
free share of a card, where the measure sums free core, is its free AI cores in percent of its
total, and a copy of a vNPU shape takes its AI cores' share of the card.

**The measure.** For one workload shape ``t`` (cpu ``c``, memory ``m``, ``k`` GPUs of ``d``
each) and a node whose free GPU capacity is ``F`` (the summed free core of its GPUs):

* ``k == 0`` (no GPU), a node the shape may not use (its node selector, affinity or
  tolerations: GPU models among them), or too little cpu or memory for one copy: the whole
  of ``F`` is fragment, as in the paper;
* otherwise the node holds ``n`` copies of the shape at most (GPUs: a GPU holds
  ``min(free_r // d_r)`` copies over the requested resources, and ``n`` copies of ``k`` GPUs
  each fit when ``sum_g min(copies_g, n) >= k * n``; cpu: ``free_cpu // c``; memory the
  same) and the fragment is what those copies cannot use: ``F - n * k * share``, where
  ``share`` is the core one copy takes of each GPU.

This is the paper's measure (a task that does not fit makes every free GPU a fragment, a GPU
with less free than the task asks is a fragment) made exact for capacity: the free share of a
GPU left over once it holds as many copies as fit is a fragment too, and so are GPUs that cpu
or memory leave no room to use (a node with 8 free GPUs and cpu for one 1-GPU task strands 7
for that task). The node's fragmentation is the sum over shapes of ``weight * fragment``.

Values are returned scaled by ``SCALE`` and rounded, as int64, so they can be remembered per
row (:mod:`koordsched.framework.rowmemo`) and compared exactly.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt
from numba import njit
from numba import types as nbt

I64Array = npt.NDArray[np.int64]
F64Array = npt.NDArray[np.float64]

#: Fragment values are scaled by this before rounding (a card is 100, weights sum to 1).
SCALE: Final = 1_000_000
#: Mix columns.
T_CPU: Final = 0
T_MEM: Final = 1
T_K: Final = 2
T_CORE: Final = 3
T_RATIO: Final = 4
T_GMEM: Final = 5
T_NPU: Final = 6
T_COLS: Final = 7
#: Node columns (besides the GPU slots): free cpu (milli), free memory (bytes). A node's
#: column in the mix's access table is its row.
N_CPU: Final = 0
N_MEM: Final = 1
N_COLS: Final = 2
#: What placed_frags gives a row the pod does not fit on.
NO_FIT: Final = 1 << 62
#: Resource index of the slots: core, memory ratio, memory, NPU core (DeviceShare's first gpu
#: columns, in its order; a mix row's T_CORE.. columns follow the same order).
R_CORE: Final = 0
R_RATIO: Final = 1
R_GMEM: Final = 2
R_NPU: Final = 3
NR: Final = 4

_BIG = 1 << 62

_I64_1D = nbt.int64[::1]
_I64_2D = nbt.int64[:, ::1]
_I64_3D = nbt.int64[:, :, ::1]
_I64_4D = nbt.int64[:, :, :, ::1]
_F64_1D = nbt.float64[::1]
_B_2D = nbt.boolean[:, ::1]
#: The per-row kernels' arguments: rows, DeviceShare's flags, slot counts, free and total, the
#: cards of nodes without a Device CR (offered, requested), the node table, and the mix.
_ROW_ARGS = (_I64_1D, _I64_1D, _I64_2D, _I64_4D, _I64_4D, _I64_1D, _I64_1D, _I64_2D, _I64_2D, _F64_1D, _B_2D)


@njit(nbt.int64(_I64_2D, nbt.int64, nbt.int64, nbt.int64, nbt.int64, nbt.int64), cache=True, nogil=True)
def _copies_on(free, s, core, ratio, gmem, npu):  # type: ignore[no-untyped-def]
    """Copies of one GPU's per-copy demand that slot ``s`` holds (0 for a demand of nothing)."""
    c = _BIG
    if core > 0:
        c = min(c, free[s, 0] // core)
    if ratio > 0:
        c = min(c, free[s, 1] // ratio)
    if gmem > 0:
        c = min(c, free[s, 2] // gmem)
    if npu > 0:
        c = min(c, free[s, 3] // npu)
    return 0 if c == _BIG else c


@njit(nbt.int64(_I64_2D, _I64_2D, nbt.int64), cache=True, nogil=True)
def _free_share(free, total, s):  # type: ignore[no-untyped-def]
    """Slot ``s``'s free share of its card, in percent: its free core, or for an NPU (AI cores
    and no gpu-core) its free AI cores in percent of its total."""
    if total[s, 0] > 0 or total[s, 3] <= 0:
        return free[s, 0]
    return free[s, 3] * 100 // total[s, 3]


@njit(
    nbt.float64(_I64_2D, _I64_2D, nbt.int64, nbt.int64, nbt.int64, nbt.int64, _I64_2D, _F64_1D, _B_2D),
    cache=True,
    nogil=True,
)
def frag_of(free, total, nslot, cpu, mem, col, mix, weights, access):  # type: ignore[no-untyped-def]
    """One node's expected fragment over the mix (unscaled): ``free``/``total`` are its slots
    (slot x resource), ``cpu``/``mem`` what is free, ``col`` its column in ``access``
    (shape x node: the shape may run there)."""
    f_all = 0
    for s in range(nslot):
        f_all += _free_share(free, total, s)
    if f_all <= 0:
        return 0.0
    out = 0.0
    n_cols = access.shape[1]
    for t in range(mix.shape[0]):
        w = weights[t]
        if w == 0.0:
            continue
        k = mix[t, 2]
        c = mix[t, 0]
        m = mix[t, 1]
        if k == 0 or col >= n_cols or not access[t, col] or cpu < c or mem < m:
            out += w * f_all
            continue
        core = mix[t, 3]
        ratio = mix[t, 4]
        gmem = mix[t, 5]
        npu = mix[t, 6]
        if k == 1:
            n = 0
            for s in range(nslot):
                n += _copies_on(free, s, core, ratio, gmem, npu)
        else:
            # The most copies of k GPUs each: the largest n with sum_g min(copies_g, n) >= k * n.
            per = np.zeros(nslot, dtype=np.int64)
            hi = 0
            for s in range(nslot):
                per[s] = _copies_on(free, s, core, ratio, gmem, npu)
                hi += per[s]
            n = hi // k
            while n > 0:
                got = 0
                for s in range(nslot):
                    got += min(per[s], n)
                if got >= k * n:
                    break
                n -= 1
        if c > 0:
            n = min(n, cpu // c)
        if m > 0:
            n = min(n, mem // m)
        if n <= 0:
            out += w * f_all
            continue
        # The core one copy takes of a GPU: its core (or AI cores), else its share of memory
        # ratio or memory.
        share = core
        if share <= 0 and npu > 0 and total[0, 3] > 0:
            share = (npu * 100 + total[0, 3] - 1) // total[0, 3]
        if share <= 0 and ratio > 0 and total[0, 1] > 0:
            share = (ratio * total[0, 0] + total[0, 1] - 1) // total[0, 1]
        if share <= 0 and gmem > 0 and total[0, 2] > 0:
            share = (gmem * total[0, 0] + total[0, 2] - 1) // total[0, 2]
        rest = f_all - n * k * share
        if rest > 0:
            out += w * rest
    return out


@njit(cache=True, nogil=True)
def _load(free_out, total_out, row, flags, nslot, dev_free, dev_total, card_total, card_used):  # type: ignore[no-untyped-def]
    """Write the row's GPU slots into the scratch arrays; the slot count. Without a Device CR,
    whole cards: ``card_total`` offered, ``card_used`` requested."""
    if flags[row] & 1:  # FLAG_HAS_MODEL: a Device CR describes the GPUs
        n = nslot[row, 0]
        for s in range(n):
            for r in range(4):
                free_out[s, r] = dev_free[row, 0, s, r]
                total_out[s, r] = dev_total[row, 0, s, r]
        return n
    n = min(card_total[row], free_out.shape[0])
    if n < 0:
        n = 0
    avail = card_total[row] - card_used[row]
    for s in range(n):
        whole = 100 if s < avail else 0
        free_out[s, 0] = whole
        free_out[s, 1] = whole
        free_out[s, 2] = 0
        free_out[s, 3] = 0
        total_out[s, 0] = 100
        total_out[s, 1] = 100
        total_out[s, 2] = 0
        total_out[s, 3] = 0
    return n


@njit(_I64_1D(*_ROW_ARGS), cache=True, nogil=True)
def node_frags(rows, flags, nslot, dev_free, dev_total, card_total, card_used, node, mix, weights, access):  # type: ignore[no-untyped-def]
    """Each row's fragmentation (scaled) as it is now."""
    out = np.zeros(len(rows), dtype=np.int64)
    width = max(dev_free.shape[2], 16)
    free = np.zeros((width, 4), dtype=np.int64)
    total = np.zeros((width, 4), dtype=np.int64)
    for i in range(len(rows)):
        row = rows[i]
        n = _load(free, total, row, flags, nslot, dev_free, dev_total, card_total, card_used)
        v = frag_of(free, total, n, node[row, 0], node[row, 1], row, mix, weights, access)
        out[i] = np.int64(np.round(v * SCALE))
    return out


@njit(nbt.boolean(_I64_2D, nbt.int64, _I64_1D), cache=True, nogil=True)
def _fits(free, s, pod):  # type: ignore[no-untyped-def]
    """Slot ``s`` holds one GPU's share of the pod (a slot with nothing free never does)."""
    return (
        free[s, 0] >= pod[3]
        and free[s, 1] >= pod[4]
        and free[s, 2] >= pod[5]
        and free[s, 3] >= pod[6]
        and (free[s, 0] > 0 or free[s, 1] > 0 or free[s, 3] > 0)
    )


@njit(_I64_1D(*_ROW_ARGS, _I64_1D, _I64_1D), cache=True, nogil=True)
def placed_frags(  # type: ignore[no-untyped-def]
    rows, flags, nslot, dev_free, dev_total, card_total, card_used, node, mix, weights, access, pod, best_slot
):
    """Each row's fragmentation (scaled) with the pod placed there.

    ``pod`` is (cpu, memory, k, core, ratio, memory, NPU core per GPU), as a mix row. A pod of one
    shared GPU goes to the slot that leaves the least fragmentation (the lowest on ties),
    written to ``best_slot``; k whole or shared GPUs take the fitting slots with the least
    free first (whole cards are alike for the measure). A row the pod does not fit on gets
    the largest value (and slot -1): the Filter keeps such rows out, this only keeps the
    kernel total.
    """
    out = np.zeros(len(rows), dtype=np.int64)
    width = max(dev_free.shape[2], 16)
    free = np.zeros((width, 4), dtype=np.int64)
    total = np.zeros((width, 4), dtype=np.int64)
    k = pod[2]
    worst = np.int64(NO_FIT)
    for i in range(len(rows)):
        row = rows[i]
        best_slot[i] = -1
        n = _load(free, total, row, flags, nslot, dev_free, dev_total, card_total, card_used)
        cpu = node[row, 0] - pod[0]
        mem = node[row, 1] - pod[1]
        col = row
        if k == 0:
            v = frag_of(free, total, n, cpu, mem, col, mix, weights, access)
            out[i] = np.int64(np.round(v * SCALE))
            continue
        if k == 1:
            best = worst
            for s in range(n):
                if not _fits(free, s, pod):
                    continue
                for r in range(4):
                    free[s, r] -= pod[3 + r]
                v = np.int64(np.round(frag_of(free, total, n, cpu, mem, col, mix, weights, access) * SCALE))
                for r in range(4):
                    free[s, r] += pod[3 + r]
                if v < best:
                    best = v
                    best_slot[i] = s
                if pod[3] >= total[s, 0]:
                    break  # a whole card: every fitting slot is a free card, all alike
            out[i] = best
            continue
        # k GPUs: the fitting slots with the least free core first.
        taken = 0
        used = np.zeros(n, dtype=np.bool_)
        while taken < k:
            pick = -1
            for s in range(n):
                if used[s] or not _fits(free, s, pod):
                    continue
                if pick < 0 or _free_share(free, total, s) < _free_share(free, total, pick):
                    pick = s
            if pick < 0:
                break
            used[pick] = True
            taken += 1
        if taken < k:
            out[i] = worst
            continue
        for s in range(n):
            if used[s]:
                for r in range(4):
                    free[s, r] -= pod[3 + r]
        v = frag_of(free, total, n, cpu, mem, col, mix, weights, access)
        out[i] = np.int64(np.round(v * SCALE))
    return out


@njit(
    _F64_1D(_I64_2D, _I64_2D, nbt.int64, nbt.int64, nbt.int64, nbt.int64, _I64_2D, _F64_1D, _B_2D, _I64_1D),
    cache=True,
    nogil=True,
)
def slot_frags(free, total, nslot, cpu, mem, col, mix, weights, access, pod):  # type: ignore[no-untyped-def]
    """One node's fragmentation (unscaled) with one GPU's share of ``pod`` (a mix row) on each
    slot in turn; -1 where it does not fit. ``cpu``/``mem``: free after the pod."""
    out = np.full(nslot, -1.0)
    work = free.copy()
    for s in range(nslot):
        if not _fits(work, s, pod):
            continue
        for r in range(4):
            work[s, r] -= pod[3 + r]
        out[s] = frag_of(work, total, nslot, cpu, mem, col, mix, weights, access)
        for r in range(4):
            work[s, r] += pod[3 + r]
    return out


@njit(nbt.void(_I64_1D, nbt.int64, nbt.int64), cache=True, nogil=True)
def normalize(scores, resolution, top):  # type: ignore[no-untyped-def]
    """In place: ``top`` for the highest raw score, one less per ``resolution`` below it, 0 at
    ``top`` steps or more below."""
    if len(scores) == 0:
        return
    hi = scores.max()
    for i in range(len(scores)):
        steps = (hi - scores[i]) // resolution
        scores[i] = 0 if steps >= top else top - steps


def warm_up() -> None:
    """Run each kernel once, so the first scheduling cycle compiles nothing."""
    rows = np.zeros(1, dtype=np.int64)
    flags = np.ones(1, dtype=np.int64)
    nslot = np.ones((1, 3), dtype=np.int64)
    dev = np.zeros((1, 3, 1, NR), dtype=np.int64)
    dev[0, 0, 0, :2] = 100
    card = np.zeros(1, dtype=np.int64)
    node = np.array([[1000, 1 << 30]], dtype=np.int64)
    mix = np.array([[100, 0, 1, 50, 50, 0, 0], [0, 0, 2, 100, 100, 0, 0]], dtype=np.int64)
    weights = np.array([0.5, 0.5])
    access = np.ones((2, 1), dtype=np.bool_)
    node_frags(rows, flags, nslot, dev, dev.copy(), card, card, node, mix, weights, access)
    pod = np.array([100, 0, 1, 50, 50, 0, 0], dtype=np.int64)
    best = np.zeros(1, dtype=np.int64)
    placed_frags(rows, flags, nslot, dev, dev.copy(), card, card, node, mix, weights, access, pod, best)
    pod[2] = 2
    placed_frags(rows, flags, nslot, dev, dev.copy(), card, card, node, mix, weights, access, pod, best)
    normalize(np.zeros(2, dtype=np.int64), SCALE, 100)
    slots = np.ascontiguousarray(dev[0, 0])
    slot_frags(slots, slots.copy(), 1, 1000, 1 << 30, 0, mix, weights, access, pod)
