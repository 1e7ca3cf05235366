"""LoadAwareScheduling's Filter (spec 4.6 Filter), with the numbers worked out by hand.

Every node has 10 cpu (10000m) and 10Gi memory unless said otherwise. The incoming pod asks
1 cpu and 1Gi: its estimate is 850m cpu and 751619277 bytes (1Gi * 0.7, rounded). Usage is
round((estimate + node load) / total * 100), halves away from zero, compared with the
threshold (default cpu 65, memory 95).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from koordsched.plugins.loadaware.plugin import (
    ERR_NODE_METRIC_EXPIRED,
    NODE_METRIC_ADD,
    NODE_METRIC_DELETE,
    NODE_METRIC_UPDATE,
)
from koordsched.plugins.loadaware.thresholds import ANNOTATION_USAGE_THRESHOLDS
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

CPU_OVER = "node(s) cpu usage exceed threshold"
MEMORY_OVER = "node(s) memory usage exceed threshold"
CPU_AGG_OVER = "node(s) cpu aggregated usage exceed threshold"


def one_node(cluster: Cluster, **metric: Any) -> str | None:
    """The verdict for the standard pod on node n1 with the given NodeMetric (``None``: no metric)."""
    cluster.add_node("n1", **metric.pop("node", {}))
    pod_fields = metric.pop("pod", {})
    if metric.pop("absent", False) is False:
        cluster.set_metric(make_metric("n1", **metric))
    return cluster.filter(one_cpu_pod(**pod_fields))["n1"]


def test_node_without_metric_passes() -> None:
    c = Cluster()
    c.add_node("n1")
    c.add_node("n2")
    c.set_metric(make_metric("n2", cpu="9", memory="1Gi"))
    assert c.filter(one_cpu_pod()) == {"n1": None, "n2": CPU_OVER}


# --- expiry ---------------------------------------------------------------------------------------
# "high" cpu usage 9: (850 + 9000) / 10000 = 98.5 -> 99 > 65. "low" cpu 1: 18.5 -> 19.


@pytest.mark.parametrize(
    ("args", "age", "cpu", "expected"),
    [
        ({}, 200, "1", ERR_NODE_METRIC_EXPIRED),
        ({}, 180, "1", ERR_NODE_METRIC_EXPIRED),  # age >= expiration
        ({}, 179, "1", None),
        ({}, None, "1", ERR_NODE_METRIC_EXPIRED),  # never updated
        ({"nodeMetricExpirationSeconds": 300}, 200, "1", None),
        # Allowed: an expired node passes without any usage check.
        ({"enableScheduleWhenNodeMetricsExpired": True}, 200, "9", None),
        ({"enableScheduleWhenNodeMetricsExpired": True}, 10, "9", CPU_OVER),
        # Not filtered: the usage is checked as if fresh.
        ({"filterExpiredNodeMetrics": False}, 200, "9", CPU_OVER),
        ({"filterExpiredNodeMetrics": False}, 200, "1", None),
        ({"filterExpiredNodeMetrics": False}, None, "1", None),
        (
            {"filterExpiredNodeMetrics": False, "enableScheduleWhenNodeMetricsExpired": True},
            200,
            "9",
            CPU_OVER,
        ),
    ],
)
def test_expired_metrics(args: dict[str, Any], age: float | None, cpu: str, expected: str | None) -> None:
    assert one_node(Cluster(**args), age=age, cpu=cpu, memory="1Gi") == expected


def test_expiry_follows_the_wall_clock() -> None:
    c = Cluster()
    c.add_node("n1")
    c.set_metric(make_metric("n1", age=100, cpu="1"))
    assert c.filter(one_cpu_pod())["n1"] is None
    c.clock.t = NOW + 80  # the metric is now 180 s old
    assert c.filter(one_cpu_pod())["n1"] == ERR_NODE_METRIC_EXPIRED


def test_metric_without_node_metric_passes() -> None:
    assert one_node(Cluster(), node_metric=False) is None


# --- thresholds from the args ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "cpu", "memory", "expected"),
    [
        # 850 + 5600 = 6450 of 10000: 64.5 -> 65 (half away from zero), not over 65.
        ({}, "5600m", "1Gi", None),
        # The same 64.5 against 64: 65 > 64 (banker's rounding would give 64 and pass).
        ({"usageThresholds": {"cpu": 64}}, "5600m", "1Gi", CPU_OVER),
        # 6500 -> 65 passes; 6550 -> 65.5 -> 66 fails.
        ({}, "5650m", "1Gi", None),
        ({}, "5700m", "1Gi", CPU_OVER),
        # memory: (751619277 + 9.5Gi) / 10Gi = 102 % > 95.
        ({}, "1", "9.5Gi", MEMORY_OVER),
        # memory: (751619277 + 9Gi) / 10Gi = 97 % > 95.
        ({}, "1", "9Gi", MEMORY_OVER),
        # memory: (751619277 + 8.8Gi) / 10Gi = 95 % (94.99...).
        ({}, "1", "8.8Gi", None),
        # Both over: the first resource in column order (weights first) is reported.
        ({}, "9", "9.5Gi", CPU_OVER),
        # A threshold of 0 is no threshold.
        ({"usageThresholds": {"cpu": 0, "memory": 95}}, "9.5", "1Gi", None),
        # Only cpu thresholded: memory is not checked at all.
        ({"usageThresholds": {"cpu": 65}}, "1", "9.5Gi", None),
    ],
)
def test_usage_thresholds_from_args(
    args: dict[str, Any], cpu: str, memory: str, expected: str | None
) -> None:
    assert one_node(Cluster(**args), cpu=cpu, memory=memory) == expected


def test_resource_with_zero_total_is_not_checked() -> None:
    assert one_node(Cluster(), node={"memory": "0"}, cpu="1", memory="5Gi") is None


def test_raw_allocatable_annotation_replaces_allocatable() -> None:
    # 850 + 9000 of 20000 cpu: 49.25 -> 49.
    raw = {"node.koordinator.sh/raw-allocatable": json.dumps({"cpu": "20"})}
    assert one_node(Cluster(), node={"annotations": raw}, cpu="9", memory="1Gi") is None
    bad = {"node.koordinator.sh/raw-allocatable": "{cpu: 20"}
    assert one_node(Cluster(), node={"annotations": bad}, cpu="9", memory="1Gi") == CPU_OVER


# --- thresholds from the node annotation -------------------------------------------------------


@pytest.mark.parametrize(
    ("annotation", "cpu", "memory", "expected"),
    [
        # 850 + 6000 -> 68.5 -> 69: over the args' 65, within the node's 70.
        (None, "6", "1Gi", CPU_OVER),
        ({"usageThresholds": {"cpu": 70}}, "6", "1Gi", None),
        # The node's map replaces the args' map: memory is no longer checked.
        ({"usageThresholds": {"cpu": 70}}, "1", "9.5Gi", None),
        # 850 + 5200 -> 60.5 -> 61 > 60.
        ({"usageThresholds": {"cpu": 60}}, "5200m", "1Gi", CPU_OVER),
        ({"usageThresholds": {"cpu": 60}}, "5", "1Gi", None),  # 58.5 -> 59
        # Empty fields fall back to the args.
        ({"usageThresholds": {}}, "6", "1Gi", CPU_OVER),
        ({"prodUsageThresholds": {"cpu": 90}}, "6", "1Gi", CPU_OVER),
        # Unknown fields are ignored, as Go's decoder does.
        ({"usageThresholds": {"cpu": 70}, "somethingElse": 1}, "6", "1Gi", None),
        # Anything that does not decode: the args entirely.
        ('{"usageThresholds":{"cpu":"70"}}', "6", "1Gi", CPU_OVER),
        ('{"usageThresholds":{"cpu":70.5}}', "6", "1Gi", CPU_OVER),
        ('{"usageThresholds": {"cpu": 70}', "6", "1Gi", CPU_OVER),
        ("[]", "6", "1Gi", CPU_OVER),
        (
            {
                "usageThresholds": {"cpu": 70},
                "aggregatedUsage": {
                    "usageThresholds": {"cpu": 90},
                    "usageAggregationType": "p95",
                    "usageAggregatedDuration": "five minutes",
                },
            },
            "6",
            "1Gi",
            CPU_OVER,
        ),
    ],
)
def test_usage_thresholds_from_node_annotation(
    annotation: dict[str, Any] | str | None, cpu: str, memory: str, expected: str | None
) -> None:
    annotations = {}
    if annotation is not None:
        text = annotation if isinstance(annotation, str) else json.dumps(annotation)
        annotations[ANNOTATION_USAGE_THRESHOLDS] = text
    # A koord-free pod: an unlabelled one with requests is koord-prod by default and would take
    # the prod path wherever prod thresholds are set.
    got = one_node(Cluster(), node={"annotations": annotations}, cpu=cpu, memory=memory, pod={"labels": FREE})
    assert got == expected


def test_unlabelled_pods_are_prod_by_default() -> None:
    # Burstable -> LS -> koord-prod: prod thresholds from the node apply (no prod usage reported: 850 -> 9).
    node = {"annotations": {ANNOTATION_USAGE_THRESHOLDS: json.dumps({"prodUsageThresholds": {"cpu": 90}})}}
    assert one_node(Cluster(), node=node, cpu="6", memory="1Gi") is None


def test_annotation_change_is_seen_on_node_update() -> None:
    c = Cluster()
    c.add_node("n1")
    c.set_metric(make_metric("n1", cpu="6", memory="1Gi"))
    assert c.filter(one_cpu_pod())["n1"] == CPU_OVER
    from tests.plugins.loadaware.helpers import make_node

    node = make_node("n1", annotations={ANNOTATION_USAGE_THRESHOLDS: '{"usageThresholds":{"cpu":70}}'})
    from koordsched.api.resources import resource_list

    c.snap.update_node(node, resource_list(node.status.allocatable))
    assert c.filter(one_cpu_pod())["n1"] is None


def test_bad_annotation_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    c = Cluster()
    for name in ("n1", "n2"):
        c.add_node(name, annotations={ANNOTATION_USAGE_THRESHOLDS: "{oops"})
        c.set_metric(make_metric(name, cpu="6", memory="1Gi"))
    with caplog.at_level("WARNING"):
        c.filter(one_cpu_pod())
        c.filter(one_cpu_pod())
    logged = [r for r in caplog.records if ANNOTATION_USAGE_THRESHOLDS in r.getMessage()]
    assert len(logged) == 1 and "node n1" in logged[0].getMessage()


# --- aggregated usage ----------------------------------------------------------------------------

AGGREGATED = [
    {"duration": "5m0s", "usage": {"p95": {"resources": {"cpu": "3"}}}},
    {"duration": "10m0s", "usage": {"p95": {"resources": {"cpu": "5200m"}}}},
    {"duration": "30m0s", "usage": {"p50": {"resources": {"cpu": "1"}}}},
]


def agg_args(duration: str | None = None) -> dict[str, Any]:
    agg: dict[str, Any] = {"usageThresholds": {"cpu": 60}, "usageAggregationType": "p95"}
    if duration is not None:
        agg["usageAggregatedDuration"] = duration
    return {"aggregated": agg}


@pytest.mark.parametrize(
    ("duration", "aggregated", "node_cpu", "expected"),
    [
        # Unset: the longest window with p95 (10m, 5.2 cpu): 850 + 5200 -> 60.5 -> 61 > 60.
        (None, AGGREGATED, "1", CPU_AGG_OVER),
        ("0s", AGGREGATED, "1", CPU_AGG_OVER),
        # 5m: 3 cpu -> 38.5 -> 39.
        ("5m", AGGREGATED, "9", None),
        ("10m", AGGREGATED, "1", CPU_AGG_OVER),
        # No 15m window, and 30m has no p95: no node usage at all, only the pod's 850 -> 9.
        ("15m", AGGREGATED, "9", None),
        ("30m", AGGREGATED, "9", None),
        # Unset and no window has p95: nodeUsage instead (6 cpu -> 68.5 -> 69 > 60).
        (None, AGGREGATED[2:], "6", CPU_AGG_OVER),
        (None, AGGREGATED[2:], "1", None),
        # No aggregated usages at all: nothing is taken (not even nodeUsage), as in Go.
        (None, [], "9", None),
    ],
)
def test_aggregated_usage(
    duration: str | None, aggregated: list[dict[str, Any]], node_cpu: str, expected: str | None
) -> None:
    # Memory is far over 95 % in nodeUsage, but the aggregated thresholds name cpu only.
    got = one_node(Cluster(**agg_args(duration)), cpu=node_cpu, memory="9.5Gi", aggregated=aggregated)
    assert got == expected


def test_aggregated_from_node_annotation() -> None:
    custom = {
        "aggregatedUsage": {
            "usageThresholds": {"cpu": 70},
            "usageAggregationType": "p95",
            "usageAggregatedDuration": "10m",
        }
    }
    node = {"annotations": {ANNOTATION_USAGE_THRESHOLDS: json.dumps(custom)}}
    # The node's own aggregated thresholds: 61 <= 70.
    assert one_node(Cluster(**agg_args()), node=node, cpu="1", aggregated=AGGREGATED) is None
    # The args have no aggregated filter: the node's alone turns it on (6 cpu in nodeUsage is not read).
    assert one_node(Cluster(), node=node, cpu="6", aggregated=AGGREGATED) is None
    # Without a type the node's aggregatedUsage does not count; the args' does (61 > 60).
    partial = {"aggregatedUsage": {"usageThresholds": {"cpu": 70}}}
    node = {"annotations": {ANNOTATION_USAGE_THRESHOLDS: json.dumps(partial)}}
    assert one_node(Cluster(**agg_args()), node=node, cpu="1", aggregated=AGGREGATED) == CPU_AGG_OVER
    # ... and without any aggregated setting the usage thresholds apply (6 cpu: 69 > 65).
    assert one_node(Cluster(), node=node, cpu="6", aggregated=AGGREGATED) == CPU_OVER


# --- the prod path -------------------------------------------------------------------------------

PODS = [pod_metric("a", cpu="2", priority="koord-prod"), pod_metric("b", cpu="3", priority="koord-batch")]


@pytest.mark.parametrize(
    ("args", "labels", "pods", "expected"),
    [
        # A prod pod against prod usage: 850 + 2000 (pod a) -> 28 <= 50.
        ({"prodUsageThresholds": {"cpu": 50}}, PROD, PODS, None),
        # The same node for a koord-free pod: the usage path, 850 + 6000 -> 69 > 65.
        ({"prodUsageThresholds": {"cpu": 50}}, FREE, PODS, CPU_OVER),
        # Without prod thresholds a prod pod takes the usage path too.
        ({}, PROD, PODS, CPU_OVER),
        # 850 + 4200 -> 50.5 -> 51 > 50; the prod path never says "aggregated".
        (
            {"prodUsageThresholds": {"cpu": 50}, **agg_args()},
            PROD,
            [pod_metric("a", cpu="4200m", priority="koord-prod"), PODS[1]],
            CPU_OVER,
        ),
        # Pods are prod by what koordlet reported for them: b's usage does not count.
        ({"prodUsageThresholds": {"cpu": 30}}, PROD, PODS, None),
        # 2850 / 10000 * 100 is 28.499999999999996 in float64, as in Go: it rounds to 28, not 29.
        ({"prodUsageThresholds": {"cpu": 28}}, PROD, PODS, None),
        ({"prodUsageThresholds": {"cpu": 27}}, PROD, PODS, CPU_OVER),
    ],
)
def test_prod_path(
    args: dict[str, Any], labels: dict[str, str], pods: list[dict[str, Any]], expected: str | None
) -> None:
    got = one_node(Cluster(**args), cpu="6", memory="9.5Gi", pods=pods, pod={"labels": labels})
    assert got == expected


def test_prod_thresholds_from_node_annotation() -> None:
    pods = [pod_metric("a", cpu="4200m", priority="koord-prod")]
    node = {"annotations": {ANNOTATION_USAGE_THRESHOLDS: json.dumps({"prodUsageThresholds": {"cpu": 60}})}}
    # 51 <= the node's 60.
    assert (
        one_node(
            Cluster(prodUsageThresholds={"cpu": 50}), node=node, cpu="1", pods=pods, pod={"labels": PROD}
        )
        is None
    )
    # Prod thresholds only on the node: a prod pod takes the prod path there.
    node = {"annotations": {ANNOTATION_USAGE_THRESHOLDS: json.dumps({"prodUsageThresholds": {"cpu": 50}})}}
    assert one_node(Cluster(), node=node, cpu="1", pods=pods, pod={"labels": PROD}) == CPU_OVER


def test_prod_path_estimates_recent_prod_pods() -> None:
    """A prod pod assigned after the metric counts at max(estimate, usage); a free one does not count."""
    c = Cluster(prodUsageThresholds={"cpu": 45})
    c.add_node("n1")
    metric = make_metric(
        "n1",
        age=30,
        cpu="6",
        pods=[
            pod_metric("a", cpu="2", priority="koord-prod"),
            pod_metric("c", cpu="1", priority="koord-prod"),
        ],
    )
    c.set_metric(metric)
    # c asks 2 cpu (estimate 1700 > its reported 1000); d is koord-free and recent too.
    c.place(make_pod("c", {"cpu": "2"}, labels=PROD, node="n1", scheduled_at=NOW - 10), "n1")
    c.place(make_pod("d", {"cpu": "4"}, labels=FREE, node="n1", scheduled_at=NOW - 10), "n1")
    # 850 + 1700 (c) + 2000 (a) = 4550 -> 45.5 -> 46 > 45. Counting c at its usage would give 39.
    assert c.filter(one_cpu_pod(labels=PROD))["n1"] == CPU_OVER


# --- DaemonSet pods --------------------------------------------------------------------------------


def test_daemonset_pods_pass_everywhere() -> None:
    c = Cluster()
    c.add_node("expired")
    c.add_node("busy")
    c.set_metric(make_metric("expired", age=500, cpu="1"))
    c.set_metric(make_metric("busy", cpu="9.9", memory="9.9Gi"))
    assert c.filter(one_cpu_pod(owner_kind="DaemonSet")) == {"expired": None, "busy": None}
    assert c.filter(one_cpu_pod(owner_kind="ReplicaSet")) == {
        "expired": ERR_NODE_METRIC_EXPIRED,
        "busy": CPU_OVER,
    }


# --- recently assigned pods -----------------------------------------------------------------------
# Node usage 4 cpu, metric 30 s old, report interval 60 s; q1 asks 2 cpu (estimate 1700) and
# reported 1 cpu. Estimated: 850 + 1700 + (4000 - 1000) = 5550 -> 55.5 -> 56 > 50.
# Not estimated: 850 + 4000 = 4850 -> 48.5 -> 49.


@pytest.mark.parametrize(
    ("assigned_ago", "expected"),
    [(10, CPU_OVER), (60, CPU_OVER), (90, None), (100, None), (30, None)],
)
def test_filter_estimates_recently_assigned_pods(assigned_ago: float, expected: str | None) -> None:
    c = Cluster(usageThresholds={"cpu": 50})
    c.add_node("n1")
    c.set_metric(make_metric("n1", age=30, cpu="4", pods=[pod_metric("q1", cpu="1")]))
    c.place(make_pod("q1", {"cpu": "2"}, node="n1", scheduled_at=NOW - assigned_ago), "n1")
    assert c.filter(one_cpu_pod())["n1"] == expected


# --- following the cluster ------------------------------------------------------------------------


def test_metric_changes_are_followed() -> None:
    c = Cluster()
    c.add_node("n1")
    c.add_node("n2")
    c.set_metric(make_metric("n1", cpu="9"))
    assert c.filter(one_cpu_pod()) == {"n1": CPU_OVER, "n2": None}
    c.set_metric(make_metric("n1", cpu="1"))
    c.set_metric(make_metric("n2", cpu="9"))
    assert c.filter(one_cpu_pod()) == {"n1": None, "n2": CPU_OVER}
    c.set_metric(None, "n2")
    assert c.filter(one_cpu_pod()) == {"n1": None, "n2": None}
    # An object put in place without marking its row (the count changed) is still seen.
    c.handle.stores["NodeMetric"]["n2"] = make_metric("n2", cpu="9")
    assert c.filter(one_cpu_pod()) == {"n1": None, "n2": CPU_OVER}


def test_rows_follow_node_removal() -> None:
    c = Cluster()
    for name, cpu in (("n1", "9"), ("n2", "1"), ("n3", "9"), ("n4", "1")):
        c.add_node(name)
        c.set_metric(make_metric(name, cpu=cpu))
    assert c.filter(one_cpu_pod()) == {"n1": CPU_OVER, "n2": None, "n3": CPU_OVER, "n4": None}
    c.snap.remove_node("n2")  # n4 moves into n2's row
    assert c.filter(one_cpu_pod()) == {"n1": CPU_OVER, "n4": None, "n3": CPU_OVER}
    c.add_node("n5")
    c.set_metric(make_metric("n5", cpu="9"))
    assert c.filter(one_cpu_pod()) == {"n1": CPU_OVER, "n4": None, "n3": CPU_OVER, "n5": CPU_OVER}


def test_many_nodes_grow_the_rows() -> None:
    c = Cluster()
    for i in range(40):
        c.add_node(f"n{i}")
        c.set_metric(make_metric(f"n{i}", cpu="9" if i % 3 == 0 else "1"))
        if i == 5:
            c.filter(one_cpu_pod())  # built while small, then grown
    got = c.filter(one_cpu_pod())
    assert got == {f"n{i}": CPU_OVER if i % 3 == 0 else None for i in range(40)}


def test_annotation_with_a_new_resource_adds_a_column() -> None:
    c = Cluster()
    c.add_node("n1")
    c.set_metric(make_metric("n1", cpu="1", memory="1Gi"))
    assert c.filter(one_cpu_pod())["n1"] is None
    node_ann = {ANNOTATION_USAGE_THRESHOLDS: json.dumps({"usageThresholds": {"ephemeral-storage": 50}})}
    c.add_node("n2", annotations=node_ann)
    from koordsched.api.resources import resource_list
    from tests.plugins.loadaware.helpers import make_node

    node = make_node("n2", annotations=node_ann)
    c.snap.remove_node("n2")
    alloc = resource_list(node.status.allocatable) | {"ephemeral-storage": 100}
    c.snap.add_node(node, alloc)
    c.set_metric(make_metric("n2", raw_node_usage={"resources": {"cpu": "1", "ephemeral-storage": "60"}}))
    # 60 of 100: 60 % > 50; the pod estimates nothing for an unweighted resource.
    assert c.filter(one_cpu_pod()) == {"n1": None, "n2": "node(s) ephemeral-storage usage exceed threshold"}


def test_events() -> None:
    c = Cluster()
    events = {e.event.name: e for e in c.plugin.events_to_register()}
    assert set(events) == {"AssignedPodDelete", "NodeMetricAdd", "NodeMetricUpdate", "NodeMetricDelete"}
    assert events[NODE_METRIC_ADD.name].hint is None and events[NODE_METRIC_DELETE.name].hint is None
    hint = events[NODE_METRIC_UPDATE.name].hint
    assert hint is not None
    old = make_metric("n1", cpu="1")
    p = one_cpu_pod()
    assert hint(p, old, make_metric("n1", cpu="2"))
    assert hint(p, old, make_metric("n1", age=20, cpu="1"))
    relabelled = make_metric("n1", cpu="1")
    relabelled.metadata.labels = {"x": "y"}
    assert not hint(p, old, relabelled)


# --- passes_all (PassAllFilterPlugin): the framework leaves the Filter out while it passes all ---


def test_passes_all_until_the_first_node_metric() -> None:
    """No NodeMetric anywhere: every node passes and the Score (0 everywhere) is skipped. The first
    NodeMetric ends it: the Filter runs again and rejects the node over its threshold."""
    from koordsched.framework.cycle_state import CycleState

    c = Cluster()
    c.add_node("n1")
    c.add_node("n2")
    state = CycleState()
    assert c.plugin.passes_all(state, one_cpu_pod())
    assert "LoadAwareScheduling" in state.skip_score
    assert c.filter(one_cpu_pod()) == {"n1": None, "n2": None}
    c.set_metric(make_metric("n2", cpu="9", memory="1Gi"))
    state = CycleState()
    assert not c.plugin.passes_all(state, one_cpu_pod())
    assert "LoadAwareScheduling" not in state.skip_score
    assert c.filter(one_cpu_pod()) == {"n1": None, "n2": CPU_OVER}
    # A DaemonSet pod passes everywhere, metric or not.
    ds = make_pod("ds", {"cpu": "1", "memory": "1Gi"}, owner_kind="DaemonSet")
    assert c.plugin.passes_all(CycleState(), ds)
    assert c.filter(ds) == {"n1": None, "n2": None}
    c.set_metric(None, "n2")
    # The rows forget the metric at their next sync (a Filter pass); from then on all pass again.
    assert c.filter(one_cpu_pod()) == {"n1": None, "n2": None}
    assert c.plugin.passes_all(CycleState(), one_cpu_pod())
