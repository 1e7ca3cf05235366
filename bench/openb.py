"""The FGD paper's GPU allocation benchmark on Alibaba's openb trace, through koordsched's simulator.

The trace (``../shared/data/openb/``, see its README) becomes what a user would apply: a Node and
a Koordinator ``Device`` CR per trace node, a Pod per task (namespace ``openb``, schedulerName
``koord-scheduler``, creationTimestamp by arrival). The objects are scheduled by
:func:`~koordsched.backends.sim.runner.simulate_cluster`, the path ``koordsched simulate``
takes, with a profile and a seed; which tasks were bound gives the paper's metric
(``bench/openb_metric.py``): GPU allocation % against arrived GPU request %, read at 100 % and
130 %. The table puts it beside the paper's six published policies (``paper_alloc_default.csv``).

The paper schedules each task once, in arrival order, and never retries. The simulator takes the
pods in file order (the queue's tie-break when every pod is queued at virtual time 0) and may
retry a pod that fitted nowhere; with pods only ever added, such a pod fits nowhere later either.
Each run checks both from the simulator's event log and attempt counts: every pod's first
attempt in arrival order, and every bound pod bound at its first attempt (the run fails loudly
otherwise).

    .venv/bin/python bench/openb.py                                     # seeds 42-46, bundled profile
    .venv/bin/python bench/openb.py --seeds 42 --tasks 500              # a quick look
    .venv/bin/python bench/openb.py --seeds 42 --config koord-scheduler --config chart \\
        --json openb.json --svg openb.svg
    .venv/bin/python bench/openb.py --variant gpushare40 --seeds 42     # beside the reference FGD
    .venv/bin/python bench/openb.py --seeds 42 --write-yaml openb-42.yaml   # then: koordsched
        simulate --seed 42 openb-42.yaml  (the same input)

GPU requests (``--gpu-form``): ``shared`` (default) asks ``nvidia.com/gpu: n`` for whole GPUs and
``koordinator.sh/gpu-core`` + ``koordinator.sh/gpu-memory-ratio`` (the task's share in percent)
for a part of one; ``hami`` adds ``koordinator.sh/gpu.shared: 1`` to the part (the form
docs/hami-core.md gives); ``percent`` asks ``koordinator.sh/gpu`` for both (``n x 100``, or the
share). Each run is its own process (``--one``), so its memory is its own.

The profile runs as it is: where it sets no ``percentageOfNodesToScore`` (the bundled ones do
not), kube-scheduler's adaptive rule stops the search at about 40 % of these 1,213 nodes once
enough feasible ones turned up, where the paper's simulator scores every node; ``--percentage
100`` scores every node.

GPU memory per model, for the Device CRs and ``koordinator.sh/gpu-memory``: P100, T4 and V100M16
16Gi, V100M32 32Gi, A10 24Gi as published; G1, G2 and G3 are Alibaba's undisclosed models and
are given 32Gi, 80Gi and 80Gi (an assumption; every request here is a ratio, so the amount does
not change a placement).
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import math
import os
import re
import resource
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import yaml
from openb_metric import ARRIVALS, HEADLINE, PAPER_POLICIES, at, curve, read_paper
from openb_trace import MILLI, SHARED_OPENB, Task, Trace, TraceNode, load, read_tasks, tune

from koordsched.api.field_errors import Refused
from koordsched.api.koordinator import (
    GPU,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_SHARED,
    LABEL_GPU_MODEL,
    NVIDIA_GPU,
)
from koordsched.backends.sim.loader import Cluster, KindSpec, LoadedObject, kind_specs
from koordsched.backends.sim.port import FAILED_SCHEDULING, SimPort
from koordsched.backends.sim.results import SCHEDULED, PodResult
from koordsched.backends.sim.runner import simulate_cluster
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import load_config
from koordsched.framework.registry import Registry
from koordsched.plugins.registry import in_tree_registry

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PAPER_CSV = SHARED_OPENB / "paper_alloc_default.csv"

NAMESPACE = "openb"
SCHEDULER_NAME = "koord-scheduler"
#: The README: each node allows 1,001 pods.
MAX_PODS = 1001
#: Pod i was created BASE_TIME + i seconds: creation order is arrival order.
BASE_TIME = datetime(2023, 1, 1, tzinfo=UTC)
IMAGE = "registry.example/openb/task:1"
#: GiB of memory per GPU of each model (G1-G3: assumed, see the module docstring).
GPU_MEMORY_GIB = {"P100": 16, "T4": 16, "V100M16": 16, "V100M32": 32, "A10": 24, "G1": 32, "G2": 80, "G3": 80}
#: A model the table does not know.
DEFAULT_GPU_MEMORY_GIB = 32
FORMS = ("shared", "hami", "percent")
#: Profile names --config accepts besides paths.
PROFILES = {
    "koord-scheduler": default_profile_path(),
    "default": default_profile_path(),
    "koordinator-chart": ROOT / "examples" / "profiles" / "koordinator-chart.yaml",
    "chart": ROOT / "examples" / "profiles" / "koordinator-chart.yaml",
}
DEFAULT_SEEDS = (42, 43, 44, 45, 46)
#: The paper's policies as the table and plot name them.
PAPER_LABELS = {p: p.split("-", 1)[1] for p in PAPER_POLICIES}


# --- the objects ---------------------------------------------------------------------------------


def gpu_memory_gib(model: str) -> int:
    return GPU_MEMORY_GIB.get(model, DEFAULT_GPU_MEMORY_GIB)


def node_manifest(n: TraceNode) -> dict[str, Any]:
    """The Node as the cluster would show it: koordlet's GPU resources synced by koord-manager."""
    labels = {"kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux"}
    resources: dict[str, str] = {
        "cpu": f"{n.cpu_milli}m",
        "memory": f"{n.memory_mib}Mi",
        "pods": str(MAX_PODS),
    }
    if n.gpus:
        if n.model:
            labels[LABEL_GPU_MODEL] = n.model
        share = str(n.gpus * 100)
        resources.update(
            {
                NVIDIA_GPU: str(n.gpus),
                GPU: share,
                GPU_CORE: share,
                GPU_MEMORY_RATIO: share,
                GPU_MEMORY: f"{n.gpus * gpu_memory_gib(n.model)}Gi",
                GPU_SHARED: share,
            }
        )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": n.name, "labels": labels},
        "status": {"allocatable": dict(resources), "capacity": dict(resources)},
    }


