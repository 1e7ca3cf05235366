"""The decision benchmark's shape registry (bench/shapes.py): every shape builds and runs through
the same path, on a small cluster, and its own checks report what the shape promises."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import decision  # noqa: E402
import shapes  # noqa: E402

_EXPECTED_CHECKS = {
    "spread": {"zone_counts"},
    "preferred-spread": {"zone_counts"},
    "default-spread": {"zone_counts"},
    "antiaffinity": {"nodes_used"},
    "preferred-affinity": {"nodes_used"},
    "preemption": {"preempted", "attempts"},
    "reservation": {"owners", "owners_allocated", "reservations_available"},
    "pv": {"misplaced"},
    "gang": {"gangs_complete", "gangs_incomplete"},
    "gang-annotations": {"gangs_complete", "gangs_incomplete"},
    "quota-tree": {"quotas", "unschedulable"},
    "quota-capped": {"quotas", "unschedulable"},
}


def _run(name: str, nodes: int = 12, pods: int = 60, **kw: Any) -> dict[str, Any]:
    return decision.run_one(shapes.SHAPES[name], nodes, pods, **kw)


@pytest.mark.parametrize("name", sorted(shapes.SHAPES))
def test_every_shape_runs_the_same_way(name: str) -> None:
    out = _run(name)
    assert out["shape"] == name and out["nodes"] == 12 and out["pods"] == 60
    assert 0 < out["scheduled"] <= 60
    assert out["node_metrics"] == name.endswith("node-metrics")
    assert _EXPECTED_CHECKS.get(name, set()) <= set(out)


def test_shape_checks_report_the_decisions() -> None:
    spread = _run("spread")["zone_counts"]
    assert sum(spread.values()) == 60 and max(spread.values()) - min(spread.values()) <= 1
    anti = _run("antiaffinity")
    assert anti["scheduled"] == anti["nodes_used"] == 12  # one pod per node, the rest pending
    gang = _run("gang")
    assert gang["gangs_complete"] == 6 and gang["gangs_incomplete"] == 0
    assert _run("preemption")["preempted"] > 0


def test_profiles_by_name_and_path() -> None:
    basic = shapes.SHAPES["basic"]
    assert shapes.profile_path(None, basic) is None  # the bundled profile
    assert shapes.profile_path("standard", basic) == BENCH / "profiles" / "standard.yaml"
    out = decision.run_one(basic, 12, 60, profile="numa-deviceshare")
    assert out["profile"] == "numa-deviceshare.yaml" and out["scheduled"] == 60


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], ["basic"]),
        (["--gpu"], ["gpu"]),
        (["--spread", "preferred-spread"], ["preferred-spread"]),
        (["--shape", "basic,gang", "--quota", "quota-tree"], ["basic", "gang", "quota-tree"]),
    ],
)
def test_legacy_flags_name_shapes(argv: list[str], expected: list[str]) -> None:
    args = decision.parser().parse_args(["--nodes", "10,20", *argv])
    cmds = decision.commands(args, decision._shape_names(args), [None])
    assert [c[c.index("--shape") + 1] for c in cmds] == [n for n in expected for _ in (10, 20)]
    assert [c[1] for c in cmds] == ["10", "20"] * len(expected)


def test_unknown_shape_is_refused() -> None:
    args = decision.parser().parse_args(["--shape", "basic,nope"])
    with pytest.raises(SystemExit, match="unknown shape\\(s\\) nope"):
        decision._shape_names(args)


def test_compare_reports_ratios_within_the_run() -> None:
    rows = [
        {"shape": "basic", "profile": "p", "nodes": 500, "cpu_us_per_pod": 100.0},
        {"shape": "basic", "profile": "p", "nodes": 5000, "cpu_us_per_pod": 130.0},
        {"shape": "gpu", "profile": "p", "nodes": 500, "cpu_us_per_pod": 250.0},
    ]
    assert decision.compare(rows) == [
        "basic / p: per-pod CPU at 5000 nodes vs 500: x1.30",
        "500 nodes: gpu / p per-pod CPU vs basic / p: x2.50",
    ]
