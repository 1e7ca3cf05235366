"""DeviceShare kernels: a per-row feasibility verdict and the node score, over all candidate rows.

The arrays are those of :class:`koordsched.plugins.deviceshare.rows.DeviceRows`: per row,
per device type, per slot (a device, ascending minor), per resource column, as the demand
table (:mod:`koordsched.plugins.deviceshare.demand`) lays them out (gpu: core, memory ratio,
memory; rdma; fpga). The kernels know no device type by name: they read the number of
types and columns from the arrays' shapes, and which type follows the GPU rules from the
pod vector. GPU rows also carry their partition table (an index into the flattened tables
``tab``/``grp``/``parts``), the bit masks of used and healthy GPU minors, and each GPU
slot's NUMA and PCIe scope. What the pod asks is packed into one int64 vector (scalars
``P_*``, per-type blocks ``B_*`` at :func:`block`), built once per request signature
(:func:`koordsched.plugins.deviceshare.cycle.pod_vector`).

**Filter.** :func:`filter_devices` returns, per row, :data:`PASS` (feasible), :data:`EXACT`
(the kernel's condition holds but is only necessary: the exact allocator,
:class:`~koordsched.plugins.deviceshare.allocator.Allocator`, must decide), or a reason code
(``R_*``) whose upstream Status :mod:`~koordsched.plugins.deviceshare.filter` knows. Per
requested type the kernel counts the devices that *satisfy* the per-instance request: free
>= request for every requested resource, some free resource non-zero, and, with an empty
``vfSelector``, a free VF. It then replays the allocator's decisions, which depend only on
per-node facts the row arrays also hold (device presence, VF groups, the partition table,
the node's partition policy, the used and healthy GPUs, the GPU topology tree):

* Prepare fails UAU when a requested type has no device, or when a ``vfSelector`` is
  given and no device of the type has VF groups: the allocator's own checks, in its order.
* Types under the units rule (RDMA, FPGA) and the generic GPU walk succeed iff at least
  ``desired`` devices satisfy the request: the walk takes satisfying devices (in whatever order) until it has
  enough, so the count is exact.
* GPU partitions (whole-GPU requests on a node with a partition index): the kernel
  searches the interned table exactly as the allocator does (unused and healthy minors,
  ring-bus bandwidth, Restricted = best group only), so a missing table or GPU count, a
  feasible partition, or an infeasible one are all decided; failures count only when the
  pod or the node honors partitions, otherwise the next step decides.
* The topology scope search: without a required scope it ends, at worst, at the Node
  scope, which holds every GPU, so it succeeds iff ``number_of_gpus`` GPUs satisfy the
  request ("Insufficient GPU Devices" otherwise; a satisfying GPU is healthy because the
  request is positive). With a required scope some NUMA node (NUMANode) or PCIe switch
  (PCIe) must hold that many satisfying GPUs (the kernel counts them per scope); Device
  is never satisfiable. No tree, or a multi-GPU shared request, is UAU when a scope is
  required and otherwise falls through to the generic walk.

The count is only a *necessary* condition when a hint narrows the candidates (selector,
PCIe exclusivity), a non-empty ``vfSelector`` filters VFs, SamePCIe joint allocation
raises a count, a GPU hint asks for VFs, or a request has a zero component (the pod
vector marks such a type uncertain): a type that passes under such a condition makes the
row EXACT. Types are visited in the allocator's order (joint types first); after an
undecided type a later definite failure is also EXACT, since only the allocator knows
which failure it reports. Whatever the rows cannot hold (too many devices, minors above
62) is flagged ``FLAG_OVERFLOW`` and is EXACT too; preemption state from AddPod/RemovePod
is not in the rows, and the filter sends such nodes to the allocator itself.

**Score.** :func:`score_devices` is the allocator's score when the working view is the
whole node (no narrowing hint, no stored NUMA affinity, no preemption state: the score
module decides when to call it), and -1 for a row it cannot score.
:func:`normalize_scores` is ``DefaultNormalizeScore``.

Signatures are eager and cached on disk, like the other kernels; :func:`warm_up` (the
plugin's ``PluginSpec.warm_up``) runs each once so the first scheduling cycle pays nothing.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit
from numba import types as nbt

I64Array = npt.NDArray[np.int64]
_I64_1D = nbt.int64[::1]
_I64_2D = nbt.int64[:, ::1]
_I64_3D = nbt.int64[:, :, ::1]
_I64_4D = nbt.int64[:, :, :, ::1]

# Row flags (see koordsched.plugins.deviceshare.rows).
FLAG_HAS_MODEL = 1
FLAG_OVERFLOW = 2
FLAG_HAS_TREE = 4
FLAG_NODE_HONOR = 16
FLAG_WELL_PLANNED = 32
FLAG_HAS_VF = 64
#: Device slots per type and row.
MAX_SLOTS = 16
#: GPU minors the row bit masks can hold (0..62).
MAX_MINOR = 62
#: Largest GPU count a partition table lookup covers.
MAX_PARTITION_SIZE = 64

# gpu_row columns.
G_TABLE = 0  # partition table id, -1 without a partition index
G_USED = 1  # bit mask of GPU minors with any usage
G_HEALTHY = 2  # bit mask of healthy GPU minors
G_COLS = 3

# Pod vector: scalars at fixed offsets, then the requests, then per-type blocks. The type count
# ``nt`` and the column count ``nr`` come from the demand table; the kernels read them from the
# arrays' shapes (``ndev.shape[1]``, ``free.shape[3]``), so one compiled kernel serves any table.
P_GPU_TYPE = 0  # kernel index of the type that follows the GPU rules, -1 when none does
P_GPU_N = 1
P_GPU_SHARED = 2
P_HONOR = 3  # the pod's gpu-partition-spec is present
P_REQUIRED = 4  # 0: no required topology scope; else its level + 1
P_BANDWIDTH = 5  # the partition spec's ringBusBandwidth rounded up, -1 without one
P_RESTRICTED = 6  # allocatePolicy Restricted: only the best partition group
P_REQ = 7  # nt*nr per-instance request per (type, column); -1: not requested
# Per-type blocks (nt entries each, in this order after the requests).
B_WANT = 0  # -1 type not requested; -2 ApplyForAll (every device); else the desired count
B_UNCERTAIN = 1  # 1 when the count condition is necessary but not sufficient for the type
B_ORDER = 2  # type indices in allocation order, -1 padded
B_NEED_VF = 3  # 1 when the node must have VF groups of the type (vfSelector given)
B_COUNT_VF = 4  # 1 when a device counts only if it has a free VF (empty vfSelector)
B_SKIP_WP = 5  # 1 for joint secondary types, skipped on secondary-well-planned nodes
B_PREP_UNCERTAIN = 6  # 1 when Prepare may fail for the type on a node that has its devices
N_BLOCKS = 7

# Verdicts.
PASS = 0
EXACT = 1
R_GPU_INSUFFICIENT = 2  # "Insufficient GPU Devices"
R_TOPO_SCOPED = 3  # "Insufficient Topology Scoped GPU Devices"
R_MISSING_TABLE = 4  # UAU "node(s) missing GPU Partition Table"
R_UNSUPPORTED_COUNT = 5  # UAU "node(s) Unsupported number of GPU requests"
R_PARTITION_INSUFFICIENT = 6  # "Insufficient Partitioned GPU Devices"
R_MISSING_TREE = 7  # UAU "node(s) missing GPU Device Topology Tree"
R_MULTI_SHARED = 8  # UAU "node(s) Unsupported Multi-Shared GPU"
#: Per-type codes: ``R_TYPED + R_STRIDE * type + R_NO_DEVICES | R_NO_VF | R_INSUFFICIENT``.
R_TYPED = 9
R_STRIDE = 3
R_NO_DEVICES = 0  # UAU "Insufficient <type> devices" (no device of the type)
R_NO_VF = 1  # UAU "Insufficient <type> VirtualFunctions"
R_INSUFFICIENT = 2  # "Insufficient <type> devices"
#: First code the filter may give to a Status of its own (``FilterCodes``' dynamic codes).
FIRST_DYNAMIC_CODE = 32


@njit(nbt.int64(nbt.int64, nbt.int64, nbt.int64), cache=True, nogil=True)
def block(nt: int, nr: int, b: int) -> int:
    """Where per-type block ``b`` (``B_*``) starts in the pod vector of a table of ``nt`` types."""
    return P_REQ + nt * nr + b * nt


@njit(nbt.int64(nbt.int64, nbt.int64), cache=True, nogil=True)
def pod_length(nt: int, nr: int) -> int:
    """The pod vector's length for a table of ``nt`` types and ``nr`` columns."""
    return P_REQ + nt * nr + N_BLOCKS * nt


