"""The openb trace format (Alibaba's GPU cluster trace of the FGD paper), read into plain records.

A trace is a node list and a task list in the CSV layout of ``../shared/data/openb/`` (see its
README): nodes ``sn,cpu_milli,memory_mib,gpu,model``; tasks ``name,cpu_milli,memory_mib,num_gpu,
gpu_milli,gpu_spec,...`` (the columns after ``gpu_spec`` are not used). The paper's experiment
also fixes, per seed, the arrival order (``order_*.csv``: the shuffled tasks, then sampled copies
up to 130 % of the cluster's GPUs) and the node names (``nodes_*.csv``). For a trace without
those files, :func:`tune` makes an arrival order the same way: a seeded shuffle, then copies of
tasks drawn at random until the arrived GPU request reaches the target share of the GPUs.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

#: The shared data folder beside the project (the paper's files).
SHARED_OPENB = Path(__file__).resolve().parents[2] / "shared" / "data" / "openb"

MILLI = 1000


@dataclass(frozen=True, slots=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    #: Per GPU, in thousandths of a card (1000: whole cards; below: a shared part of one card).
    gpu_milli: int
    #: Allowed GPU models; empty: any.
    gpu_spec: tuple[str, ...] = ()
    #: The task this one copies (the trace's tuning), or its own name.
    source: str = ""

    @property
    def gpu_request_milli(self) -> int:
        """What the paper's arrival and allocation count: ``num_gpu`` x ``gpu_milli``."""
        return self.num_gpu * self.gpu_milli

    @property
    def shared(self) -> bool:
        return self.num_gpu == 1 and 0 < self.gpu_milli < MILLI

    @property
    def kind(self) -> str:
        """The paper's task classes: cpu (no GPU), share, 1, 2, 4, 8 (or n) GPUs."""
        if self.num_gpu == 0:
            return "cpu"
        if self.shared:
            return "share"
        return f"{self.num_gpu}gpu"


def _int(row: dict[str, str], key: str, where: str) -> int:
    raw = (row.get(key) or "").strip()
    try:
        return int(float(raw)) if raw else 0
    except ValueError:
        raise ValueError(f"{where}: column {key!r} is not a number: {raw!r}") from None


def read_nodes(path: Path) -> list[TraceNode]:
    out = []
    with path.open(newline="") as f:
        for i, row in enumerate(csv.DictReader(f), start=2):
            where = f"{path}:{i}"
            name = (row.get("sn") or "").strip()
            if not name:
                raise ValueError(f"{where}: node without a name (column sn)")
            model = (row.get("model") or "").strip()
            out.append(
                TraceNode(
                    name=name,
                    cpu_milli=_int(row, "cpu_milli", where),
                    memory_mib=_int(row, "memory_mib", where),
                    gpus=_int(row, "gpu", where),
                    model="" if model.lower() == "nan" else model,
                )
            )
    return out


def _spec(raw: str | None) -> tuple[str, ...]:
    raw = (raw or "").strip()
    if not raw or raw.lower() == "nan":
        return ()
    return tuple(sorted({m.strip() for m in raw.split("|") if m.strip()}))


def read_tasks(path: Path) -> list[Task]:
    out = []
    with path.open(newline="") as f:
        for i, row in enumerate(csv.DictReader(f), start=2):
            where = f"{path}:{i}"
            name = (row.get("name") or "").strip()
            if not name:
                raise ValueError(f"{where}: task without a name")
            num_gpu = _int(row, "num_gpu", where)
            gpu_milli = _int(row, "gpu_milli", where)
            if num_gpu < 0 or not 0 <= gpu_milli <= MILLI or (num_gpu > 1 and gpu_milli != MILLI):
                raise ValueError(f"{where}: num_gpu {num_gpu} with gpu_milli {gpu_milli} is not a task shape")
            out.append(
                Task(
                    name=name,
                    cpu_milli=_int(row, "cpu_milli", where),
                    memory_mib=_int(row, "memory_mib", where),
                    num_gpu=num_gpu if gpu_milli else 0,
                    gpu_milli=gpu_milli if num_gpu else 0,
                    gpu_spec=_spec(row.get("gpu_spec")),
                    source=name,
                )
            )
    return out


def read_order(path: Path, tasks: Sequence[Task]) -> list[Task]:
    """The arrival order of ``order_*.csv`` (``arrival,pod,source_pod``): copies take their
    source's requests."""
    by_name = {t.name: t for t in tasks}
    rows = []
    with path.open(newline="") as f:
        for i, row in enumerate(csv.DictReader(f), start=2):
            source = by_name.get(row["source_pod"])
            if source is None:
                raise ValueError(f"{path}:{i}: source_pod {row['source_pod']!r} is not in the task list")
            rows.append((int(row["arrival"]), replace(source, name=row["pod"], source=source.name)))
    rows.sort(key=lambda r: r[0])
    return [t for _, t in rows]


def read_node_names(path: Path) -> dict[str, str]:
    """``nodes_*.csv`` (``creation,node,source_node``): trace name -> the name the experiment gave it."""
    with path.open(newline="") as f:
        return {row["source_node"]: row["node"] for row in csv.DictReader(f)}


def total_gpus(nodes: Iterable[TraceNode]) -> int:
    return sum(n.gpus for n in nodes)


def tune(tasks: Sequence[Task], gpus: int, seed: int, ratio: float = 1.3) -> list[Task]:
    """An arrival order for a trace without the paper's: the tasks shuffled, then copies of tasks
    drawn uniformly (``<name>-tuned-<i>``) until the arrived GPU request reaches ``ratio`` of the GPUs."""
    rng = random.Random(seed)
    order = list(tasks)
    rng.shuffle(order)
    arrived = sum(t.gpu_request_milli for t in order)
    target = ratio * gpus * MILLI
    gpu_tasks = [t for t in tasks if t.num_gpu]
    i = 0
    while arrived < target and gpu_tasks:
        source = rng.choice(tasks)
        order.append(replace(source, name=f"{source.name}-tuned-{i}", source=source.name))
        arrived += source.gpu_request_milli
        i += 1
    return order


@dataclass(frozen=True, slots=True)
class Trace:
    """One run's input: the nodes (named as the run names them) and the tasks in arrival order."""

    name: str
    seed: int
    nodes: list[TraceNode]
    tasks: list[Task]

    @property
    def gpus(self) -> int:
        return total_gpus(self.nodes)


def load(
    *,
    seed: int,
    nodes_csv: Path | None = None,
    tasks_csv: Path | None = None,
    data: Path = SHARED_OPENB,
    ratio: float = 1.3,
) -> Trace:
    """The paper's trace for ``seed`` (its order and node names when ``data`` has them for the
    trace), or any trace in the same CSV format with a tuned order of our own."""
    nodes_csv = nodes_csv or data / "openb_node_list_gpu_node.csv"
    tasks_csv = tasks_csv or data / "openb_pod_list_default.csv"
    nodes = read_nodes(nodes_csv)
    tasks = read_tasks(tasks_csv)
    workload = tasks_csv.stem.removeprefix("openb_pod_list_")
    order_csv = tasks_csv.parent / f"order_{workload}_seed{seed}.csv"
    names_csv = tasks_csv.parent / f"nodes_{workload}_seed{seed}.csv"
    gpus = total_gpus(nodes)
    ordered = read_order(order_csv, tasks) if order_csv.exists() else tune(tasks, gpus, seed, ratio)
    if names_csv.exists():
        names = read_node_names(names_csv)
        nodes = [replace(n, name=names.get(n.name, n.name)) for n in nodes]
    return Trace(name=workload, seed=seed, nodes=nodes, tasks=ordered)
