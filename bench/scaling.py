"""Per-pod decision cost against the node count: the curve, as data (bench/scaling.json) and a plot
(bench/scaling.svg).

Each point is one ``bench/decision.py --one`` process (the simulator's loop, the bundled profile,
``percentageOfNodesToScore: 100``, so every node is filtered and scored): the same pods on
clusters of 500 to 15,000 nodes. The figure is CPU time per scheduled pod (steadier than wall
time on a shared machine). The target is that it grows at most 1.5x from 500 to 15,000 nodes.
Rounds alternate the order of the sizes, and each point is the median of its rounds.

    .venv/bin/python bench/scaling.py                                  # basic and gpu, 2 rounds
    .venv/bin/python bench/scaling.py --shapes basic --rounds 3
    .venv/bin/python bench/scaling.py --plot-only                      # redraw from scaling.json
    .venv/bin/python bench/scaling.py --percentage 0 --data bench/scaling-adaptive.json \
        --plot bench/scaling-adaptive.svg                              # the adaptive percentage

The plot is SVG written here (no plotting library is a dependency).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
DATA = BENCH / "scaling.json"
PLOT = BENCH / "scaling.svg"
NODES = (500, 1000, 2000, 5000, 10000, 15000)
#: Pods per run, per shape: the same at every size, and all of them fit the smallest cluster (an
#: unschedulable pod runs DefaultPreemption, which would weigh on the small end alone). At 500
#: nodes the GPU shape places all of 1,000 pods, but not all of 1,500.
PODS = {"basic": 5000, "gpu": 1000}
TARGET = 1.5


def measure(shape: str, nodes: int, pods: int, config: str | None, percentage: int) -> dict[str, Any]:
    cmd = [sys.executable, str(BENCH / "decision.py"), "--one", str(nodes), "--shape", shape]
    cmd += ["--pods", str(pods), "--percentage", str(percentage)]
    cmd += ["--config", config] if config else []
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    row: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return row


def run(
    shapes: list[str], nodes: list[int], rounds: int, config: str | None, percentage: int
) -> dict[str, Any]:
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {s: {n: [] for n in nodes} for s in shapes}
    for r in range(rounds):
        order = nodes if r % 2 == 0 else list(reversed(nodes))
        for shape in shapes:
            for n in order:
                row = measure(shape, n, PODS.get(shape, 5000), config, percentage)
                runs[shape][n].append(row)
                print(json.dumps(row), flush=True)
    series = {}
    for shape, by_nodes in runs.items():
        points = []
        for n, rows in by_nodes.items():
            points.append(
                {
                    "nodes": n,
                    "pods": rows[0]["pods"],
                    "scheduled": [x["scheduled"] for x in rows],
                    "cpu_us_per_pod": round(statistics.median(x["cpu_us_per_pod"] for x in rows), 1),
                    "cpu_us_per_pod_runs": [x["cpu_us_per_pod"] for x in rows],
                    "peak_rss_mib": max(x["peak_rss_mib"] for x in rows),
                }
            )
        base = points[0]["cpu_us_per_pod"]
        for p in points:
            p["vs_smallest"] = round(p["cpu_us_per_pod"] / base, 2)
        series[shape] = points
    return {
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "profile": config or "config/koord-scheduler.yaml",
        "percentageOfNodesToScore": percentage,
        "rounds": rounds,
        "target_growth": TARGET,
        "series": series,
    }


_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def svg(data: dict[str, Any], width: int = 720, height: int = 420) -> str:
    """Per-pod CPU time (µs) against nodes (log scale), one line per shape, the target band dashed."""
    left, right, top, bottom = 70, 150, 40, 60
    pw, ph = width - left - right, height - top - bottom
    series: dict[str, list[dict[str, Any]]] = data["series"]
    xs = sorted({p["nodes"] for pts in series.values() for p in pts})
    ymax = max(p["cpu_us_per_pod"] for pts in series.values() for p in pts)
    ymax = max(ymax, max(pts[0]["cpu_us_per_pod"] * TARGET for pts in series.values()))
    step = 10 ** math.floor(math.log10(ymax / 4))
    step *= 2 if ymax / step > 10 else 1
    ytop = math.ceil(ymax * 1.05 / step) * step
    lx0, lx1 = math.log10(xs[0]), math.log10(xs[-1])

    def x(n: float) -> float:
        return left + (math.log10(n) - lx0) / (lx1 - lx0) * pw

    def y(v: float) -> float:
        return top + ph - v / ytop * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="22" font-size="13">Per-pod decision cost against cluster size '
        f"({data['profile']}, percentageOfNodesToScore {data.get('percentageOfNodesToScore', 100)}, "
        f"CPU µs per pod, median of {data['rounds']})</text>",
    ]
    v = 0.0
    while v <= ytop + 1e-9:
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{left - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        v += step
    for n in xs:
        out.append(f'<line x1="{x(n):.1f}" x2="{x(n):.1f}" y1="{top}" y2="{top + ph}" stroke="#f0f0f0"/>')
        out.append(f'<text x="{x(n):.1f}" y="{top + ph + 18}" text-anchor="middle">{n:,}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 18}" text-anchor="middle">nodes (log scale)</text>')
    out.append(
        f'<text x="18" y="{top + ph / 2}" text-anchor="middle" '
        f'transform="rotate(-90 18 {top + ph / 2})">CPU µs per scheduled pod</text>'
    )
    for k, (shape, pts) in enumerate(series.items()):
        colour = _COLOURS[k % len(_COLOURS)]
        limit = pts[0]["cpu_us_per_pod"] * TARGET
        out.append(
            f'<line x1="{left}" x2="{left + pw}" y1="{y(limit):.1f}" y2="{y(limit):.1f}" '
            f'stroke="{colour}" stroke-dasharray="5,4" stroke-opacity="0.6"/>'
        )
        path = " ".join(f"{x(p['nodes']):.1f},{y(p['cpu_us_per_pod']):.1f}" for p in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for p in pts:
            cx, cy = x(p["nodes"]), y(p["cpu_us_per_pod"])
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill="{colour}"/>')
            label = f"x{p['vs_smallest']}"
            out.append(
                f'<text x="{cx:.1f}" y="{cy - 8:.1f}" text-anchor="middle" fill="{colour}">{label}</text>'
            )
        ly, lx = top + 16 + 36 * k, left + pw + 12
        out.append(f'<line x1="{lx}" x2="{lx + 24}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{lx + 30}" y="{ly + 4}">{shape} ({pts[0]["pods"]:,} pods)</text>')
        dashed = f"dashed: x{TARGET} of {pts[0]['nodes']:,}"
        out.append(f'<text x="{lx + 30}" y="{ly + 19}" fill="#666">{dashed}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="basic,gpu", help="comma-separated shapes (bench/shapes.py)")
    ap.add_argument("--nodes", default=",".join(str(n) for n in NODES))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--config", help="a profile name or path (default: the bundled profile)")
    ap.add_argument(
        "--percentage",
        type=int,
        default=100,
        help="percentageOfNodesToScore (0: kube-scheduler's adaptive rule)",
    )
    ap.add_argument("--plot-only", action="store_true", help=f"redraw {PLOT.name} from {DATA.name}")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--plot", type=Path, default=PLOT)
    args = ap.parse_args()
    if args.plot_only:
        data = json.loads(args.data.read_text())
    else:
        nodes = [int(n) for n in args.nodes.split(",")]
        data = run(args.shapes.split(","), nodes, args.rounds, args.config, args.percentage)
        args.data.write_text(json.dumps(data, indent=1) + "\n")
    args.plot.write_text(svg(data))
    for shape, pts in data["series"].items():
        curve = ", ".join(f"{p['nodes']}: {p['cpu_us_per_pod']} µs (x{p['vs_smallest']})" for p in pts)
        print(f"{shape}: {curve}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