@njit(nbt.int64(nbt.int64, nbt.int64), cache=True, nogil=True)
def typed_code(t: int, kind: int) -> int:
    """The reason code of ``kind`` (``R_NO_DEVICES``, ``R_NO_VF``, ``R_INSUFFICIENT``) for type ``t``."""
    return R_TYPED + R_STRIDE * t + kind


@njit(
    nbt.boolean(
        nbt.int64, nbt.int64, nbt.int64, nbt.int64, nbt.int64, nbt.boolean, _I64_3D, _I64_2D, _I64_2D
    ),
    cache=True,
    nogil=True,
)
def _partition_feasible(
    table: int,
    n: int,
    used: int,
    healthy: int,
    bandwidth: int,
    restricted: bool,
    tab: I64Array,
    grp: I64Array,
    parts: I64Array,
) -> bool:
    """``allocateByPartition``'s search: an unused, healthy partition of ``n`` GPUs with enough bandwidth.

    Groups are visited best first; Restricted looks at the first group only.
    """
    first = tab[table, n, 0]
    for g in range(first, first + tab[table, n, 1]):
        start = grp[g, 0]
        for p in range(start, start + grp[g, 1]):
            mask = parts[p, 0]
            if mask & used != 0 or mask & healthy != mask:
                continue
            if bandwidth >= 0 and parts[p, 1] < bandwidth:
                continue
            return True
        if restricted:
            return False
    return False


