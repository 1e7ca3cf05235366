"""Python work per pod, counted rather than timed: bytecode instructions the simulator's loop executes.

On a shared, loaded machine CPU time per pod swings by tens of percent between runs of the same
tree, so a few percent cannot be seen. The number of bytecode instructions executed while the
pods are scheduled (a numba kernel or a C call counts as one) is the same on every run: it shows
what a change added or removed from the Python side of the hot path, plugin by plugin. It says
nothing about time spent inside kernels or C calls, so read it beside ``decision.py``'s figures.

    .venv/bin/python bench/opcount.py --nodes 500 --pods 1000 --config standard
    .venv/bin/python bench/opcount.py --nodes 500 --pods 1000 --by module   # where they go
    PYTHONPATH=../old-tree .venv/bin/python bench/opcount.py ...            # another tree

Tracing costs about a hundred times the run, so keep the cluster small (per-pod work hardly
depends on the node count here: the kernels do the per-node part).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from decision import profile_bytes, share_pod_parts
from shapes import SHAPES, build, profile_path

from koordsched.backends.sim.runner import simulate_cluster
from koordsched.config.load import load_config
from koordsched.plugins.registry import in_tree_registry


def _module(filename: str) -> str:
    if "koordsched/" not in filename:
        return "<stdlib and packages>"
    path = filename.split("koordsched/")[-1]
    return "/".join(path.split("/")[:2]) if path.startswith("plugins/") else path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="basic")
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--config", help="a profile name from bench/shapes.py or a path (default: bundled)")
    ap.add_argument(
        "--no-shared-parts",
        action="store_true",
        help="each pod its own spec, labels and annotations (simulate and run share them)",
    )
    ap.add_argument("--by", choices=("module",), help="also count per module of koordsched")
    args = ap.parse_args()
    shape = SHAPES[args.shape]
    registry = in_tree_registry()
    path = profile_path(args.config, shape)
    config = load_config(profile_bytes(100, str(path) if path else None), registry)
    cluster = build(shape, args.nodes, args.pods)
    if not args.no_shared_parts:
        share_pod_parts(cluster)
    registry.warm_up()
    per: Counter[str] = Counter()
    total = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal total
        frame.f_trace_opcodes = True
        if event == "opcode":
            total += 1
            if args.by:
                per[_module(frame.f_code.co_filename)] += 1
        return tracer

    sys.settrace(tracer)
    try:
        result = asyncio.run(simulate_cluster(cluster, config, registry))
    finally:
        sys.settrace(None)
    scheduled = result.summary.scheduled
    out: dict[str, Any] = {
        "shape": shape.name,
        "profile": Path(path).name if path else "koord-scheduler.yaml",
        "nodes": args.nodes,
        "pods": args.pods,
        "scheduled": scheduled,
        "opcodes_per_pod": round(total / max(1, scheduled)),
    }
    if args.by:
        out["by_module"] = {k: round(v / max(1, scheduled)) for k, v in per.most_common()}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