def device_manifest(n: TraceNode) -> dict[str, Any] | None:
    """The node's Device CR (named as the node), one healthy GPU per minor; None without GPUs."""
    if not n.gpus:
        return None
    memory = f"{gpu_memory_gib(n.model)}Gi"
    devices = [
        {
            "type": "gpu",
            "id": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{n.name}.gpu{minor}.openb')}",
            "minor": minor,
            "health": True,
            "resources": {GPU_CORE: "100", GPU_MEMORY_RATIO: "100", GPU_MEMORY: memory},
        }
        for minor in range(n.gpus)
    ]
    meta: dict[str, Any] = {"name": n.name}
    if n.model:
        meta["labels"] = {LABEL_GPU_MODEL: n.model}
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": meta,
        "spec": {"devices": devices},
    }


def gpu_requests(t: Task, form: str) -> dict[str, int]:
    """The task's GPU resources in the chosen form (empty without GPUs)."""
    if form not in FORMS:
        raise ValueError(f"unknown GPU request form {form!r}: one of {', '.join(FORMS)}")
    if not t.num_gpu:
        return {}
    if t.gpu_milli % 10:
        raise ValueError(f"task {t.name}: gpu_milli {t.gpu_milli} is not a whole percent")
    percent = t.gpu_milli // 10
    if form == "percent":
        return {GPU: t.num_gpu * percent}
    if t.gpu_milli == MILLI:
        return {NVIDIA_GPU: t.num_gpu}
    out = {GPU_CORE: percent, GPU_MEMORY_RATIO: percent}
    if form == "hami":
        out[GPU_SHARED] = 1
    return out


def creation_timestamp(index: int) -> str:
    return (BASE_TIME + timedelta(seconds=index)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_manifest(t: Task, index: int, form: str = "shared") -> dict[str, Any]:
    """The task as a pending Pod; ``index`` is its place in the arrival order."""
    requests: dict[str, Any] = {"cpu": f"{t.cpu_milli}m", "memory": f"{t.memory_mib}Mi"}
    devices = {name: str(amount) for name, amount in gpu_requests(t, form).items()}
    requests.update(devices)
    resources: dict[str, Any] = {"requests": requests}
    if devices:
        # Extended resources cannot be overcommitted: limits equal to requests.
        resources["limits"] = dict(devices)
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME,
        "containers": [{"name": "task", "image": IMAGE, "resources": resources}],
    }
    if t.gpu_spec:
        term = {"matchExpressions": [{"key": LABEL_GPU_MODEL, "operator": "In", "values": list(t.gpu_spec)}]}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    meta: dict[str, Any] = {
        "name": t.name,
        "namespace": NAMESPACE,
        "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{t.name}.{NAMESPACE}.openb")),
        "creationTimestamp": creation_timestamp(index),
        "labels": {"app": "openb"},
    }
    if t.source and t.source != t.name:
        meta["annotations"] = {"openb.koordsched.dev/source-task": t.source}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def manifests(
    nodes: Sequence[TraceNode], tasks: Sequence[Task], form: str = "shared"
) -> Iterator[dict[str, Any]]:
    """Every object, in the order a file would hold them: per node its Node and Device, then the
    pods in arrival order (the simulator feeds pending pods in file order)."""
    for n in nodes:
        yield node_manifest(n)
        device = device_manifest(n)
        if device is not None:
            yield device
    for i, t in enumerate(tasks):
        yield pod_manifest(t, i, form)


