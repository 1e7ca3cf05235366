"""Variants of the openb default trace that stress placement differently, sampled from it.

The paper evaluates FGD on traces resampled from the default one (``gpushare40..100``,
``multigpu20..50``, ``gpuspec10..33``: its public trace repository carries them); these are
made the same way, from the default trace, with a seed:

* ``gpushare<X>``: GPU-sharing tasks bring X % of the trace's GPU request (28 % in the default);
* ``multigpu<X>``: tasks of 2 or more GPUs bring X % of it (7 % in the default);
* ``gpuspec<X>``: X % of the GPU tasks may run on one GPU model only, drawn in proportion to the
  cluster's GPUs of each model (so the constrained demand matches the supply).

The task count and the share of CPU-only tasks stay those of the default trace. For the share
variants, tasks are drawn with replacement within two classes (the emphasised class and the other
GPU tasks), in proportions solved so that the expected GPU request of the emphasised class is
X %; a drawn task keeps its requests and gets a new name (``<source>-v<i>``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from openb_trace import Task, TraceNode

Classifier = Callable[[Task], bool]


def _is_share(t: Task) -> bool:
    return t.shared


def _is_multi(t: Task) -> bool:
    return t.num_gpu >= 2


def _resample(tasks: Sequence[Task], emphasised: Classifier, share: float, seed: int) -> list[Task]:
    rng = random.Random(seed)
    cpu = [t for t in tasks if t.num_gpu == 0]
    hot = [t for t in tasks if t.num_gpu and emphasised(t)]
    cold = [t for t in tasks if t.num_gpu and not emphasised(t)]
    if not hot or (share < 1 and not cold):
        raise ValueError("the trace has no task of the class to emphasise")
    n_gpu = len(tasks) - len(cpu)
    mean_hot = sum(t.gpu_request_milli for t in hot) / len(hot)
    mean_cold = sum(t.gpu_request_milli for t in cold) / len(cold) if cold else 0.0
    # f tasks of n_gpu are hot: f*mean_hot / (f*mean_hot + (1-f)*mean_cold) = share.
    f = 1.0 if share >= 1 else share * mean_cold / (mean_hot * (1 - share) + share * mean_cold)
    n_hot = round(f * n_gpu)
    drawn = [rng.choice(hot) for _ in range(n_hot)] + [rng.choice(cold) for _ in range(n_gpu - n_hot)]
    out = list(cpu) + drawn
    rng.shuffle(out)
    return [replace(t, name=f"{t.name}-v{i}", source=t.name) for i, t in enumerate(out)]


def _constrain(tasks: Sequence[Task], nodes: Sequence[TraceNode], share: float, seed: int) -> list[Task]:
    rng = random.Random(seed)
    supply: dict[str, int] = {}
    for n in nodes:
        if n.gpus and n.model:
            supply[n.model] = supply.get(n.model, 0) + n.gpus
    models = sorted(supply)
    weights = [supply[m] for m in models]
    out = []
    for t in tasks:
        if t.num_gpu and rng.random() < share:
            t = replace(t, gpu_spec=(rng.choices(models, weights)[0],))
        out.append(t)
    return out


KINDS = ("gpushare", "multigpu", "gpuspec")


def make(name: str, tasks: Sequence[Task], nodes: Sequence[TraceNode], seed: int) -> list[Task]:
    """The variant ``name`` (e.g. ``multigpu50``) of ``tasks``."""
    m = re.fullmatch(r"(gpushare|multigpu|gpuspec)(\d{1,3})", name)
    if m is None:
        expected = ", ".join(k + "<percent>" for k in KINDS)
        raise ValueError(f"unknown variant {name!r}: expected one of {expected}")
    kind, pct = m.group(1), int(m.group(2)) / 100
    if not 0 < pct <= 1:
        raise ValueError(f"variant {name!r}: the percentage must be 1-100")
    if kind == "gpushare":
        return _resample(tasks, _is_share, pct, seed)
    if kind == "multigpu":
        return _resample(tasks, _is_multi, pct, seed)
    return _constrain(tasks, nodes, pct, seed)
