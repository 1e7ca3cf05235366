"""One bad NodeMetric affects only its node: a usage beyond int64 or below zero makes it
unreadable (its node is treated as having no NodeMetric, logged once naming node and field),
and no input, however large, makes LoadAware overflow or score outside 0-100."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from koordsched.api.field_errors import Refused
from koordsched.api.node_metric import MetricError, MetricRangeError, parse_node_metric
from koordsched.backends.sim.runner import simulate
from koordsched.cli import main
from koordsched.plugins.loadaware import kernels
from tests.plugins.loadaware.helpers import Cluster, make_metric, make_pod, pod_metric
from tests.scenario.helpers import WriteYaml
from tests.validation.manifests import cpu_node, dump, node_metric, pod

I64 = "9223372036854775807"
NODE_USAGE_CPU = "status.nodeMetric.nodeUsage.resources.cpu"


@pytest.mark.parametrize(
    ("cpu", "detail"),
    [
        (
            "1e18",
            "usage '1e18' is too large: 1000000000000000000000 millicores is above the int64 maximum " + I64,
        ),
        ("-30", "invalid usage '-30': must not be negative"),
        ("-1m", "invalid usage '-1m': must not be negative"),
    ],
)
def test_bad_usage_is_a_range_error_naming_the_field(cpu: str, detail: str) -> None:
    with pytest.raises(MetricRangeError) as err:
        parse_node_metric(make_metric("n", cpu=cpu, memory="1Gi"))
    assert isinstance(err.value, Refused) and isinstance(err.value, MetricError)
    assert str(err.value) == f"{NODE_USAGE_CPU}: {detail}"


def test_pod_usage_beyond_int64_is_refused_too() -> None:
    metric = make_metric("n", cpu="1", memory="1Gi", pods=[pod_metric("p", memory="9Ei")])
    with pytest.raises(MetricRangeError, match=r"status\.podsMetric\[0\]\.podUsage\.resources\.memory"):
        parse_node_metric(metric)


@pytest.mark.parametrize("cpu", ["1e18", "-30"])
def test_one_bad_node_metric_affects_only_its_node(
    write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str], cpu: str
) -> None:
    path = write_yaml(
        dump(
            cpu_node("bad"),
            cpu_node("good"),
            node_metric("bad", cpu=cpu),
            node_metric("good", cpu="1"),
            pod("p1"),
            pod("p2"),
            pod("p3"),
        )
    )
    result = simulate([path])
    for name in ("p1", "p2", "p3"):
        p = result.pod(f"default/{name}")
        assert p.status == "Scheduled", p.message
    (warning,) = [w for w in result.warnings if "NodeMetric bad" in w]
    assert f"(NodeMetric bad): {NODE_USAGE_CPU}: " in warning
    assert warning.endswith("LoadAwareScheduling treats its node as having no NodeMetric")
    assert main(["simulate", str(path)]) == 0
    assert "warning: " + warning in capsys.readouterr().err


def test_bad_node_metric_is_logged_once_naming_node_and_field(caplog: pytest.LogCaptureFixture) -> None:
    c = Cluster()
    c.add_node("bad")
    c.add_node("good")
    c.set_metric(make_metric("bad", cpu="-30", memory="1Gi"))
    c.set_metric(make_metric("good", cpu="1", memory="1Gi"))
    pod = make_pod("p", {"cpu": "1", "memory": "1Gi"})
    with caplog.at_level(logging.ERROR):
        for _ in range(3):
            assert c.filter(pod) == {"bad": None, "good": None}
            scores = c.scores(pod)
            assert scores["bad"] == 0 and 0 < scores["good"] <= 100
    logged = [r.getMessage() for r in caplog.records if "NodeMetric bad" in r.getMessage()]
    assert len(logged) == 1
    assert NODE_USAGE_CPU in logged[0] and "no metric" in logged[0]


@pytest.mark.parametrize(
    ("cpu", "alloc", "requests"),
    [
        ("9223372036854775807m", "10", "1"),  # usage at int64: plus any estimate overflowed
        ("9000000000000000", "9223372036854775807m", "1"),  # 9e18 millicores on a huge node
        ("1", "10", "9223372036854775807m"),  # a pending pod asking int64
    ],
)
def test_extreme_values_never_overflow_or_leave_0_100(cpu: str, alloc: str, requests: str) -> None:
    c = Cluster()
    c.add_node("n", cpu=alloc)
    c.set_metric(make_metric("n", cpu=cpu, memory="1Gi"))
    pod = make_pod("p", {"cpu": requests, "memory": "1Gi"}, limits={"cpu": "1e30"})
    c.filter(pod)
    assert 0 <= c.scores(pod)["n"] <= 100


def test_score_kernel_clamps_a_negative_base() -> None:
    one = np.ones(1, dtype=np.bool_)
    scores = kernels.score_rows(
        np.zeros(1, dtype=np.int64),
        one,
        np.zeros(1, dtype=np.float64),
        one,
        np.full((1, 1), 10, dtype=np.int64),
        np.full((1, 1), -30_000, dtype=np.int64),
        np.ones(1, dtype=np.int64),
        np.ones(1, dtype=np.int64),
        0.0,
        0.0,
    )
    assert scores.tolist() == [100]


def test_malformed_usage_is_still_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(dump(cpu_node("n"), node_metric("n", cpu="lots")))
    assert main(["simulate", str(path)]) == 2
    assert f"(NodeMetric n): {NODE_USAGE_CPU}: invalid quantity 'lots'" in capsys.readouterr().err