def _decode(doc: dict[str, Any], specs: Mapping[str, KindSpec]) -> LoadedObject:
    """One manifest as ``koordsched simulate``'s loader decodes it (type, API checks, defaulting)."""
    kind = doc["kind"]
    spec = specs[kind]
    obj = msgspec.convert(doc, spec.type)
    if spec.check is not None:
        try:
            spec.check(obj)
        except Refused as exc:
            raise ValueError(f"{kind} {doc['metadata']['name']}: {exc}") from exc
    if spec.defaults is not None:
        obj = spec.defaults(obj)
    meta = obj.metadata
    key = sys.intern(f"{meta.namespace}/{meta.name}") if spec.namespaced else meta.name
    return LoadedObject(sys.intern(kind), key, obj, spec.role, "openb")


def build_cluster(
    nodes: Sequence[TraceNode], tasks: Sequence[Task], form: str = "shared", registry: Registry | None = None
) -> Cluster:
    """The trace as a decoded cluster, in memory (what loading :func:`write_yaml`'s file gives)."""
    specs = kind_specs(registry if registry is not None else in_tree_registry())
    cluster = Cluster()
    cluster.objects.extend(_decode(doc, specs) for doc in manifests(nodes, tasks, form))
    return cluster


def write_yaml(path: Path, nodes: Sequence[TraceNode], tasks: Sequence[Task], form: str = "shared") -> int:
    """The same objects as a multi-document file for ``koordsched simulate``; returns how many."""
    dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    count = 0
    with path.open("w") as f:
        f.write(f"# openb trace: {len(nodes)} nodes, {len(tasks)} pods (bench/openb.py --gpu-form {form})\n")
        for doc in manifests(nodes, tasks, form):
            f.write("---\n")
            yaml.dump(doc, f, Dumper=dumper, sort_keys=False, default_flow_style=None, width=200)
            count += 1
    return count


# --- one run -------------------------------------------------------------------------------------


@dataclass
class Checks:
    """What the run says about the paper's assumptions (each task tried once, in arrival order)."""

    attempted: int = 0
    #: Scheduling attempts in all, and pods tried more than once (all unschedulable, or a problem).
    attempts: int = 0
    retried_pods: int = 0
    in_arrival_order: bool = True
    bound_at_first_attempt: bool = True
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_run(port: SimPort, results: Iterable[PodResult], tasks: Sequence[Task]) -> Checks:
    """From the event log (one Scheduled or FailedScheduling event per attempt, in attempt order:
    the simulator's binding runs before its next cycle) and the attempt counts."""
    out = Checks()
    first: dict[str, int] = {}
    first_reason: dict[str, str] = {}
    order: list[str] = []
    for e in port.events:
        if e.namespace != NAMESPACE:
            continue
        if e.reason not in (SCHEDULED, FAILED_SCHEDULING):
            out.problems.append(f"unexpected event {e.reason} for {e.name}: {e.message}")
            continue
        if e.name not in first:
            first[e.name] = len(order)
            first_reason[e.name] = e.reason
            order.append(e.name)
    names = [t.name for t in tasks]
    out.attempted = len(order)
    if order != names:
        out.in_arrival_order = False
        diverge = next(
            (i for i, (a, b) in enumerate(zip(order, names, strict=False)) if a != b),
            min(len(order), len(names)),
        )
        got = order[diverge] if diverge < len(order) else "nothing"
        want = names[diverge] if diverge < len(names) else "nothing"
        out.problems.append(
            f"first attempts not in arrival order: {len(order)} pods attempted of {len(names)}; "
            f"at position {diverge} {got} came where the trace has {want}"
        )
    late = []
    for r in results:
        out.attempts += r.attempts
        if r.attempts > 1:
            out.retried_pods += 1
        if r.status == SCHEDULED and (r.attempts != 1 or first_reason.get(r.name) != SCHEDULED):
            late.append(f"{r.name} ({r.attempts} attempts)")
    if late:
        out.bound_at_first_attempt = False
        out.problems.append(f"{len(late)} pods bound after a failed attempt: {', '.join(late[:5])}")
    return out


