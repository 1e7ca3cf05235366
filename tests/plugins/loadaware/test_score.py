"""LoadAwareScheduling's Score (spec 4.6 Score), exact values worked out by hand.

score = sum_R w_R * leastUsed_R / sum_R w_R, leastUsed = (cap - used) * 100 / cap with Go's
integer division (0 when used > cap or cap = 0). Nodes have 10 cpu and 10Gi (10737418240
bytes); the pod asks 1 cpu and 1Gi, estimated 850m and 751619277 bytes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from koordsched.framework.interface import NormalizeScorePlugin
from tests.plugins.loadaware.helpers import (
    FREE,
    NOW,
    PROD,
    Cluster,
    make_metric,
    make_pod,
    one_cpu_pod,
    pod_metric,
)

# memory used 2Gi + 751619277 = 2899102925: (10737418240 - 2899102925) * 100 / 10737418240
# = 72.99999998... -> 72. cpu used 2000 + 850: 7150 * 100 / 10000 = 71.
BASE_METRIC: dict[str, Any] = {"cpu": "2", "memory": "2Gi"}


def score_one(
    cluster: Cluster, metric: dict[str, Any] | None, node: dict[str, Any] | None = None, **pod_kw: Any
) -> int:
    cluster.add_node("n1", **(node or {}))
    if metric is not None:
        cluster.set_metric(make_metric("n1", **metric))
    return cluster.scores(one_cpu_pod(**pod_kw))["n1"]


@pytest.mark.parametrize(
    ("args", "metric", "node", "expected"),
    [
        # (71 + 72) / 2 = 71.
        ({}, BASE_METRIC, None, 71),
        # Weighted: (71 * 2 + 72) / 3 = 214 / 3 = 71.
        ({"resourceWeights": {"cpu": 2, "memory": 1}}, BASE_METRIC, None, 71),
        # cpu only: 71; memory only: 72.
        ({"resourceWeights": {"cpu": 1}}, BASE_METRIC, None, 71),
        ({"resourceWeights": {"memory": 1}}, BASE_METRIC, None, 72),
        # cpu over capacity (9500 + 850 > 10000) scores 0 for cpu: (0 + 72) / 2 = 36.
        ({}, {"cpu": "9.5", "memory": "2Gi"}, None, 36),
        # Idle node: cpu 9150 * 100 / 10000 = 91; memory 9985798963 * 100 / 10Gi = 92.99... -> 92;
        # (91 + 92) / 2 = 91.
        ({}, {"cpu": "0", "memory": "0"}, None, 91),
        # raw-allocatable cpu 20: (20000 - 2850) * 100 / 20000 = 85; (85 + 72) / 2 = 78.
        (
            {},
            BASE_METRIC,
            {"annotations": {"node.koordinator.sh/raw-allocatable": json.dumps({"cpu": "20"})}},
            78,
        ),
        # raw-allocatable memory 20Gi: 18575733555 * 100 / 21474836480 = 86.49... -> 86; (71 + 86) / 2 = 78.
        ({}, BASE_METRIC, {"annotations": {"node.koordinator.sh/raw-allocatable": '{"memory":"20Gi"}'}}, 78),
        # An unreadable raw-allocatable is ignored.
        ({}, BASE_METRIC, {"annotations": {"node.koordinator.sh/raw-allocatable": '{"cpu":"many"}'}}, 71),
        # No memory allocatable: memory scores 0: (71 + 0) / 2 = 35.
        ({}, BASE_METRIC, {"memory": "0"}, 35),
        # No metric, an expired one (whatever filterExpiredNodeMetrics says), none reported, no nodeMetric: 0.
        ({}, None, None, 0),
        ({}, {**BASE_METRIC, "age": 180}, None, 0),
        ({"filterExpiredNodeMetrics": False}, {**BASE_METRIC, "age": 200}, None, 0),
        ({"nodeMetricExpirationSeconds": 300}, {**BASE_METRIC, "age": 200}, None, 71),
        ({}, {**BASE_METRIC, "age": None}, None, 0),
        ({}, {"node_metric": False}, None, 0),
    ],
)
def test_scores(
    args: dict[str, Any], metric: dict[str, Any] | None, node: dict[str, Any] | None, expected: int
) -> None:
    assert score_one(Cluster(**args), metric, node) == expected


# Prod scoring: pod a (prod) uses 1 cpu / 1Gi, pod b (batch) 3 cpu / 3Gi; the node 6 cpu / 6Gi.
PROD_METRIC: dict[str, Any] = {
    "cpu": "6",
    "memory": "6Gi",
    "pods": [
        pod_metric("a", cpu="1", memory="1Gi", priority="koord-prod"),
        pod_metric("b", cpu="3", memory="3Gi", priority="koord-batch"),
    ],
}


@pytest.mark.parametrize(
    ("args", "labels", "expected"),
    [
        # Prod usage: cpu 1000 + 850 -> 8150 * 100 / 10000 = 81; memory 1Gi + 751619277 = 1825361101
        # -> 8912057139 * 100 / 10Gi = 82.99... -> 82; (81 + 82) / 2 = 81.
        ({"scoreAccordingProdUsage": True}, PROD, 81),
        # Node usage: cpu 6850 -> 31; memory 6Gi + 751619277 -> 32.99... -> 32; (31 + 32) / 2 = 31.
        ({"scoreAccordingProdUsage": True}, FREE, 31),
        ({}, PROD, 31),
    ],
)
def test_prod_scoring(args: dict[str, Any], labels: dict[str, str], expected: int) -> None:
    assert score_one(Cluster(**args), PROD_METRIC, labels=labels) == expected


AGG = [{"duration": "5m", "usage": {"p95": {"resources": {"cpu": "4", "memory": "2Gi"}}}}]


@pytest.mark.parametrize(
    ("aggregated", "expected"),
    [
        # p95 over the longest window: cpu 4850 -> 51; memory 72; (51 + 72) / 2 = 61.
        ({"scoreAggregationType": "p95"}, 61),
        ({"scoreAggregationType": "p95", "scoreAggregatedDuration": "5m"}, 61),
        # No 10m window: no node usage, only the pod: cpu 91, memory 92.99... -> 92; 91.
        ({"scoreAggregationType": "p95", "scoreAggregatedDuration": "10m"}, 91),
        # Not configured: nodeUsage (1 cpu, 1Gi): cpu 81, memory 82; 81.
        ({}, 81),
    ],
)
def test_score_aggregation(aggregated: dict[str, Any], expected: int) -> None:
    cluster = Cluster(aggregated=aggregated) if aggregated else Cluster()
    assert score_one(cluster, {"cpu": "1", "memory": "1Gi", "aggregated": AGG}) == expected


def test_scores_over_several_nodes_and_no_normalize() -> None:
    c = Cluster()
    for name, cpu in (("idle", "0"), ("half", "5"), ("none", None)):
        c.add_node(name)
        if cpu is not None:
            c.set_metric(make_metric(name, cpu=cpu, memory="2Gi"))
    # half: cpu 5850 -> 41; memory 72; (41 + 72) / 2 = 56. idle: cpu 91, memory 72 -> 81.
    assert c.scores(one_cpu_pod()) == {"idle": 81, "half": 56, "none": 0}
    assert not isinstance(c.plugin, NormalizeScorePlugin)


# --- recently assigned pods -------------------------------------------------------------------------
# cpu only. Node usage 4 cpu, metric 30 s old; q1 asks 2 cpu (estimate 1700).
# Estimated with q1 reporting 1 cpu: 850 + 1700 + 3000 = 5550 -> 4450 * 100 / 10000 = 44.
# Not estimated: 850 + 4000 = 4850 -> 51.


@pytest.mark.parametrize(
    ("assigned_ago", "q1_usage", "interval", "expected"),
    [
        (None, "1", None, 51),  # q1 is not on the node
        (10, "1", None, 44),  # assigned after the update
        (60, "1", None, 44),  # 30 s before the update: within the 60 s interval
        (90, "1", None, 51),  # exactly 60 s before: not within
        (100, "1", None, 51),
        (30, "1", None, 51),  # at the update time itself
        (100, "1", 120, 44),  # 70 s before, within a 120 s interval
        # No usage reported for q1: estimated, node usage not reduced: 850 + 1700 + 4000 -> 34.
        (100, None, None, 34),
        (100, "", None, 34),  # an empty usage counts as none
        # max(estimate, usage): q1 reported 2.5 cpu: 850 + 2500 + 1500 = 4850 -> 51.
        (10, "2500m", None, 51),
        # q1 reported more than the node: no subtraction: 850 + 5000 + 4000 = 9850 -> 1.
        (10, "5", None, 1),
    ],
)
def test_recently_assigned_pods(
    assigned_ago: float | None, q1_usage: str | None, interval: int | None, expected: int
) -> None:
    c = Cluster(resourceWeights={"cpu": 1})
    c.add_node("n1")
    pods = []
    if q1_usage is not None:
        pods.append(pod_metric("q1", cpu=q1_usage or None))
    c.set_metric(make_metric("n1", age=30, cpu="4", pods=pods, report_interval=interval))
    if assigned_ago is not None:
        c.place(make_pod("q1", {"cpu": "2"}, node="n1", scheduled_at=NOW - assigned_ago), "n1")
    assert c.scores(one_cpu_pod())["n1"] == expected


def test_missing_score_aggregation_estimates_every_assigned_pod() -> None:
    """Score aggregation configured and absent from the metric: every assigned pod needs estimation."""
    c = Cluster(
        resourceWeights={"cpu": 1}, usageThresholds={"cpu": 50}, aggregated={"scoreAggregationType": "p95"}
    )
    c.add_node("n1")
    c.set_metric(make_metric("n1", age=30, cpu="4", pods=[pod_metric("q1", cpu="1")]))
    c.place(make_pod("q1", {"cpu": "2"}, node="n1", scheduled_at=NOW - 1000), "n1")
    # Score: no node usage (no p95), q1 estimated: 850 + 1700 = 2550 -> 7450 * 100 / 10000 = 74.
    assert c.scores(one_cpu_pod())["n1"] == 74
    # Filter: nodeUsage less q1's usage plus its estimate: 850 + 3000 + 1700 = 5550 -> 56 > 50.
    assert c.filter(one_cpu_pod())["n1"] == "node(s) cpu usage exceed threshold"
    # With the p95 usage present (3 cpu), q1 is old enough not to be estimated: 850 + 3000 -> 61.
    agg = [{"duration": "5m", "usage": {"p95": {"resources": {"cpu": "3"}}}}]
    c.set_metric(make_metric("n1", age=30, cpu="4", pods=[pod_metric("q1", cpu="1")], aggregated=agg))
    assert c.scores(one_cpu_pod())["n1"] == 61
