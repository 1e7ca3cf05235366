"""The FGD paper's GPU allocation metric, from the tasks in arrival order and which were placed.

After each task (placed or not): arrived = the summed GPU request (``num_gpu`` x ``gpu_milli``)
of every task so far, used = the GPU request of the placed ones among them (tasks never leave).
Arrival % is ``arrived / gpus / 10`` rounded to a whole percent (half up), allocation % is
``used / gpus / 10``; the value at X % is the mean allocation % over the tasks whose arrival
rounds to X. The paper publishes X = 0 .. 130.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from openb_trace import Task

#: The arrival percentages the paper publishes.
ARRIVALS = range(0, 131)
#: The two values the paper's text quotes (and the issue's targets).
HEADLINE = (100, 130)
#: The paper's published policies, in its order.
PAPER_POLICIES = ("01-Random", "02-DotProd", "03-GpuClustering", "04-GpuPacking", "05-BestFit", "06-FGD")


def curve(tasks: Sequence[Task], placed: Sequence[bool], gpus: int) -> dict[int, float]:
    """Arrival % -> mean allocation % (only the percentages some task's arrival rounds to)."""
    if len(tasks) != len(placed):
        raise ValueError("one placed flag per task")
    sums: dict[int, float] = {}
    counts: dict[int, int] = {}
    arrived = used = 0
    for task, ok in zip(tasks, placed, strict=True):
        arrived += task.gpu_request_milli
        if ok:
            used += task.gpu_request_milli
        x = math.floor(arrived / gpus / 10 + 0.5)
        sums[x] = sums.get(x, 0.0) + used / gpus / 10
        counts[x] = counts.get(x, 0) + 1
    return {x: sums[x] / counts[x] for x in sorted(sums)}


def at(points: Mapping[int, float], x: int) -> float:
    """The value at ``x``; a percentage no task rounds to takes the last value before it."""
    if x in points:
        return points[x]
    before = [k for k in points if k <= x]
    return points[max(before)] if before else 0.0


def read_paper(
    path: Path, workload: str = "openb_pod_list_default"
) -> dict[str, dict[int, dict[int, float]]]:
    """``paper_alloc_*.csv``: policy -> seed -> arrival % -> allocation %."""
    out: dict[str, dict[int, dict[int, float]]] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["workload"] != workload:
                continue
            points = {int(k): float(v) for k, v in row.items() if k.isdigit() and v not in ("", None)}
            out.setdefault(row["sc_policy"], {})[int(row["seed"])] = points
    return out