def profile_bytes(path: Path, percentage: int | None) -> bytes:
    """The profile, with percentageOfNodesToScore set when ``percentage`` is given."""
    raw = path.read_bytes()
    if percentage is None:
        return raw
    doc = yaml.safe_load(raw)
    doc["percentageOfNodesToScore"] = percentage
    for p in doc.get("profiles") or []:
        p.pop("percentageOfNodesToScore", None)
    return yaml.safe_dump(doc).encode()


def fixed_mix_profile(path: Path, tasks: Sequence[Task], form: str = "shared") -> str:
    """The profile at ``path`` with GPUFragmentation's mix fixed to the tasks' shapes, each
    weighted by its count: the pods' requests in ``form`` and their GPU models."""
    counts = Counter(
        (t.cpu_milli, t.memory_mib, tuple(sorted(gpu_requests(t, form).items())), t.gpu_spec) for t in tasks
    )
    mix = [
        {
            "requests": {"cpu": f"{cpu}m", "memory": f"{mem}Mi", **{k: str(v) for k, v in gpu}},
            **({"gpuModels": list(spec)} if spec else {}),
            "weight": n,
        }
        for (cpu, mem, gpu, spec), n in sorted(counts.items(), key=lambda kv: -kv[1])
    ]
    doc = yaml.safe_load(path.read_text())
    for profile in doc.get("profiles") or []:
        config = profile.setdefault("pluginConfig", [])
        config[:] = [c for c in config if c.get("name") != "GPUFragmentation"]
        config.append(
            {
                "name": "GPUFragmentation",
                "args": {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "GPUFragmentationArgs",
                    "workloadMix": mix,
                },
            }
        )
    return yaml.safe_dump(doc, sort_keys=False)


def make_trace(
    seed: int,
    *,
    nodes_csv: Path | None = None,
    tasks_csv: Path | None = None,
    variant: str | None = None,
    tasks: int | None = None,
) -> Trace:
    """The run's input: the paper's trace for ``seed`` (or the given CSVs), or a variant of the
    default task list (``openb_variants``) in an order tuned to 130 % like any trace without the
    paper's; ``tasks`` keeps the first so many arrivals."""
    trace = load(seed=seed, nodes_csv=nodes_csv, tasks_csv=tasks_csv)
    if variant:
        import openb_variants

        raw = read_tasks(tasks_csv or SHARED_OPENB / "openb_pod_list_default.csv")
        varied = openb_variants.make(variant, raw, trace.nodes, seed)
        trace = Trace(
            name=f"{trace.name}-{variant}", seed=seed, nodes=trace.nodes, tasks=tune(varied, trace.gpus, seed)
        )
    if tasks is not None:
        trace = Trace(name=trace.name, seed=seed, nodes=trace.nodes, tasks=trace.tasks[:tasks])
    return trace


def placed_of(results: Iterable[PodResult], tasks: Sequence[Task]) -> list[bool]:
    bound = {r.name for r in results if r.status == SCHEDULED and r.namespace == NAMESPACE}
    return [t.name in bound for t in tasks]