@njit(
    nbt.int64(
        nbt.uint64,
        nbt.int64,
        nbt.int64,
        _I64_2D,
        _I64_2D,
        _I64_4D,
        _I64_3D,
        _I64_2D,
        _I64_3D,
        _I64_3D,
        _I64_2D,
        _I64_2D,
        _I64_1D,
    ),
    cache=True,
    nogil=True,
)
def _type_verdict(
    r: np.uint64,
    t: int,
    fl: int,
    ndev: I64Array,
    nslot: I64Array,
    free: I64Array,
    vf_free: I64Array,
    gpu_row: I64Array,
    gpu_group: I64Array,
    tab: I64Array,
    grp: I64Array,
    parts: I64Array,
    pod: I64Array,
) -> int:
    """One type on one row: PASS, EXACT or a reason code (see the module docstring for why)."""
    nt = ndev.shape[1]
    nr = free.shape[3]
    count_vf = pod[block(nt, nr, B_COUNT_VF) + t] != 0
    satisfied = np.zeros(MAX_SLOTS, dtype=np.bool_)
    cnt = 0
    for s in range(nslot[r, t]):
        ok = True
        nonzero = False
        for k in range(nr):
            f = free[r, t, s, k]
            q = pod[P_REQ + t * nr + k]
            if f != 0:
                nonzero = True
            if q >= 0 and q > f:
                ok = False
        if ok and nonzero and (not count_vf or vf_free[r, t, s] > 0):
            satisfied[s] = True
            cnt += 1
    want = pod[block(nt, nr, B_WANT) + t]
    uncertain = pod[block(nt, nr, B_UNCERTAIN) + t] != 0
    if t != pod[P_GPU_TYPE]:
        desired = ndev[r, t] if want == -2 else want
        if cnt < desired:
            return typed_code(t, R_INSUFFICIENT)
        return EXACT if uncertain else PASS
    n = pod[P_GPU_N]
    shared = pod[P_GPU_SHARED] != 0
    honor = pod[P_HONOR] != 0 or fl & FLAG_NODE_HONOR != 0
    success = EXACT if uncertain else PASS
    # 1. partitions (whole GPUs only); failures count only when partitions are honored.
    if not shared:
        table = gpu_row[r, G_TABLE]
        if table < 0:
            if honor:
                return R_MISSING_TABLE
        elif n < 0 or n > MAX_PARTITION_SIZE or tab[table, n, 1] == 0:
            if honor:
                return R_UNSUPPORTED_COUNT
        elif _partition_feasible(
            table,
            n,
            gpu_row[r, G_USED],
            gpu_row[r, G_HEALTHY],
            pod[P_BANDWIDTH],
            pod[P_RESTRICTED] != 0,
            tab,
            grp,
            parts,
        ):
            return success
        elif honor:
            return R_PARTITION_INSUFFICIENT
    # 2. the topology scope search (Node -> NUMA -> PCIe).
    required = pod[P_REQUIRED] != 0
    if fl & FLAG_HAS_TREE != 0:
        if not (shared and n > 1):
            if not required:
                return R_GPU_INSUFFICIENT if cnt < n else success
            level = pod[P_REQUIRED] - 1
            if level >= 4:
                return R_TOPO_SCOPED  # no scope is deeper than PCIe
            if level <= 1:
                return R_TOPO_SCOPED if cnt < n else success
            # Some NUMA node (level 2) or PCIe switch (level 3) must hold n satisfying GPUs.
            col = 0 if level == 2 else 1
            groups = np.zeros(MAX_SLOTS, dtype=np.int64)
            for s in range(nslot[r, t]):
                gid = gpu_group[r, s, col]
                if satisfied[s] and gid >= 0:
                    groups[gid] += 1
                    if groups[gid] >= n:
                        return success
            return R_TOPO_SCOPED
        if required:
            return R_MULTI_SHARED
    elif required:
        return R_MISSING_TREE
    # 3. the generic walk over all GPUs.
    if cnt < n:
        return typed_code(t, R_INSUFFICIENT)
    return success


