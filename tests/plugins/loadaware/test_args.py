"""LoadAwareSchedulingArgs: defaults as SetDefaults_LoadAwareSchedulingArgs, validation messages as Go's."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from koordsched.config.catalog import ArgsError
from koordsched.plugins.loadaware import LoadAwareScheduling, LoadAwareSchedulingArgs
from koordsched.plugins.registry import in_tree_registry


def decode(fields: dict[str, Any]) -> LoadAwareSchedulingArgs:
    return msgspec.convert(fields, LoadAwareSchedulingArgs)


def test_defaults() -> None:
    args = LoadAwareSchedulingArgs()
    assert args.filter_expired_node_metrics is True
    assert args.node_metric_expiration_seconds == 180
    assert args.enable_schedule_when_node_metrics_expired is False
    assert args.resource_weights == {"cpu": 1, "memory": 1}
    assert args.usage_thresholds == {"cpu": 65, "memory": 95}
    assert args.prod_usage_thresholds == {}
    assert args.score_according_prod_usage is False
    assert args.estimator == ""
    assert args.estimated_scaling_factors == {"cpu": 85, "memory": 70}
    assert args.aggregated is None
    args.validate()


def test_shipped_profile_args_decode() -> None:
    args = decode(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "LoadAwareSchedulingArgs",
            "filterExpiredNodeMetrics": False,
            "nodeMetricExpirationSeconds": 300,
            "resourceWeights": {"cpu": 1, "memory": 1},
            "usageThresholds": {"cpu": 65, "memory": 95},
            "estimatedScalingFactors": {"cpu": 85, "memory": 70},
        }
    )
    assert args.filter_expired_node_metrics is False
    assert args.node_metric_expiration_seconds == 300
    args.validate()


@pytest.mark.parametrize(
    ("fields", "attr", "expected"),
    [
        # Missing scaling factors are filled with the defaults; given ones stay.
        ({"estimatedScalingFactors": {"cpu": 50}}, "estimated_scaling_factors", {"cpu": 50, "memory": 70}),
        (
            {"estimatedScalingFactors": {"nvidia.com/gpu": 100}},
            "estimated_scaling_factors",
            {"nvidia.com/gpu": 100, "cpu": 85, "memory": 70},
        ),
        # An empty map counts as absent for weights and thresholds.
        ({"usageThresholds": {}}, "usage_thresholds", {"cpu": 65, "memory": 95}),
        ({"resourceWeights": {}}, "resource_weights", {"cpu": 1, "memory": 1}),
        # A given map replaces the default whole (no per-key merge).
        ({"usageThresholds": {"cpu": 70}}, "usage_thresholds", {"cpu": 70}),
        ({"prodUsageThresholds": {"cpu": 50}}, "prod_usage_thresholds", {"cpu": 50}),
    ],
)
def test_defaulting(fields: dict[str, Any], attr: str, expected: Any) -> None:
    assert getattr(decode(fields), attr) == expected


def test_aggregated_args_decode() -> None:
    args = decode(
        {
            "aggregated": {
                "usageThresholds": {"cpu": 60},
                "usageAggregationType": "p95",
                "usageAggregatedDuration": "5m",
                "scoreAggregationType": "p99",
                "scoreAggregatedDuration": "1h",
            }
        }
    )
    args.validate()
    assert args.filter_aggregated is not None and args.filter_aggregated.usage_duration_ns == 300 * 10**9
    assert args.score_aggregated is not None and args.score_aggregated.score_duration_ns == 3600 * 10**9
    # Thresholds without a type (or the reverse) do not turn the aggregated filter on.
    assert decode({"aggregated": {"usageThresholds": {"cpu": 60}}}).filter_aggregated is None
    assert decode({"aggregated": {"usageAggregationType": "p95"}}).filter_aggregated is None


def test_unknown_field_is_refused() -> None:
    with pytest.raises(msgspec.ValidationError, match="usageThreshold"):
        decode({"usageThreshold": {"cpu": 1}})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"nodeMetricExpirationSeconds": 0},
            "nodeMetricExpiredSeconds: Invalid value: 0: nodeMetricExpiredSeconds should be a positive value",
        ),
        (
            {"resourceWeights": {"cpu": 0, "memory": 1}},
            'resourceWeights: Invalid value: map[v1.ResourceName]int64{"cpu":0, "memory":1}: '
            "resource Weight of cpu should be a positive value, got 0",
        ),
        (
            {"resourceWeights": {"cpu": 101}},
            'resourceWeights: Invalid value: map[v1.ResourceName]int64{"cpu":101}: '
            "resource Weight of cpu should be less than 100, got 101",
        ),
        (
            {"usageThresholds": {"memory": -1}},
            'usageThresholds: Invalid value: map[v1.ResourceName]int64{"memory":-1}: '
            "resource Threshold of memory should be a positive value, got -1",
        ),
        (
            {"usageThresholds": {"cpu": 101}},
            'usageThresholds: Invalid value: map[v1.ResourceName]int64{"cpu":101}: '
            "resource Threshold of cpu should be less than 100, got 101",
        ),
        (
            {"estimatedScalingFactors": {"cpu": 0}},
            'estimatedScalingFactors: Invalid value: map[v1.ResourceName]int64{"cpu":0, "memory":70}: '
            "estimated resource ScalingFactor of cpu should be a positive value, got 0",
        ),
        (
            {"estimatedScalingFactors": {"memory": 120}},
            'estimatedScalingFactors: Invalid value: map[v1.ResourceName]int64{"cpu":85, "memory":120}: '
            "estimated resource ScalingFactor of memory should be less than 100, got 120",
        ),
        (
            {"resourceWeights": {"cpu": 1, "nvidia.com/gpu": 1}},
            'estimatedScalingFactors: Not found: "nvidia.com/gpu"',
        ),
        (
            {"aggregated": {"usageAggregationType": "p80"}},
            'aggregated.usageAggregationType: Unsupported value: "p80": '
            'supported values: "avg", "p50", "p90", "p95", "p99"',
        ),
        (
            {"aggregated": {"scoreAggregatedDuration": "-1m"}},
            'aggregated.scoreAggregatedDuration: Invalid value: "-1m": duration must be >= 0',
        ),
        (
            {"aggregated": {"usageThresholds": {"cpu": 120}}},
            'aggregated.usageThresholds: Invalid value: map[v1.ResourceName]int64{"cpu":120}: '
            "resource Threshold of cpu should be less than 100, got 120",
        ),
        (
            {"estimator": "fancy"},
            'estimator: Unsupported value: "fancy": supported values: "defaultEstimator"',
        ),
        # Every problem is reported, in one aggregate.
        (
            {"nodeMetricExpirationSeconds": -5, "usageThresholds": {"cpu": 200}},
            "[nodeMetricExpiredSeconds: Invalid value: -5: "
            "nodeMetricExpiredSeconds should be a positive value, "
            'usageThresholds: Invalid value: map[v1.ResourceName]int64{"cpu":200}: '
            "resource Threshold of cpu should be less than 100, got 200]",
        ),
    ],
)
def test_validation_errors(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ArgsError) as info:
        decode(fields).validate()
    assert str(info.value) == message


def test_malformed_duration_is_an_args_error() -> None:
    with pytest.raises(ArgsError, match=r'aggregated.usageAggregatedDuration: Invalid value: "5 minutes"'):
        decode({"aggregated": {"usageAggregatedDuration": "5 minutes"}}).validate()


@pytest.mark.parametrize(
    "fields",
    [
        {"usageThresholds": {"cpu": 0, "memory": 100}},  # 0 disables a threshold; 100 is allowed
        {"resourceWeights": {"cpu": 100}, "estimatedScalingFactors": {"cpu": 100}},
        {"estimator": "defaultEstimator"},
        {"aggregated": {"usageAggregatedDuration": "0s", "scoreAggregationType": "avg"}},
    ],
)
def test_valid_edges(fields: dict[str, Any]) -> None:
    decode(fields).validate()


def test_plugin_refuses_invalid_args() -> None:
    from tests.fakes import FakeHandle

    with pytest.raises(ArgsError, match="resourceWeights"):
        LoadAwareScheduling(decode({"resourceWeights": {"cpu": -1}}), FakeHandle())


def test_registered_with_its_extension_points() -> None:
    spec = in_tree_registry()["LoadAwareScheduling"]
    assert spec.args_type is LoadAwareSchedulingArgs
    assert {"filter", "score", "reserve"} <= spec.points
    assert "preFilter" not in spec.points
