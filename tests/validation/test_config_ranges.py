"""Config numbers Go's decoder would refuse (int32 and float32 fields, durations past int64
nanoseconds, NaN and infinities) are ConfigErrors naming the field, not values that break the
scheduler later."""

from __future__ import annotations

import pytest

from koordsched.api.durations import MAX_DURATION_SECONDS, DurationError, parse_duration
from koordsched.config.errors import ConfigError
from koordsched.config.load import load_config
from koordsched.plugins.registry import in_tree_registry

HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def load(body: str) -> None:
    load_config((HEAD + body).encode(), in_tree_registry())


@pytest.mark.parametrize(
    ("body", "where", "detail"),
    [
        ("parallelism: 1099511627776\n", "parallelism", "must fit in an int32"),
        ("parallelism: -1099511627776\n", "parallelism", "must fit in an int32"),
        (
            "clientConnection: {qps: .nan}\n",
            "clientConnection.qps",
            "must be a finite float32 number, got nan",
        ),
        (
            "clientConnection: {qps: .inf}\n",
            "clientConnection.qps",
            "must be a finite float32 number, got inf",
        ),
        ("clientConnection: {qps: -.inf}\n", "clientConnection.qps", "must be a finite float32 number"),
        ("clientConnection: {qps: 1.0e+39}\n", "clientConnection.qps", "must be a finite float32 number"),
        ("clientConnection: {qps: -5}\n", "clientConnection.qps", "must not be negative"),
        ("clientConnection: {burst: 4294967296}\n", "clientConnection.burst", "must fit in an int32"),
        (
            "leaderElection: {leaseDuration: 99999999999h}\n",
            "leaderElection.leaseDuration",
            'invalid duration "99999999999h": overflows time.Duration',
        ),
        (
            "leaderElection: {renewDeadline: 2562048h}\n",
            "leaderElection.renewDeadline",
            "overflows time.Duration",
        ),
        (
            "leaderElection: {retryPeriod: 9999999999999999999999999s}\n",
            "leaderElection.retryPeriod",
            "overflows time.Duration",
        ),
        (
            "podInitialBackoffSeconds: 9223372037\n",
            "podInitialBackoffSeconds",
            f"must be at most {MAX_DURATION_SECONDS}",
        ),
        ("podMaxBackoffSeconds: 99999999999999999999\n", "podMaxBackoffSeconds", "must be at most"),
        ("percentageOfNodesToScore: 4294967396\n", "percentageOfNodesToScore", "must be in 0..100"),
        (
            "profiles: [{schedulerName: a, percentageOfNodesToScore: 4294967396}]\n",
            "profiles[0].percentageOfNodesToScore",
            "must be in 0..100",
        ),
        (
            "profiles: [{schedulerName: a, plugins: {score: {enabled: "
            "[{name: NodeResourcesFit, weight: 4294967296}]}}}]\n",
            "profiles[0].plugins.score.enabled[0].weight",
            "must fit in an int32",
        ),
    ],
)
def test_config_numbers_beyond_go_types(body: str, where: str, detail: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(body)
    assert err.value.where == where, err.value
    assert detail in err.value.detail, err.value


@pytest.mark.parametrize(
    ("args", "field", "detail"),
    [
        ("{nodeMetricExpirationSeconds: 99999999999}", "nodeMetricExpiredSeconds", "must be at most"),
        (
            "{aggregated: {usageAggregatedDuration: 99999999999h}}",
            "aggregated.usageAggregatedDuration",
            "overflows",
        ),
        (
            "{aggregated: {scoreAggregatedDuration: 2562048h}}",
            "aggregated.scoreAggregatedDuration",
            "overflows",
        ),
        ("{usageThresholds: {cpu: 9223372036854775808}}", "usageThresholds", "should be less than 100"),
        ("{resourceWeights: {cpu: .nan}}", "resourceWeights", "Expected `int`"),
    ],
)
def test_loadaware_args_beyond_go_types(args: str, field: str, detail: str) -> None:
    body = f"profiles: [{{schedulerName: a, pluginConfig: [{{name: LoadAwareScheduling, args: {args}}}]}}]\n"
    with pytest.raises(ConfigError) as err:
        load(body)
    message = str(err.value)
    assert "profiles[0].pluginConfig[0].args (LoadAwareSchedulingArgs)" in message
    assert field in message and detail in message, message


def test_in_range_values_load() -> None:
    load(
        "parallelism: 2147483647\nclientConnection: {qps: 3.4e+38, burst: 2147483647}\n"
        "podInitialBackoffSeconds: 1\npodMaxBackoffSeconds: 9223372036\n"
        "leaderElection: {leaseDuration: 2562047h, renewDeadline: 2562046h, retryPeriod: 1h}\n"
    )


def test_duration_bounds() -> None:
    assert parse_duration("2562047h47m16.854775807s") == pytest.approx(9223372036.854776)
    assert parse_duration("-2562047h47m16.854775808s") < 0
    for text in ("2562047h47m16.854775808s", "9" * 5000 + "s"):
        with pytest.raises(DurationError, match=r"overflows time\.Duration"):
            parse_duration(text)
