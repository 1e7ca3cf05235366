"""A stand-alone replay of the FGD paper's experiment with its policies, as the paper describes them.

This is not koordsched: it is the yardstick for traces the paper published no figures for (the
variants of ``bench/openb_variants.py``), and a check that the metric and the trace handling of
``bench/openb.py`` reproduce the published figures (``--policy fgd`` on the default trace lands
within a few tenths of a point of the paper's FGD). Each task arrives once, in order, and is placed
on the feasible node (cpu, memory, GPUs with enough free share, GPU model) with the best score, the
smallest node name among equal ones, or dropped.

Policies (from the paper's section 5 and its simulator's documented behaviour):

* ``fgd``: the paper's FGD. The workload mix is the paper's *typical pods*: task shapes (cpu, GPU
  count, per-GPU share, models; memory is not part of a shape), most frequent first, until 95 %
  of the tasks are covered. A node's fragmentation for a shape: all its free GPU share when the
  shape cannot run there (cpu, GPUs, model; a shape without GPUs always counts the node's whole
  free share), else the free share of each GPU with less free than the shape's per-GPU request.
  The score is ``int(100 * sigmoid(-increase / 1000))`` (increase in thousandths of a GPU); a
  sharing task takes the GPU with the best score (the lowest index among equal ones).
* ``bestfit``: least weighted free share after placement (cpu, memory and GPU shares of the
  node's capacity, equal weights), and ``random``: a uniformly random feasible node (seeded), the
  first GPU that fits. These two are simplified readings of the paper's baselines and do **not**
  reproduce its BestFit and Random figures (they land about a point below and eight points above
  them on the default trace); ``bench/openb.py`` uses ``fgd`` only and takes the baselines from
  the published results.
"""

from __future__ import annotations

import argparse
import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit
from openb_metric import HEADLINE, at, curve
from openb_trace import MILLI, SHARED_OPENB, Task, Trace, load

MAX_GPUS = 8


@dataclass(frozen=True, slots=True)
class Mix:
    """Task shapes and their shares, as arrays the kernels read."""

    cpu: np.ndarray
    mem: np.ndarray
    num: np.ndarray
    milli: np.ndarray
    weight: np.ndarray
    #: shape x model -> whether the shape may run on that model.
    access: np.ndarray


def _model_index(trace: Trace) -> dict[str, int]:
    models = sorted({n.model for n in trace.nodes})
    return {m: i for i, m in enumerate(models)}


def typical_mix(tasks: Sequence[Task], models: dict[str, int], threshold: float = 0.95) -> Mix:
    """The paper's typical pods: the most frequent shapes covering ``threshold`` of the tasks,
    renormalised."""
    counts = Counter((t.cpu_milli, t.num_gpu, t.gpu_milli, t.gpu_spec) for t in tasks)
    ranked = counts.most_common()
    kept, covered = [], 0
    for shape, n in ranked:
        if covered >= threshold * len(tasks):
            break
        kept.append((shape, n))
        covered += n
    cpu = np.array([s[0] for s, _ in kept], dtype=np.int64)
    num = np.array([s[1] for s, _ in kept], dtype=np.int64)
    milli = np.array([s[2] for s, _ in kept], dtype=np.int64)
    weight = np.array([n / covered for _, n in kept], dtype=np.float64)
    access = np.zeros((len(kept), max(1, len(models))), dtype=np.bool_)
    for i, (s, _) in enumerate(kept):
        for m, j in models.items():
            access[i, j] = not s[3] or m in s[3]
    return Mix(cpu, np.zeros(len(kept), dtype=np.int64), num, milli, weight, access)


@njit(cache=True)
def _node_frag(cpu, gf, ng, model, t_cpu, t_num, t_milli, t_w, t_access):  # type: ignore[no-untyped-def]
    free = 0
    for g in range(ng):
        free += gf[g]
    total = 0.0
    for t in range(len(t_w)):
        if t_milli[t] == 0 or not t_access[t, model] or cpu < t_cpu[t]:
            frag = free
        else:
            fits = 0
            small = 0
            for g in range(ng):
                if gf[g] >= t_milli[t]:
                    fits += 1
                else:
                    small += gf[g]
            frag = small if fits >= t_num[t] else free
        total += t_w[t] * frag
    return total


@njit(cache=True)
def _fgd_score(delta):  # type: ignore[no-untyped-def]
    return np.int64(100.0 / (1.0 + math.exp(delta / 1000.0)))


