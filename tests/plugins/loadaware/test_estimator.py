"""The default estimator (spec 4.6 "Estimator"), values worked out by hand.

Default factors: cpu 85 %, memory 70 %. est = round(q * factor / 100), halves away from
zero, q = max(limit, request) of the name the pod's priority class asks under.
"""

from __future__ import annotations

from typing import Any

import pytest

from koordsched.plugins.loadaware.estimator import Estimator, go_round, translate
from tests.plugins.loadaware.helpers import BATCH, FREE, GI, MI, MID, make_pod

WEIGHTS = {"cpu": 1, "memory": 1}
FACTORS = {"cpu": 85, "memory": 70}


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        (0.5, 1),
        (1.5, 2),
        (2.5, 3),
        (-0.5, -1),
        (-2.5, -3),
        (2.4999999, 2),
        (0.49999999999999994, 0),
        (7.0, 7),
    ],
)
def test_go_round_is_half_away_from_zero(x: float, expected: int) -> None:
    assert go_round(x) == expected


@pytest.mark.parametrize(
    ("pc", "name", "expected"),
    [
        ("koord-batch", "cpu", "kubernetes.io/batch-cpu"),
        ("koord-batch", "memory", "kubernetes.io/batch-memory"),
        ("koord-mid", "cpu", "kubernetes.io/mid-cpu"),
        ("koord-mid", "memory", "kubernetes.io/mid-memory"),
        ("koord-prod", "cpu", "cpu"),
        ("koord-free", "memory", "memory"),
        ("", "cpu", "cpu"),
        ("koord-batch", "nvidia.com/gpu", "nvidia.com/gpu"),
    ],
)
def test_translate(pc: str, name: str, expected: str) -> None:
    assert translate(pc, name) == expected


CASES: list[tuple[str, dict[str, Any], dict[str, int]]] = [
    # Nothing asked: 250m and 200Mi.
    ("empty", {}, {"cpu": 250, "memory": 200 * MI}),
    # 1000m * 0.85 = 850; 1Gi * 0.7 = 751619276.8 -> 751619277.
    ("plain", {"requests": {"cpu": "1", "memory": "1Gi"}}, {"cpu": 850, "memory": 751619277}),
    # Only cpu asked: memory gets the default.
    ("cpu only", {"requests": {"cpu": "2"}}, {"cpu": 1700, "memory": 200 * MI}),
    # The larger of limit and request counts: 2000 * 0.85 = 1700.
    (
        "limit above request",
        {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}},
        {"cpu": 1700, "memory": 200 * MI},
    ),
    # Limits only: the request defaults to the limit.
    ("limits only", {"limits": {"cpu": "4", "memory": "2Gi"}}, {"cpu": 3400, "memory": 1503238554}),
    # 1001 * 0.85 = 850.85 -> 851; 5 bytes * 0.7 = 3.5 -> 4 (half away from zero).
    ("rounding", {"requests": {"cpu": "1001m", "memory": "5"}}, {"cpu": 851, "memory": 4}),
    # 3 bytes * 0.7 = 2.1 -> 2.
    ("rounding down", {"requests": {"cpu": "10m", "memory": "3"}}, {"cpu": 9, "memory": 2}),
    # A request above the limit (no API server in between): 4000 * 0.85 = 3400, capped at the 2000 limit.
    (
        "capped at limit",
        {"requests": {"cpu": "4"}, "limits": {"cpu": "2"}},
        {"cpu": 2000, "memory": 200 * MI},
    ),
    # An init container asking more than the app: q = 3000 -> 2550.
    (
        "init container",
        {"requests": {"cpu": "1"}, "init_requests": {"cpu": "3"}},
        {"cpu": 2550, "memory": 200 * MI},
    ),
    # Overhead adds to requests (1000 + 500) and to the cpu limit (1000 + 500): 1500 * 0.85 = 1275.
    (
        "overhead",
        {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}, "overhead": {"cpu": "500m"}},
        {"cpu": 1275, "memory": 200 * MI},
    ),
    # koord-batch asks batch-cpu (already millicores) and batch-memory; keyed as cpu and memory.
    # 2000 * 0.85 = 1700; 2Gi * 0.7 = 1503238553.6 -> 1503238554.
    (
        "batch",
        {
            "labels": BATCH,
            "requests": {"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "2Gi"},
        },
        {"cpu": 1700, "memory": 1503238554},
    ),
    # A batch pod's plain cpu/memory requests are not what it runs on: batch names unasked -> defaults.
    (
        "batch asking cpu",
        {"labels": BATCH, "requests": {"cpu": "4", "memory": "4Gi"}},
        {"cpu": 250, "memory": 200 * MI},
    ),
    # Priority from spec.priority (5000-5999 is batch) with batch requests.
    (
        "batch by priority",
        {"priority": 5500, "requests": {"kubernetes.io/batch-cpu": "1000"}},
        {"cpu": 850, "memory": 200 * MI},
    ),
    # koord-mid translates to mid names; an unasked mid name has no default (only cpu/memory/batch ones do).
    ("mid", {"labels": MID, "requests": {"kubernetes.io/mid-cpu": "1000"}}, {"cpu": 850, "memory": 0}),
    ("mid asking nothing", {"labels": MID}, {"cpu": 0, "memory": 0}),
    # koord-free keeps the plain names.
    ("free", {"labels": FREE, "requests": {"cpu": "1"}}, {"cpu": 850, "memory": 200 * MI}),
    # BestEffort without labels defaults to koord-batch, whose batch names are unasked: defaults.
    ("best effort", {}, {"cpu": 250, "memory": 200 * MI}),
]


@pytest.mark.parametrize(("case", "spec", "expected"), CASES, ids=[c[0] for c in CASES])
def test_default_estimator(case: str, spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert Estimator(WEIGHTS, FACTORS).estimate(make_pod("p", **spec)) == expected


def test_scaling_factors_and_resources_follow_the_args() -> None:
    estimator = Estimator(
        {"cpu": 1, "memory": 1, "nvidia.com/gpu": 1}, {"cpu": 50, "memory": 100, "nvidia.com/gpu": 100}
    )
    pod = make_pod("p", {"cpu": "3", "memory": "1Gi", "nvidia.com/gpu": "2"})
    # 3000 * 0.5 = 1500; 1Gi * 1.0; other resources scale by their factor with no default.
    assert estimator.estimate(pod) == {"cpu": 1500, "memory": GI, "nvidia.com/gpu": 2}
    assert estimator.estimate(make_pod("q"))["nvidia.com/gpu"] == 0


def test_estimate_is_kept_per_pod_object() -> None:
    estimator = Estimator(WEIGHTS, FACTORS)
    pod = make_pod("p", {"cpu": "1"})
    first = estimator.estimate(pod)
    assert estimator.estimate(pod) is first
    # A new object for the pod (an update) is estimated afresh.
    other = make_pod("p", {"cpu": "2"})
    other.extra = pod.extra
    assert estimator.estimate(other)["cpu"] == 1700