@njit(
    _I64_1D(
        _I64_1D,
        _I64_2D,
        _I64_2D,
        _I64_4D,
        _I64_3D,
        _I64_2D,
        _I64_3D,
        _I64_3D,
        _I64_2D,
        _I64_2D,
        _I64_1D,
        _I64_1D,
    ),
    cache=True,
    nogil=True,
)
def filter_devices(
    flags: I64Array,
    ndev: I64Array,
    nslot: I64Array,
    free: I64Array,
    vf_free: I64Array,
    gpu_row: I64Array,
    gpu_group: I64Array,
    tab: I64Array,
    grp: I64Array,
    parts: I64Array,
    rows: I64Array,
    pod: I64Array,
) -> I64Array:
    """Per row: PASS, EXACT or a reason code, following the allocator's order of checks.

    Prepare first (a requested type without any device, then a vfSelector on a node
    without VF groups), then each type in allocation order. A type whose count condition
    holds but is only necessary makes the row EXACT; a later definite failure then also
    needs the exact allocator, which alone knows which failure it reports first.
    """
    n = rows.shape[0]
    out = np.empty(n, dtype=np.int64)
    nt = ndev.shape[1]
    nr = free.shape[3]
    o_want = block(nt, nr, B_WANT)
    o_skip = block(nt, nr, B_SKIP_WP)
    o_prep = block(nt, nr, B_PREP_UNCERTAIN)
    o_need_vf = block(nt, nr, B_NEED_VF)
    o_order = block(nt, nr, B_ORDER)
    for i in range(n):
        r = np.uint64(rows[i])
        fl = flags[r]
        if fl & FLAG_HAS_MODEL == 0:
            out[i] = PASS
            continue
        if fl & FLAG_OVERFLOW != 0:
            out[i] = EXACT
            continue
        well_planned = fl & FLAG_WELL_PLANNED != 0
        code = PASS
        # Prepare: an earlier type whose own check the kernel cannot make (ApplyForAll with a
        # selector) leaves any later Prepare failure to the exact allocator.
        prep_uncertain = False
        for t in range(nt):
            if pod[o_want + t] == -1 or (well_planned and pod[o_skip + t] != 0):
                continue
            if ndev[r, t] == 0:
                code = EXACT if prep_uncertain else typed_code(t, R_NO_DEVICES)
                break
            if pod[o_prep + t] != 0:
                prep_uncertain = True
        if code == PASS:
            for t in range(nt):
                if pod[o_want + t] == -1 or (well_planned and pod[o_skip + t] != 0):
                    continue
                if pod[o_need_vf + t] != 0 and fl & (FLAG_HAS_VF << t) == 0:
                    code = EXACT if prep_uncertain else typed_code(t, R_NO_VF)
                    break
        if code == PASS and prep_uncertain:
            code = EXACT
        if code == PASS:
            uncertain = False
            for j in range(nt):
                t = pod[o_order + j]
                if t < 0:
                    break
                if pod[o_want + t] == -1 or (well_planned and pod[o_skip + t] != 0):
                    continue
                v = _type_verdict(
                    r, t, fl, ndev, nslot, free, vf_free, gpu_row, gpu_group, tab, grp, parts, pod
                )
                if v == PASS:
                    continue
                if v == EXACT:
                    uncertain = True
                    continue
                code = EXACT if uncertain else v
                break
            if code == PASS and uncertain:
                code = EXACT
        out[i] = code
    return out


