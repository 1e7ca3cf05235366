"""Placement comparison: do two source trees schedule the same pods to the same nodes?

A refactor must not change a decision. This script runs ``koordsched simulate --output json``
(the path users run) from two trees on the same inputs and compares, pod by pod, the node,
the status, the FailedScheduling message, the annotations the scheduler wrote and the
number of attempts, plus the run's counts and GPU fragmentation summary. The ``--explain``
output (every filter verdict and score on each pod's best nodes) is compared for the
example files too.

Inputs: every file in ``examples/`` and the decision benchmark's basic and GPU shapes
(written once to YAML so both trees read identical objects), each with the bundled default
profile, Koordinator's chart profile and the two benchmark profiles.

    .venv/bin/python bench/placements.py compare --base ../old-tree           # old tree vs this one
    .venv/bin/python bench/placements.py compare --base ../old-tree --quick   # examples only

Exit status 0 when everything is identical, 1 with the first differences printed.
A tree is used through ``PYTHONPATH``, so both run with this environment's packages.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import yaml

ROOT = Path(__file__).resolve().parents[1]
PROFILES = {
    "default": None,
    "chart": ROOT / "examples" / "profiles" / "koordinator-chart.yaml",
    "standard": ROOT / "bench" / "profiles" / "standard.yaml",
    "numa-deviceshare": ROOT / "bench" / "profiles" / "numa-deviceshare.yaml",
}
#: Summary fields that measure the machine, not the decisions.
_TIMING = {"wallSeconds", "podsPerSecond", "cpuSeconds"}


def write_shapes(out: Path, basic_nodes: int, basic_pods: int, gpu_nodes: int, gpu_pods: int) -> list[Path]:
    """The benchmark's basic and GPU clusters as manifest files."""
    sys.path.insert(0, str(ROOT / "bench"))
    from decision import basic_cluster
    from gpu_cluster import gpu_cluster

    paths = []
    for name, cluster in (
        ("basic", basic_cluster(basic_nodes, basic_pods)),
        ("gpu", gpu_cluster(gpu_nodes, gpu_pods)),
    ):
        docs = []
        for o in cluster.objects:
            body = msgspec.to_builtins(o.obj)
            body["kind"] = o.kind
            docs.append(body)
        path = out / f"{name}-shape.yaml"
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        paths.append(path)
    return paths


def _normalise(report: dict[str, Any]) -> dict[str, Any]:
    summary = {k: v for k, v in report.get("summary", {}).items() if k not in _TIMING}
    pods = {f"{p['namespace']}/{p['name']}": p for p in report.get("pods", [])}
    return {"summary": summary, "pods": pods, "nodes": report.get("nodes")}


def run_tree(tree: Path, files: list[Path], explain: bool) -> dict[str, Any]:
    """Every (file, profile) result of one tree, keyed ``file|profile[|explain]``."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out: dict[str, Any] = {}
    for f in files:
        for pname, profile in PROFILES.items():
            for exp in (False, True) if explain and "shape" not in f.name else (False,):
                cmd = [sys.executable, "-m", "koordsched", "simulate", str(f), "--output", "json"]
                cmd += ["--config", str(profile)] if profile else []
                cmd += ["--explain"] if exp else []
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tree)
                key = f"{f.name}|{pname}" + ("|explain" if exp else "")
                if proc.returncode != 0:
                    out[key] = {"exit": proc.returncode, "stderr": proc.stderr.strip().splitlines()[-1:]}
                else:
                    out[key] = _normalise(json.loads(proc.stdout))
    return out


def diff(a: dict[str, Any], b: dict[str, Any], limit: int = 20) -> list[str]:
    lines: list[str] = []
    for key in sorted(set(a) | set(b)):
        ra, rb = a.get(key), b.get(key)
        if ra == rb:
            continue
        if ra is None or rb is None or "exit" in ra or "exit" in rb:
            shown = [r if r is None or "exit" in r else "ok" for r in (ra, rb)]
            lines.append(f"{key}: {shown[0]} != {shown[1]}")
            continue
        if ra["summary"] != rb["summary"]:
            lines.append(f"{key}: summary {ra['summary']} != {rb['summary']}")
        for pod in sorted(set(ra["pods"]) | set(rb["pods"])):
            pa, pb = ra["pods"].get(pod), rb["pods"].get(pod)
            if pa != pb:
                lines.append(f"{key}: {pod}: {pa} != {pb}")
                if len(lines) >= limit:
                    return lines
        if ra["nodes"] != rb["nodes"]:
            lines.append(f"{key}: per-node utilisation differs")
    return lines[:limit]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare", help="run both trees and compare")
    c.add_argument("--base", required=True, type=Path, help="the other source tree (e.g. a git worktree)")
    c.add_argument("--tree", type=Path, default=ROOT, help="this tree (default: the one holding this script)")
    c.add_argument("--quick", action="store_true", help="examples only, no benchmark shapes")
    c.add_argument("--basic", default="500,5000", help="basic shape: nodes,pods")
    c.add_argument("--gpu", default="100,800", help="GPU shape: nodes,pods")
    args = ap.parse_args()
    files = sorted((ROOT / "examples").glob("*.yaml"))
    with tempfile.TemporaryDirectory() as tmp:
        if not args.quick:
            bn, bp = (int(x) for x in args.basic.split(","))
            gn, gp = (int(x) for x in args.gpu.split(","))
            files += write_shapes(Path(tmp), bn, bp, gn, gp)
        base = run_tree(args.base.resolve(), files, explain=True)
        new = run_tree(args.tree.resolve(), files, explain=True)
    problems = diff(base, new)
    runs = len(base)
    pods = sum(len(r.get("pods", {})) for r in base.values())
    failed = [k for k, r in base.items() if "exit" in r]
    if failed:
        print(f"note: {len(failed)} runs exit non-zero in both trees: {', '.join(failed)}")
    if problems:
        print(f"DIFFERENT ({runs} runs, {pods} pod results):")
        for line in problems:
            print("  " + line)
        return 1
    print(
        f"identical: {runs} runs, {pods} pod results (node, status, message, annotations, attempts, summary)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