def _shown(path: Path) -> str:
    """A path as the output shows it: relative to the repository when inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_one(
    trace: Trace, profile: Path, seed: int, form: str = "shared", percentage: int | None = None
) -> dict[str, Any]:
    """Schedule the trace once, in this process; the JSON-able outcome."""
    t0 = time.perf_counter()
    registry = in_tree_registry()
    config = load_config(profile_bytes(profile, percentage), registry)
    cluster = build_cluster(trace.nodes, trace.tasks, form, registry)
    built = time.perf_counter() - t0
    _log(f"  built {len(cluster.objects):,} objects in {built:.1f} s; scheduling {len(trace.tasks):,} pods")
    run = simulate_cluster(cluster, config, registry, seed=seed)
    del cluster  # as simulate_async: the run lets go of the loader's records once they are fed
    result = asyncio.run(run)
    results = list(result.pods)
    checks = check_run(result.port, results, trace.tasks)
    placed = placed_of(results, trace.tasks)
    points = curve(trace.tasks, placed, trace.gpus)
    s = result.summary
    arrived = sum(t.gpu_request_milli for t in trace.tasks) / trace.gpus / 10
    return {
        "seed": seed,
        "profile": _shown(profile),
        "percentage": percentage,
        "form": form,
        "tasks": len(trace.tasks),
        "nodes": len(trace.nodes),
        "gpus": trace.gpus,
        "arrived_percent": round(arrived, 2),
        "scheduled": s.scheduled,
        "unschedulable": s.unschedulable,
        "at": {str(x): round(at(points, x), 4) for x in HEADLINE},
        "curve": {str(x): round(v, 4) for x, v in points.items()},
        "loop_seconds": round(s.wall_seconds, 2),
        "cpu_seconds": round(s.cpu_seconds, 2),
        "build_seconds": round(built, 2),
        "seconds": round(time.perf_counter() - t0, 2),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "checks": {
            "attempted": checks.attempted,
            "attempts": checks.attempts,
            "retried_pods": checks.retried_pods,
            "in_arrival_order": checks.in_arrival_order,
            "bound_at_first_attempt": checks.bound_at_first_attempt,
            "problems": checks.problems,
        },
        "warnings": result.warnings[:20],
    }


# --- several runs: table, JSON, plot ------------------------------------------------------------


def parse_seeds(text: str) -> list[int]:
    """``42-46``, ``42,44`` or both (``42-44,50``)."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d+)\s*-\s*(\d+)", part)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if hi < lo:
                raise ValueError(f"seed range {part!r} runs backwards")
            out.extend(range(lo, hi + 1))
        elif part.isdigit():
            out.append(int(part))
        else:
            raise ValueError(f"not a seed or a range of seeds: {part!r}")
    if not out:
        raise ValueError("no seeds")
    return list(dict.fromkeys(out))


def parse_config(text: str) -> tuple[str, Path]:
    """``LABEL=PATH``, a profile name (``koord-scheduler``, ``chart``) or a path: (label, path);
    a label defaults to the file's stem."""
    label, sep, rest = text.partition("=")
    where = rest if sep else text
    path = PROFILES.get(where, Path(where))
    if not path.is_file():
        raise ValueError(f"profile {where!r}: no such file (names: {', '.join(PROFILES)})")
    return (label if sep else path.stem), path


