"""Decision throughput through the sim backend, shape by shape (bench/shapes.py holds the shapes).

Every shape runs the same way: the cluster is built in memory and scheduled through the
simulator's loop (queue, framework, plugins, kernels, assume, bind confirmation) with
``percentageOfNodesToScore: 100``, so every feasible node is filtered and scored; building the
objects and warming the kernels are not timed. The profile is the bundled
config/koord-scheduler.yaml unless ``--config`` names others (``standard``,
``numa-deviceshare``, or a path). Each (shape, profile, node count) runs in its own process so
its peak memory is its own; the last lines compare per-pod CPU cost within the run.

    .venv/bin/python bench/decision.py --list                     # the shapes
    .venv/bin/python bench/decision.py                            # basic, 500 and 5,000 nodes
    .venv/bin/python bench/decision.py --shape gpu --nodes 5000 --split   # also time the kernels apart
    .venv/bin/python bench/decision.py --shape basic,gpu --nodes 5000 --config standard,koord-scheduler
    .venv/bin/python bench/decision.py --shape spread,antiaffinity,preemption,pv,gang,quota-tree --nodes 5000
    .venv/bin/python bench/decision.py --one 5000 --shape gpu --cprofile gpu.prof   # one run, profiled

The flags from before the registry still work: ``--gpu``, ``--distinct``, ``--preemption``,
``--reservation``, ``--spread NAME``, ``--affinity NAME``, ``--volumes pv``, ``--gang NAME``,
``--quota NAME`` each add that shape; ``--node-metrics`` adds a NodeMetric per node to any shape.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from shapes import PROFILES, SHAPES, Shape, build, profile_path
from shapes import basic_cluster as basic_cluster  # bench/placements.py imports it from here

from koordsched.api.core import Pod
from koordsched.api.sharing import PodSharing
from koordsched.backends.sim.loader import Cluster
from koordsched.backends.sim.runner import simulate_cluster
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import load_config
from koordsched.plugins.registry import in_tree_registry


def profile_bytes(percentage: int, path: str | None = None) -> bytes:
    raw = yaml.safe_load((Path(path) if path else default_profile_path()).read_text())
    raw["percentageOfNodesToScore"] = percentage
    return yaml.safe_dump(raw).encode()


class KernelTimer:
    """Wraps every numba kernel the plugins call, to split time between Python and kernels."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def install(self) -> None:
        from numba.core.registry import CPUDispatcher

        for mod in list(sys.modules.values()):
            if mod is None or not getattr(mod, "__name__", "").startswith("koordsched."):
                continue
            for attr, value in list(vars(mod).items()):
                if isinstance(value, CPUDispatcher):
                    setattr(mod, attr, self._wrap(value))

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args)
            finally:
                self.seconds += time.perf_counter() - t0
                self.calls += 1

        return timed


#: The flags decision.py took before the shape registry: flag -> shape (a flag with a value names
#: the shape itself). They still work, and map onto ``--shape``.
_LEGACY_SWITCHES = {s: s for s in ("gpu", "distinct", "preemption", "reservation")}
_LEGACY_CHOICES = {
    "spread": ("spread", "preferred-spread", "default-spread"),
    "affinity": ("antiaffinity", "preferred-affinity"),
    "volumes": ("pv",),
    "gang": ("gang", "gang-annotations"),
    "quota": ("quota-tree", "quota-capped"),
}