@njit(
    _I64_1D(_I64_1D, _I64_2D, _I64_2D, _I64_4D, _I64_4D, _I64_1D, _I64_1D, _I64_1D, nbt.boolean),
    cache=True,
    nogil=True,
)
def score_devices(
    flags: I64Array,
    ndev: I64Array,
    nslot: I64Array,
    free: I64Array,
    total: I64Array,
    rows: I64Array,
    pod: I64Array,
    weights: I64Array,
    most_allocated: bool,
) -> I64Array:
    """DeviceShare's raw node score: the sum over requested types of ``scoreNode``.

    For each type, totals and frees are summed over all its devices per weighted resource
    and scored LeastAllocated or MostAllocated with the per-instance request; resources
    with a zero total are left out. A node where Prepare would fail scores 0 (only feasible
    nodes are scored, so this only matters for consistency). -1 marks a row the kernel
    cannot score (overflow).
    """
    n = rows.shape[0]
    out = np.zeros(n, dtype=np.int64)
    nt = ndev.shape[1]
    nr = free.shape[3]
    o_want = block(nt, nr, B_WANT)
    o_skip = block(nt, nr, B_SKIP_WP)
    o_need_vf = block(nt, nr, B_NEED_VF)
    for i in range(n):
        r = np.uint64(rows[i])
        fl = flags[r]
        if fl & FLAG_HAS_MODEL == 0:
            continue
        if fl & FLAG_OVERFLOW != 0:
            out[i] = -1
            continue
        well_planned = fl & FLAG_WELL_PLANNED != 0
        # A node where Prepare fails (a type without devices or without VF groups) scores 0.
        prepared = True
        for t in range(nt):
            if pod[o_want + t] == -1 or (well_planned and pod[o_skip + t] != 0):
                continue
            if ndev[r, t] == 0 or (pod[o_need_vf + t] != 0 and fl & (FLAG_HAS_VF << t) == 0):
                prepared = False
        if not prepared:
            continue
        score = 0
        for t in range(nt):
            if pod[o_want + t] == -1 or (well_planned and pod[o_skip + t] != 0):
                continue
            acc = 0
            weight_sum = 0
            for k in range(nr):
                w = weights[t * nr + k]
                if w <= 0:
                    continue
                tot = 0
                fr = 0
                for s in range(nslot[r, t]):
                    tot += total[r, t, s, k]
                    fr += free[r, t, s, k]
                if tot == 0:
                    continue
                q = pod[P_REQ + t * nr + k]
                if q < 0:
                    q = 0
                req = tot - fr + q if tot >= fr else tot
                if most_allocated:
                    sc = (min(req, tot) * 100) // tot
                else:
                    sc = 0 if req > tot else ((tot - req) * 100) // tot
                acc += sc * w
                weight_sum += w
            if weight_sum > 0:
                score += acc // weight_sum
        out[i] = score
    return out


#: Below this, ``x * (1.0 / top)`` is within one of ``x // top`` (float64 carries 53 bits).
_EXACT_FLOAT = 1 << 52