def seeds_text(seeds: Sequence[int]) -> str:
    seeds = sorted(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(str(s) for s in seeds)


def mean_curve(curves: Sequence[Mapping[int, float]]) -> dict[int, float]:
    """The mean over the curves at each arrival % every one of them reached."""
    if not curves:
        return {}
    top = min(max(c) for c in curves)
    return {x: statistics.fmean(at(c, x) for c in curves) for x in ARRIVALS if x <= top}


def _keys_int(points: Mapping[str, float]) -> dict[int, float]:
    return {int(k): v for k, v in points.items()}


@dataclass
class Series:
    """One line of the table and the plot: a policy over some seeds."""

    label: str
    kind: str  # "ours" | "reference" | "paper"
    curves: dict[int, dict[int, float]]
    seconds: dict[int, float] = field(default_factory=dict)

    def value(self, x: int) -> float:
        return statistics.fmean(at(c, x) for c in self.curves.values())

    def mean_curve(self) -> dict[int, float]:
        return mean_curve(list(self.curves.values()))


def paper_series(seeds: Sequence[int]) -> tuple[list[Series], list[Series]]:
    """The paper's six policies over all their published seeds, and over ``seeds`` (those present)."""
    paper = read_paper(PAPER_CSV)
    every, run = [], []
    for policy in PAPER_POLICIES:
        by_seed = paper.get(policy, {})
        if not by_seed:
            continue
        label = PAPER_LABELS[policy]
        every.append(Series(f"{label} (paper)", "paper", dict(by_seed)))
        mine = {s: by_seed[s] for s in seeds if s in by_seed}
        if mine:
            run.append(Series(f"{label} (paper, seeds run)", "paper", mine))
    return every, run


def table(rows: Sequence[Series]) -> list[str]:
    a, b = HEADLINE
    out = [
        f"| policy | seeds | GPU alloc % at {a} % | at {b} % | per seed ({a} / {b}) | s per run |",
        "|---|---|---:|---:|---|---:|",
    ]
    for r in rows:
        per_seed = ""
        if r.kind != "paper" or len(r.curves) <= 5:
            per_seed = ", ".join(f"{s}: {at(c, a):.2f} / {at(c, b):.2f}" for s, c in sorted(r.curves.items()))
        secs = statistics.fmean(r.seconds.values()) if r.seconds else math.nan
        seconds = "" if math.isnan(secs) else f"{secs:.1f}"
        out.append(
            f"| {r.label} | {seeds_text(list(r.curves))} | {r.value(a):.2f} | {r.value(b):.2f} "
            f"| {per_seed} | {seconds} |"
        )
    return out


_OURS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")
_PAPER = {
    "Random": "#7f7f7f",
    "DotProd": "#bcbd22",
    "GpuClustering": "#17becf",
    "GpuPacking": "#ff7f0e",
    "BestFit": "#8c6d31",
    "FGD": "#393b79",
}


def _style(s: Series, k: int) -> tuple[str, str, float]:
    """(colour, dasharray, width)."""
    if s.kind == "paper":
        name = s.label.split(" (")[0]
        return _PAPER.get(name, "#999"), "6,3", 1.4
    if s.kind == "reference":
        return "#000000", "2,3", 1.8
    return _OURS[k % len(_OURS)], "", 2.2


def _panel(
    series: Sequence[tuple[Series, dict[int, float], str, str, float]],
    box: tuple[float, float, float, float],
    xr: tuple[int, int, int],
    yr: tuple[float, float, float],
    title: str,
) -> list[str]:
    left, top, w, h = box
    x0, x1, xstep = xr
    y0, y1, ystep = yr

    def x(v: float) -> float:
        return left + (v - x0) / (x1 - x0) * w

    def y(v: float) -> float:
        return top + h - (v - y0) / (y1 - y0) * h

    out = [f'<text x="{left}" y="{top - 10}" font-size="12">{title}</text>']
    v = y0
    while v <= y1 + 1e-9:
        out.append(f'<line x1="{left}" x2="{left + w}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        v += ystep
    for xv in range(x0, x1 + 1, xstep):
        out.append(f'<line x1="{x(xv):.1f}" x2="{x(xv):.1f}" y1="{top}" y2="{top + h}" stroke="#f0f0f0"/>')
        out.append(f'<text x="{x(xv):.1f}" y="{top + h + 16}" text-anchor="middle">{xv}</text>')
    out.extend(
        f'<line x1="{x(mark):.1f}" x2="{x(mark):.1f}" y1="{top}" y2="{top + h}" '
        f'stroke="#bbb" stroke-dasharray="2,2"/>'
        for mark in HEADLINE
        if x0 <= mark <= x1
    )
    out.append(f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="none" stroke="#888"/>')
    out.append(f'<svg x="{left}" y="{top}" width="{w}" height="{h}" overflow="hidden">')
    for _, points, colour, dash, width in series:
        pts = [(xv, v) for xv, v in sorted(points.items()) if x0 <= xv <= x1]
        if len(pts) < 2:
            continue
        path = " ".join(f"{x(xv) - left:.1f},{y(v) - top:.1f}" for xv, v in pts)
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(
            f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="{width}"{dashed}/>'
        )
    out.append("</svg>")
    out.append(
        f'<text x="{left + w / 2}" y="{top + h + 34}" text-anchor="middle">'
        "arrived GPU request (% of GPUs)</text>"
    )
    out.append(
        f'<text x="{left - 40}" y="{top + h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 {left - 40} {top + h / 2})">GPU allocation (%)</text>'
    )
    return out


def svg(series: Sequence[Series], title: str, width: int = 1100, height: int = 470) -> str:
    """Allocation % against arrival % (0-130), the mean over seeds of each series; left the whole
    range, right a zoom on the end, where the policies part."""
    lines = []
    ours = 0
    for s in series:
        colour, dash, w = _style(s, ours)
        ours += s.kind == "ours"
        lines.append((s, s.mean_curve(), colour, dash, w))
    late = [v for _, pts, *_ in lines for xv, v in pts.items() if xv >= 80]
    lo = math.floor(min(late, default=60.0) / 5) * 5 - 5
    hi = min(100.0, math.ceil(max(late, default=100.0) / 5) * 5 + 5)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="60" y="20" font-size="13">{html.escape(title, quote=False)}</text>',
    ]
    out += _panel(lines, (60, 55, 340, 340), (0, 130, 10), (0, 100, 10), "whole run")
    out += _panel(
        lines, (470, 55, 300, 340), (80, 130, 10), (lo, hi, 5 if hi - lo > 20 else 2), "from 80 % arrival"
    )
    lx, ly = 790, 60
    for k, (s, _, colour, dash, w) in enumerate(lines):
        yy = ly + 19 * k
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(
            f'<line x1="{lx}" x2="{lx + 26}" y1="{yy}" y2="{yy}" stroke="{colour}" '
            f'stroke-width="{w}"{dashed}/>'
        )
        label = f"{s.label} ({seeds_text(list(s.curves))})"
        out.append(f'<text x="{lx + 32}" y="{yy + 4}">{html.escape(label, quote=False)}</text>')
    notes = ["mean over seeds"]
    if any(s.kind == "paper" for s in series):
        notes.append("dashed: the FGD paper's published curves (Weng et al., ATC '23)")
    if any(s.kind == "reference" for s in series):
        notes.append("dotted: the stand-alone FGD replay (bench/openb_reference.py)")
    notes.append(f"marks at {HEADLINE[0]} % and {HEADLINE[1]} % arrival")
    out.append(
        f'<text x="60" y="{height - 12}" fill="#666">{html.escape("; ".join(notes), quote=False)}</text>'
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


# --- the command line ----------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--seeds", default=",".join(str(s) for s in DEFAULT_SEEDS), help="e.g. 42-46 or 42,44 (default 42-46)"
    )
    ap.add_argument(
        "--config",
        action="append",
        help="profile: a path, LABEL=PATH, or koord-scheduler / chart; repeat for several "
        "(default: the bundled config/koord-scheduler.yaml)",
    )
    ap.add_argument(
        "--percentage",
        type=int,
        help="set percentageOfNodesToScore (default: the profile's; where it sets none, "
        "kube-scheduler's adaptive rule)",
    )
    ap.add_argument(
        "--variant", help="a variant of the default trace (bench/openb_variants.py), e.g. gpushare40"
    )
    ap.add_argument(
        "--reference", action="store_true", help="also replay the reference FGD (always with --variant)"
    )
    ap.add_argument("--nodes-csv", type=Path, help="a node list in the openb format")
    ap.add_argument("--tasks-csv", type=Path, help="a task list in the openb format")
    ap.add_argument(
        "--gpu-form", choices=FORMS, default="shared", help="how pods ask for GPUs (default shared)"
    )
    ap.add_argument("--tasks", type=int, help="only the first N arrivals (a quick test)")
    ap.add_argument("--json", type=Path, help="write per-seed and mean values and the curves here")
    ap.add_argument("--svg", type=Path, help="plot allocation against arrival here")
    ap.add_argument("--write-yaml", type=Path, help="write the manifests of the (first) seed here and exit")
    ap.add_argument(
        "--write-fixed-mix",
        type=Path,
        help="write the (first) profile with GPUFragmentation's mix fixed to the (first) seed's tasks; exit",
    )
    ap.add_argument(
        "--in-process", action="store_true", help="run the seeds in this process, one after another"
    )
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    return ap


def _trace_args(args: argparse.Namespace) -> list[str]:
    out = ["--gpu-form", args.gpu_form]
    for flag in ("variant", "nodes_csv", "tasks_csv", "tasks", "percentage"):
        value = getattr(args, flag)
        if value is not None:
            out += [f"--{flag.replace('_', '-')}", str(value)]
    return out


def _trace(args: argparse.Namespace, seed: int) -> Trace:
    return make_trace(
        seed, nodes_csv=args.nodes_csv, tasks_csv=args.tasks_csv, variant=args.variant, tasks=args.tasks
    )


def run_child(args: argparse.Namespace, path: Path, seed: int) -> dict[str, Any]:
    """``openb.py --one`` in its own process; its JSON line (its stderr is ours)."""
    cmd = [sys.executable, __file__, "--one", "--seeds", str(seed), "--config", str(path), *_trace_args(args)]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, env=os.environ)
    parsed: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return parsed


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        seeds = parse_seeds(args.seeds)
        configs = [parse_config(c) for c in (args.config or ["koord-scheduler"])]
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    labels = [label for label, _ in configs]
    if len(set(labels)) != len(labels):
        raise SystemExit(f"two profiles share a label ({', '.join(labels)}): name them LABEL=PATH")
    if args.one:
        trace = _trace(args, seeds[0])
        print(json.dumps(run_one(trace, configs[0][1], seeds[0], args.gpu_form, args.percentage)))
        return 0
    if args.write_fixed_mix:
        trace = _trace(args, seeds[0])
        args.write_fixed_mix.write_text(fixed_mix_profile(configs[0][1], trace.tasks, args.gpu_form))
        _log(
            f"wrote {args.write_fixed_mix}: {configs[0][1]} with the mix of {len(trace.tasks):,} tasks fixed"
        )
        return 0
    if args.write_yaml:
        trace = _trace(args, seeds[0])
        n = write_yaml(args.write_yaml, trace.nodes, trace.tasks, args.gpu_form)
        _log(
            f"wrote {n:,} objects to {args.write_yaml}; run them with: "
            f"koordsched simulate --seed {seeds[0]} {args.write_yaml}"
        )
        return 0
    default_trace = not (args.variant or args.nodes_csv or args.tasks_csv)
    suffix = f", pct {args.percentage}" if args.percentage is not None else ""
    runs: list[dict[str, Any]] = []
    ours: list[Series] = []
    total = len(configs) * len(seeds)
    for label, path in configs:
        series = Series(f"{label}{suffix} (koordsched)", "ours", {})
        for seed in seeds:
            _log(f"[{len(runs) + 1}/{total}] {label} seed {seed}")
            if args.in_process:
                out = run_one(_trace(args, seed), path, seed, args.gpu_form, args.percentage)
            else:
                out = run_child(args, path, seed)
            out["config"] = label
            runs.append(out)
            series.curves[seed] = _keys_int(out["curve"])
            series.seconds[seed] = out["seconds"]
            verdict = "checks ok" if not out["checks"]["problems"] else "CHECKS FAILED"
            _log(
                f"  {label} seed {seed}: {out['at'][str(HEADLINE[0])]:.2f} % at {HEADLINE[0]}, "
                f"{out['at'][str(HEADLINE[1])]:.2f} % at {HEADLINE[1]}; {out['seconds']:.0f} s "
                f"(loop {out['loop_seconds']:.0f} s), peak {out['peak_rss_mib']:.0f} MiB; {verdict}"
            )
        ours.append(series)
    reference: list[Series] = []
    if args.variant or args.reference:
        import openb_reference

        ref = Series("FGD (reference replay)", "reference", {})
        for seed in seeds:
            trace = _trace(args, seed)
            t0 = time.perf_counter()
            placed = openb_reference.replay(trace, "fgd", seed)
            ref.seconds[seed] = time.perf_counter() - t0
            ref.curves[seed] = curve(trace.tasks, placed, trace.gpus)
        reference.append(ref)
    every: list[Series] = []
    paper_run: list[Series] = []
    if default_trace:
        every, paper_run = paper_series(seeds)
    if set(seeds) == set(range(42, 52)):
        paper_run = []  # the same rows as the published means
    trace_name = "default" if default_trace else (args.variant or str(args.tasks_csv or "custom"))
    first = runs[0]
    title = (
        f"openb {trace_name} trace: {first['tasks']:,} tasks on {first['nodes']:,} nodes "
        f"({first['gpus']:,} GPUs), GPU requests as '{args.gpu_form}'"
    )
    rows = every + paper_run + ours + reference
    print(f"## {title}\n")
    for line in table(rows):
        print(line)
    print()
    reached = max(int(x) for x in first["curve"])
    if reached < HEADLINE[1]:
        print(
            f"Arrivals reach only {reached} % of the GPUs (--tasks): "
            "a value past that is the last one reached.\n"
        )
    problems = [(r["config"], r["seed"], p) for r in runs for p in r["checks"]["problems"]]
    retried = sum(r["checks"]["retried_pods"] for r in runs)
    if problems:
        for config, seed, p in problems:
            print(f"**PROBLEM** ({config}, seed {seed}): {p}")
            _log(f"PROBLEM ({config}, seed {seed}): {p}")
    else:
        print(
            f"Checks, all {len(runs)} runs: each pod's first attempt in arrival order, every bound pod "
            f"bound at its first attempt; {retried:,} unschedulable pods were retried by the queue, "
            "none of them bound."
        )
    if args.json:
        doc = {
            "trace": trace_name,
            "gpu_form": args.gpu_form,
            "percentage": args.percentage,
            "seeds": seeds,
            "runs": runs,
            "series": [
                {
                    "label": s.label,
                    "kind": s.kind,
                    "seeds": sorted(s.curves),
                    "at": {str(x): round(s.value(x), 4) for x in HEADLINE},
                    "per_seed": {
                        str(k): {str(x): round(at(c, x), 4) for x in HEADLINE} for k, c in s.curves.items()
                    },
                    "mean_curve": {str(x): round(v, 4) for x, v in s.mean_curve().items()},
                    "seconds": {str(k): round(v, 2) for k, v in s.seconds.items()},
                }
                for s in rows
            ],
        }
        if reference:
            for s, ref in zip(doc["series"][-len(reference) :], reference, strict=True):
                s["curves"] = {
                    str(k): {str(x): round(v, 4) for x, v in c.items()} for k, c in ref.curves.items()
                }
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
        _log(f"wrote {args.json}")
    if args.svg:
        args.svg.write_text(svg(every + ours + reference, title))
        _log(f"wrote {args.svg}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