@njit(cache=True)
def _replay(  # type: ignore[no-untyped-def]
    policy,
    cpu_free,
    mem_free,
    gfree,
    ngpu,
    model,
    cap_cpu,
    cap_mem,
    cap_gpu,
    p_cpu,
    p_mem,
    p_num,
    p_milli,
    p_access,
    t_cpu,
    t_num,
    t_milli,
    t_w,
    t_access,
    rand,
):
    n_nodes = len(cpu_free)
    placed = np.zeros(len(p_cpu), dtype=np.bool_)
    before = np.empty(n_nodes)
    for n in range(n_nodes):
        before[n] = _node_frag(cpu_free[n], gfree[n], ngpu[n], model[n], t_cpu, t_num, t_milli, t_w, t_access)
    trial = np.empty(MAX_GPUS, dtype=np.int64)
    for i in range(len(p_cpu)):
        best_node = -1
        best_gpu = -1
        best_score = -np.inf
        feasible = 0
        for n in range(n_nodes):
            if cpu_free[n] < p_cpu[i] or mem_free[n] < p_mem[i] or not p_access[i, model[n]]:
                continue
            ng = ngpu[n]
            fits = 0
            first = -1
            for g in range(ng):
                if gfree[n, g] >= p_milli[i]:
                    fits += 1
                    if first < 0:
                        first = g
            if p_num[i] > 0 and fits < p_num[i]:
                continue
            feasible += 1
            score = -np.inf
            gpu = first
            if policy == 0:  # fgd
                if p_num[i] == 1 and p_milli[i] < 1000:
                    for g in range(ng):
                        if gfree[n, g] < p_milli[i]:
                            continue
                        for k in range(ng):
                            trial[k] = gfree[n, k]
                        trial[g] -= p_milli[i]
                        after = _node_frag(
                            cpu_free[n] - p_cpu[i], trial, ng, model[n], t_cpu, t_num, t_milli, t_w, t_access
                        )
                        s = _fgd_score(after - before[n])
                        if s > score:
                            score = s
                            gpu = g
                else:
                    for k in range(ng):
                        trial[k] = gfree[n, k]
                    taken = 0
                    for k in range(ng):
                        if taken < p_num[i] and trial[k] >= p_milli[i]:
                            trial[k] -= p_milli[i]
                            taken += 1
                    after = _node_frag(
                        cpu_free[n] - p_cpu[i], trial, ng, model[n], t_cpu, t_num, t_milli, t_w, t_access
                    )
                    score = _fgd_score(after - before[n])
            elif policy == 1:  # bestfit: least weighted free share after placement
                gsum = 0
                for k in range(ng):
                    gsum += gfree[n, k]
                g_after = gsum - p_num[i] * p_milli[i]
                share = (cpu_free[n] - p_cpu[i]) / cap_cpu[n] + (mem_free[n] - p_mem[i]) / cap_mem[n]
                if cap_gpu[n] > 0:
                    share += g_after / cap_gpu[n]
                score = -share
                if p_num[i] == 1 and p_milli[i] < 1000:  # the fullest GPU that fits
                    least = 1 << 40
                    for g in range(ng):
                        if p_milli[i] <= gfree[n, g] < least:
                            least = gfree[n, g]
                            gpu = g
            else:  # random: reservoir sampling over the feasible nodes
                score = 0.0
                if rand[i, 0] * feasible < 1.0:
                    best_node = n
                    best_gpu = gpu
                continue
            if score > best_score:
                best_score = score
                best_node = n
                best_gpu = gpu
        if best_node < 0:
            continue
        n = best_node
        placed[i] = True
        cpu_free[n] -= p_cpu[i]
        mem_free[n] -= p_mem[i]
        if p_num[i] == 1 and p_milli[i] < 1000:
            gfree[n, best_gpu] -= p_milli[i]
        else:
            taken = 0
            for k in range(ngpu[n]):
                if taken < p_num[i] and gfree[n, k] >= p_milli[i]:
                    gfree[n, k] -= p_milli[i]
                    taken += 1
        before[n] = _node_frag(cpu_free[n], gfree[n], ngpu[n], model[n], t_cpu, t_num, t_milli, t_w, t_access)
    return placed


POLICIES = {"fgd": 0, "bestfit": 1, "random": 2}


def replay(trace: Trace, policy: str, seed: int | None = None) -> list[bool]:
    """Which tasks the policy places, in arrival order."""
    nodes = sorted(trace.nodes, key=lambda n: n.name)  # ties go to the smallest name
    models = _model_index(trace)
    cpu_free = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
    mem_free = np.array([n.memory_mib for n in nodes], dtype=np.int64)
    ngpu = np.array([min(n.gpus, MAX_GPUS) for n in nodes], dtype=np.int64)
    gfree = np.zeros((len(nodes), MAX_GPUS), dtype=np.int64)
    for i in range(len(nodes)):
        gfree[i, : ngpu[i]] = MILLI
    model = np.array([models[n.model] for n in nodes], dtype=np.int64)
    tasks = trace.tasks
    access = np.zeros((len(tasks), max(1, len(models))), dtype=np.bool_)
    for i, t in enumerate(tasks):
        for m, j in models.items():
            access[i, j] = not t.gpu_spec or m in t.gpu_spec
    mix = typical_mix(tasks, models)
    rng = random.Random(trace.seed if seed is None else seed)
    rand = np.array([[rng.random()] for _ in tasks], dtype=np.float64)
    placed = _replay(
        POLICIES[policy],
        cpu_free,
        mem_free,
        gfree,
        ngpu,
        model,
        np.array([max(1, n.cpu_milli) for n in nodes], dtype=np.float64),
        np.array([max(1, n.memory_mib) for n in nodes], dtype=np.float64),
        np.array([n.gpus * MILLI for n in nodes], dtype=np.float64),
        np.array([t.cpu_milli for t in tasks], dtype=np.int64),
        np.array([t.memory_mib for t in tasks], dtype=np.int64),
        np.array([t.num_gpu for t in tasks], dtype=np.int64),
        np.array([t.gpu_milli for t in tasks], dtype=np.int64),
        access,
        mix.cpu,
        mix.num,
        mix.milli,
        mix.weight,
        mix.access,
        rand,
    )
    return [bool(p) for p in placed]


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", default="fgd", choices=sorted(POLICIES))
    ap.add_argument("--seeds", default="42,43,44,45,46")
    args = ap.parse_args(argv)
    values: dict[int, list[float]] = {x: [] for x in HEADLINE}
    for seed in (int(s) for s in args.seeds.split(",")):
        trace = load(seed=seed, data=SHARED_OPENB)
        points = curve(trace.tasks, replay(trace, args.policy), trace.gpus)
        line = ", ".join(f"{x} %: {at(points, x):.2f}" for x in HEADLINE)
        print(f"seed {seed}: {line}")
        for x in HEADLINE:
            values[x].append(at(points, x))
    print("mean: " + ", ".join(f"{x} %: {sum(v) / len(v):.2f}" for x, v in values.items()))


if __name__ == "__main__":
    main()
