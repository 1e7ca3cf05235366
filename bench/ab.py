"""Two source trees' decision throughput, side by side in rounds (A/B).

These machines' speed drifts by tens of percent over minutes, so runs taken one after the
other cannot be compared. Each round runs ``bench/decision.py --one`` for tree A and tree B
**at the same time**, one per core, and the ratio within a round is the figure to read;
the report gives each tree's median ``pods_per_cpu_second`` and the per-round ratios B/A.

    .venv/bin/python bench/ab.py --a ../old-tree --rounds 5                          # basic shape
    .venv/bin/python bench/ab.py --a ../old-tree --rounds 5 --gpu --nodes 5000 --pods 10000
    .venv/bin/python bench/ab.py --a ../old-tree --b . --rounds 5 -- --config bench/profiles/standard.yaml
    .venv/bin/python bench/ab.py --a ../old-tree --rounds 3 --shape spread     # any shape both trees know
    .venv/bin/python bench/ab.py --a . --a-args "--config standard" --rounds 6    # one tree, two profiles

Both trees run with this environment's packages (through ``PYTHONPATH``), each with its own
``bench/decision.py`` (the same benchmark; only import paths may differ between trees).
Arguments after ``--`` go to ``decision.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _start(tree: Path, args: list[str]) -> subprocess.Popen[str]:
    script = tree / "bench" / "decision.py"
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{script.parent}")
    return subprocess.Popen(
        [sys.executable, str(script), *args], cwd=tree, env=env, stdout=subprocess.PIPE, text=True
    )


def _result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"decision.py failed with status {proc.returncode}")
    parsed: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return parsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, type=Path, help="tree A (the baseline)")
    ap.add_argument("--b", type=Path, default=ROOT, help="tree B (default: the one holding this script)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--gpu", action="store_true", help="the GPU shape (a flag both old and new trees know)")
    ap.add_argument("--shape", help="a shape from bench/shapes.py (both trees must have the shape registry)")
    ap.add_argument("--a-args", default="", help="decision.py arguments for A only (e.g. another --config)")
    ap.add_argument("--b-args", default="", help="decision.py arguments for B only")
    ap.add_argument("rest", nargs=argparse.REMAINDER, help="more decision.py arguments, after --")
    args = ap.parse_args()
    extra = [x for x in args.rest if x != "--"]
    one = ["--one", str(args.nodes), "--pods", str(args.pods), *(["--gpu"] if args.gpu else [])]
    one += [*(["--shape", args.shape] if args.shape else []), *extra]
    a_runs: list[float] = []
    b_runs: list[float] = []
    ratios: list[float] = []
    for r in range(args.rounds):
        # Alternate which side starts first, so neither always gets the head start.
        own = {"a": one + shlex.split(args.a_args), "b": one + shlex.split(args.b_args)}
        order = ("a", "b") if r % 2 == 0 else ("b", "a")
        trees = {"a": args.a, "b": args.b}
        procs = {side: _start(trees[side].resolve(), own[side]) for side in order}
        results = {side: _result(p) for side, p in procs.items()}
        a, b = results["a"], results["b"]
        if a["scheduled"] != b["scheduled"]:
            raise SystemExit(f"round {r}: the trees scheduled {a['scheduled']} and {b['scheduled']} pods")
        a_runs.append(a["pods_per_cpu_second"])
        b_runs.append(b["pods_per_cpu_second"])
        ratios.append(b["pods_per_cpu_second"] / a["pods_per_cpu_second"])
        print(
            f"round {r + 1}: A {a['pods_per_cpu_second']:,.0f}  B {b['pods_per_cpu_second']:,.0f} "
            f"pods/CPU-s  B/A {ratios[-1]:.3f}",
            flush=True,
        )
    print(
        json.dumps(
            {
                "shape": args.shape or ("gpu" if args.gpu else "basic"),
                "nodes": args.nodes,
                "pods": args.pods,
                "extra": extra,
                "a_args": args.a_args,
                "b_args": args.b_args,
                "a_cpu_us_per_pod": round(1e6 / statistics.median(a_runs), 1),
                "b_cpu_us_per_pod": round(1e6 / statistics.median(b_runs), 1),
                "a_median": round(statistics.median(a_runs), 1),
                "b_median": round(statistics.median(b_runs), 1),
                "ratio_median": round(statistics.median(ratios), 3),
                "ratio_min": round(min(ratios), 3),
                "ratio_max": round(max(ratios), 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