@njit(nbt.void(_I64_1D, nbt.int64), cache=True, nogil=True)
def normalize_scores(scores: I64Array, max_priority: int) -> None:
    """``DefaultNormalizeScore`` (not reversed), in place: ``score * max_priority // highest``; all
    scores stay as they are when the highest is not positive. Scores are non-negative.

    One multiplication by the reciprocal and a correction by one replace the integer division
    per row, which is what made this cost as much as the plugin's whole Score.
    """
    n = scores.shape[0]
    if n == 0:
        return
    top = scores[0]
    for i in range(1, n):
        if scores[i] > top:
            top = scores[i]
    if top <= 0:
        return
    inv = 1.0 / top
    for i in range(n):
        x = scores[i] * max_priority
        if x >= _EXACT_FLOAT:
            scores[i] = x // top
            continue
        q = np.int64(x * inv)
        if (q + 1) * top <= x:
            q += 1
        elif q * top > x:
            q -= 1
        scores[i] = q


@njit(nbt.boolean(_I64_1D, nbt.int64, nbt.int64), cache=True, nogil=True)
def any_between(values: I64Array, low: int, high: int) -> bool:
    """Whether some value lies in ``[low, high]``: one call where two numpy passes (a comparison,
    then a search) would cost more than the kernel on the few rows a cycle recomputes."""
    for i in range(values.shape[0]):  # noqa: SIM110 (a loop numba compiles, not a generator)
        if low <= values[i] <= high:
            return True
    return False


def empty_partition_tables() -> tuple[I64Array, I64Array, I64Array]:
    """``tab``, ``grp`` and ``parts`` with no table in them."""
    return (
        np.zeros((1, MAX_PARTITION_SIZE + 1, 2), dtype=np.int64),
        np.zeros((1, 2), dtype=np.int64),
        np.zeros((1, 2), dtype=np.int64),
    )


def empty_pod_vector(nt: int, nr: int) -> I64Array:
    """A pod vector requesting nothing: no type, no order, no GPU facts."""
    v = np.full(pod_length(nt, nr), -1, dtype=np.int64)
    v[P_GPU_N:P_REQ] = 0
    for b in (B_UNCERTAIN, B_NEED_VF, B_COUNT_VF, B_SKIP_WP, B_PREP_UNCERTAIN):
        start = block(nt, nr, b)
        v[start : start + nt] = 0
    return v


def warm_up() -> None:
    """Run each kernel once on a one-row, one-GPU table of one type and one column."""
    flags = np.full(1, FLAG_HAS_MODEL | FLAG_HAS_TREE, dtype=np.int64)
    ndev = np.ones((1, 1), dtype=np.int64)
    nslot = ndev.copy()
    free = np.full((1, 1, 1, 1), 100, dtype=np.int64)
    total = free.copy()
    vf_free = np.zeros((1, 1, 1), dtype=np.int64)
    rows = np.zeros(1, dtype=np.int64)
    pod = empty_pod_vector(1, 1)
    pod[P_GPU_TYPE] = 0
    pod[P_REQ] = 100
    pod[block(1, 1, B_WANT)] = 1
    pod[block(1, 1, B_ORDER)] = 0
    pod[P_GPU_N] = 1
    gpu_row = np.zeros((1, G_COLS), dtype=np.int64)
    gpu_row[0, G_TABLE] = -1
    gpu_group = np.zeros((1, 1, 2), dtype=np.int64)
    tab, grp, parts = empty_partition_tables()
    filter_devices(flags, ndev, nslot, free, vf_free, gpu_row, gpu_group, tab, grp, parts, rows, pod)
    pod[P_REQUIRED] = 4
    filter_devices(flags, ndev, nslot, free, vf_free, gpu_row, gpu_group, tab, grp, parts, rows, pod)
    weights = np.ones(1, dtype=np.int64)
    score_devices(flags, ndev, nslot, free, total, rows, pod, weights, False)
    score_devices(flags, ndev, nslot, free, total, rows, pod, weights, True)
    normalize_scores(np.array([1, 2], dtype=np.int64), 100)
    any_between(rows, EXACT, EXACT)