def run_one(
    shape: Shape,
    nodes: int,
    pods: int,
    percentage: int = 100,
    split: bool = False,
    profile: str | None = None,
    node_metrics: bool = False,
    cprofile: str | None = None,
    shared_parts: bool = False,
) -> dict[str, Any]:
    """One shape at one node count, in this process: build, warm up, run the loop, check."""
    registry = in_tree_registry()
    path = profile_path(profile, shape)
    config = load_config(profile_bytes(percentage, str(path) if path else None), registry)
    cluster = build(shape, nodes, pods, node_metrics)
    if shared_parts:
        share_pod_parts(cluster)
    registry.warm_up()
    timer = KernelTimer()
    if split:
        timer.install()
    profiler = cProfile.Profile() if cprofile else None
    if profiler is not None:
        profiler.enable()
    result = asyncio.run(simulate_cluster(cluster, config, registry))
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(cprofile)
    s = result.summary
    out: dict[str, Any] = {
        "shape": shape.name,
        "profile": path.name if path else "koord-scheduler.yaml",
        "node_metrics": node_metrics or shape.node_metrics,
        "nodes": nodes,
        "pods": pods,
        "scheduled": s.scheduled,
        "seconds": round(s.wall_seconds, 3),
        "pods_per_second": round(s.pods_per_second, 1),
        "cpu_seconds": round(s.cpu_seconds, 3),
        "pods_per_cpu_second": round(s.scheduled / s.cpu_seconds, 1) if s.cpu_seconds else 0.0,
        "us_per_pod": round(1e6 * s.wall_seconds / max(1, s.scheduled), 1),
        "cpu_us_per_pod": round(1e6 * s.cpu_seconds / max(1, s.scheduled), 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    if shape.checks is not None:
        out.update(shape.checks(cluster, result, nodes))
    if split:
        out["kernel_seconds"] = round(timer.seconds, 3)
        out["kernel_share"] = round(timer.seconds / s.wall_seconds, 3) if s.wall_seconds else 0.0
        out["kernel_calls"] = timer.calls
    return out


def share_pod_parts(cluster: Cluster) -> None:
    """Pods of a template holding one spec, labels and annotations, as ``simulate``'s loader and
    ``run``'s reflector decode them (``api.sharing``); the shapes build each pod on its own."""
    sharing = PodSharing()
    for loaded in cluster.objects:
        if isinstance(loaded.obj, Pod):
            loaded.obj = sharing.pod(loaded.obj)


def run_in_subprocess(args: list[str]) -> dict[str, Any]:
    """``decision.py --one ...`` in its own process (so its peak memory is its own); its JSON line."""
    cmd = [sys.executable, __file__, *args]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ)
    parsed: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return parsed


def _shape_names(args: argparse.Namespace) -> list[str]:
    names = [n for part in args.shape or [] for n in part.split(",") if n]
    names += [shape for flag, shape in _LEGACY_SWITCHES.items() if getattr(args, flag)]
    names += [getattr(args, flag) for flag in _LEGACY_CHOICES if getattr(args, flag)]
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        raise SystemExit(f"unknown shape(s) {', '.join(unknown)}; --list shows the shapes")
    return names or ["basic"]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--shape",
        action="append",
        help="shape(s) to run, comma-separated or repeated (default: basic); --list shows them",
    )
    ap.add_argument("--list", action="store_true", help="list the shapes and exit")
    ap.add_argument("--nodes", default="500,5000", help="comma-separated node counts")
    ap.add_argument("--pods", type=int, help="pending pods (default: the shape's own count)")
    ap.add_argument("--percentage", type=int, default=100, help="percentageOfNodesToScore")
    ap.add_argument("--split", action="store_true", help="time the numba kernels separately")
    ap.add_argument(
        "--config",
        help=f"profile(s), comma-separated: a path or one of {', '.join(PROFILES)} (default: bundled)",
    )
    ap.add_argument(
        "--node-metrics",
        action="store_true",
        help="also give every node a NodeMetric (bench/node_metrics.py), whatever the shape",
    )
    ap.add_argument(
        "--shared-parts",
        action="store_true",
        help="pods of a template share spec, labels and annotations, as simulate and run decode them",
    )
    ap.add_argument("--cprofile", help="write a cProfile of the scheduling loop to this file (--one only)")
    for flag in _LEGACY_SWITCHES:
        ap.add_argument(f"--{flag}", action="store_true", help=f"the same as --shape {flag}")
    for flag, choices in _LEGACY_CHOICES.items():
        ap.add_argument(f"--{flag}", choices=choices, help="the same as --shape with the value")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    return ap


def main() -> int:
    args = parser().parse_args()
    if args.list:
        for s in SHAPES.values():
            print(f"{s.name:20} {s.pods:>6} pods  {s.description}")
        return 0
    names = _shape_names(args)
    configs: list[str | None] = list(args.config.split(",")) if args.config else [None]
    if args.one is not None:
        if len(names) != 1 or len(configs) != 1:
            raise SystemExit("--one runs one shape with one profile")
        shape = SHAPES[names[0]]
        result = run_one(
            shape,
            args.one,
            args.pods or shape.pods,
            args.percentage,
            args.split,
            configs[0],
            args.node_metrics,
            args.cprofile,
            args.shared_parts,
        )
        print(json.dumps(result))
        return 0
    rows = []
    for cmd in commands(args, names, configs):
        rows.append(run_in_subprocess(cmd))
        print(json.dumps(rows[-1]), flush=True)
    for line in compare(rows):
        print(line)
    return 0


def commands(args: argparse.Namespace, names: list[str], configs: list[str | None]) -> list[list[str]]:
    """The ``--one`` runs, shape by shape, profile by profile, node count by node count."""
    out = []
    for name in names:
        for config in configs:
            for n in (int(x) for x in args.nodes.split(",")):
                cmd = ["--one", str(n), "--shape", name, "--percentage", str(args.percentage)]
                cmd += ["--pods", str(args.pods)] if args.pods else []
                cmd += ["--split"] if args.split else []
                cmd += ["--node-metrics"] if args.node_metrics else []
                cmd += ["--shared-parts"] if args.shared_parts else []
                cmd += ["--config", config] if config else []
                out.append(cmd)
    return out


def compare(rows: list[dict[str, Any]]) -> list[str]:
    """Per-pod CPU cost against the smallest cluster of the same shape and profile, and against the
    first shape and profile at the same node count (all from this one run)."""
    lines = []
    first_by_series: dict[tuple[str, str], dict[str, Any]] = {}
    first_by_nodes: dict[int, dict[str, Any]] = {}
    for r in rows:
        series = (r["shape"], r["profile"])
        base = first_by_series.setdefault(series, r)
        if base is not r and base["cpu_us_per_pod"]:
            lines.append(
                f"{r['shape']} / {r['profile']}: per-pod CPU at {r['nodes']} nodes vs {base['nodes']}: "
                f"x{r['cpu_us_per_pod'] / base['cpu_us_per_pod']:.2f}"
            )
        ref = first_by_nodes.setdefault(r["nodes"], r)
        if ref is not r and ref["cpu_us_per_pod"]:
            lines.append(
                f"{r['nodes']} nodes: {r['shape']} / {r['profile']} per-pod CPU vs {ref['shape']} / "
                f"{ref['profile']}: x{r['cpu_us_per_pod'] / ref['cpu_us_per_pod']:.2f}"
            )
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
