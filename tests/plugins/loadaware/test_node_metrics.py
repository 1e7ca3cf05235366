"""Reading NodeMetric objects: the parsed view, and malformed objects treated as absent (never a crash)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import msgspec
import pytest

from koordsched.api.kinds import NODE_METRICS
from koordsched.api.node_metric import (
    MetricError,
    newest_update_time,
    parse_node_metric,
    parse_time,
    resource_value,
)
from koordsched.api.slo import NodeMetric
from tests.plugins.loadaware.helpers import NOW, Cluster, make_metric, make_pod, pod_metric


def test_parse_time() -> None:
    assert parse_time("2023-11-14T22:13:20Z") == NOW
    assert parse_time("2023-11-14T22:13:20.5Z") == NOW + 0.5
    assert parse_time("2023-11-15T00:13:20+02:00") == NOW
    assert parse_time("2023-11-14T22:13:20") == NOW  # no zone: UTC
    with pytest.raises(MetricError, match="yesterday"):
        parse_time("yesterday")


@pytest.mark.parametrize(
    ("name", "amount", "expected"),
    [
        ("cpu", Fraction(1, 3), 334),
        ("cpu", Fraction(2), 2000),
        ("memory", Fraction(3, 2), 2),
        ("memory", Fraction(7), 7),
    ],
)
def test_resource_value_rounds_up(name: str, amount: Fraction, expected: int) -> None:
    assert resource_value(name, amount) == expected


def test_view() -> None:
    metric = make_metric(
        "n1",
        age=30,
        cpu="1500m",
        memory="1Gi",
        report_interval=30,
        aggregated=[{"duration": "5m0s", "usage": {"p95": {"resources": {"cpu": "2"}}}}],
        pods=[
            pod_metric("a", cpu="1", priority="koord-prod"),
            pod_metric("a", cpu="2", priority="koord-batch"),
        ],
    )
    view = parse_node_metric(metric)
    assert view.update_time == NOW - 30
    assert view.report_interval == 30.0
    assert view.node_usage == {"cpu": Fraction(3, 2), "memory": Fraction(2**30)}
    assert view.aggregated == ((300 * 10**9, {"p95": {"cpu": Fraction(2)}}),)
    # A later entry for the same pod wins, as Go's map fill does.
    assert view.pods[("default", "a")].priority == "koord-batch"
    assert view.pods[("default", "a")].usage == {"cpu": Fraction(2)}


def test_view_defaults() -> None:
    view = parse_node_metric(make_metric("n1", age=None, node_metric=False))
    assert view.update_time is None
    assert view.report_interval == 60.0
    assert view.node_usage is None
    assert view.target_aggregated(0, "p95") is None


def agg(duration: str, **by_type: dict[str, str]) -> dict[str, Any]:
    return {"duration": duration, "usage": {t: {"resources": r} for t, r in by_type.items()}}


@pytest.mark.parametrize(
    ("entries", "node_cpu", "duration", "expected_cpu"),
    [
        # Unset: the longest window with a non-empty usage of the type.
        ([agg("5m", p95={"cpu": "1"}), agg("10m", p95={"cpu": "2"}), agg("1h", p50={"cpu": "9"})], "7", 0, 2),
        # Equal longest windows: the first.
        ([agg("10m", p95={"cpu": "3"}), agg("10m", p95={"cpu": "4"})], "7", 0, 3),
        # An empty usage does not count; nor does a window of 0.
        ([agg("10m", p95={}), agg("5m", p95={"cpu": "1"})], "7", 0, 1),
        ([agg("0s", p95={"cpu": "5"})], "7", 0, 7),
        # Nothing of the type: nodeUsage.
        ([agg("10m", p50={"cpu": "1"})], "7", 0, 7),
        # Given: exactly that window ("600s" and "10m" are the same duration).
        ([agg("5m", p95={"cpu": "1"}), agg("600s", p95={"cpu": "2"})], "7", 600 * 10**9, 2),
        ([agg("5m", p95={"cpu": "1"})], "7", 600 * 10**9, None),
        ([agg("10m", p95={})], "7", 600 * 10**9, None),
        # No aggregated usages at all: none, even with the duration unset.
        ([], "7", 0, None),
    ],
)
def test_target_aggregated(
    entries: list[dict[str, Any]], node_cpu: str, duration: int, expected_cpu: int | None
) -> None:
    view = parse_node_metric(make_metric("n1", cpu=node_cpu, aggregated=entries))
    got = view.target_aggregated(duration, "p95")
    assert (None if got is None else got["cpu"]) == expected_cpu


def test_newest_update_time() -> None:
    objs = [make_metric("a", age=50), make_metric("b", age=5), make_metric("c", age=None), "not a metric"]
    assert newest_update_time(objs) == NOW - 5
    assert newest_update_time([make_metric("c", age=None)]) is None


MALFORMED = [
    (
        "node usage",
        {"raw_node_usage": {"resources": {"cpu": "lots"}}},
        "status.nodeMetric.nodeUsage.resources.cpu",
    ),
    (
        "aggregated quantity",
        {"cpu": "1", "aggregated": [agg("5m", p95={"memory": "1Qi"})]},
        "status.nodeMetric.aggregatedNodeUsages[0].usage.p95.resources.memory",
    ),
    (
        "aggregated duration",
        {"cpu": "1", "aggregated": [agg("five minutes", p95={"cpu": "1"})]},
        "status.nodeMetric.aggregatedNodeUsages[0].duration",
    ),
    (
        "pod usage",
        {"cpu": "1", "pods": [pod_metric("a", cpu="-")]},
        "status.podsMetric[0].podUsage.resources.cpu",
    ),
]


@pytest.mark.parametrize(("case", "fields", "where"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_metric_counts_as_none(
    case: str, fields: dict[str, Any], where: str, caplog: pytest.LogCaptureFixture
) -> None:
    c = Cluster()
    c.add_node("bad")
    c.add_node("busy")
    c.set_metric(make_metric("bad", **fields))
    c.set_metric(make_metric("busy", cpu="9"))
    pod = make_pod("p", {"cpu": "1"})
    with caplog.at_level("ERROR"):
        assert c.filter(pod) == {"bad": None, "busy": "node(s) cpu usage exceed threshold"}
        assert c.scores(pod)["bad"] == 0
        c.filter(pod)
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1, errors
    assert errors[0].startswith("NodeMetric bad: ") and where in errors[0]


def test_malformed_update_time_counts_as_none(caplog: pytest.LogCaptureFixture) -> None:
    metric = msgspec.convert(
        {"metadata": {"name": "n1"}, "status": {"updateTime": "yesterday", "nodeMetric": {"nodeUsage": {}}}},
        NodeMetric,
    )
    c = Cluster()
    c.add_node("n1")
    c.set_metric(metric)
    with caplog.at_level("ERROR"):
        assert c.filter(make_pod("p", {"cpu": "1"})) == {"n1": None}
    assert any("yesterday" in r.getMessage() for r in caplog.records)


def test_fixed_metric_is_read_again() -> None:
    c = Cluster()
    c.add_node("n1")
    c.set_metric(make_metric("n1", raw_node_usage={"resources": {"cpu": "lots"}}))
    assert c.filter(make_pod("p", {"cpu": "1"})) == {"n1": None}
    c.set_metric(make_metric("n1", cpu="9"))
    assert c.filter(make_pod("p", {"cpu": "1"})) == {"n1": "node(s) cpu usage exceed threshold"}


def test_unexpected_object_counts_as_none(caplog: pytest.LogCaptureFixture) -> None:
    c = Cluster()
    c.add_node("n1")
    c.handle.store_for(NODE_METRICS)["n1"] = {"status": {}}
    c.snap.touch("n1")
    with caplog.at_level("ERROR"):
        assert c.filter(make_pod("p", {"cpu": "1"})) == {"n1": None}
    assert any("unexpected object" in r.getMessage() for r in caplog.records)
