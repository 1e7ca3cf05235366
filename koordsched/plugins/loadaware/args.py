"""LoadAwareSchedulingArgs (Koordinator v1.6, spec 4.6 "Args"): defaults and validation.

Defaults follow ``SetDefaults_LoadAwareSchedulingArgs``: expired metrics are filtered, they
expire after 180 s, weights cpu/memory 1/1, thresholds cpu 65 % and memory 95 % (an empty
map counts as absent), scaling factors cpu 85 % and memory 70 % with missing keys filled in.
Validation follows ``ValidateLoadAwareSchedulingArgs``: field paths and messages as Go
prints them, values printed with Go's ``%#v`` as ``field.Invalid`` does for maps. Beyond the
four checks the spec lists, it also refuses a non-positive ``nodeMetricExpirationSeconds``
(Koordinator has that check before and after v1.6), an aggregation type that is not one of
koordlet's (``avg``, ``p50``, ``p90``, ``p95``, ``p99``; such a type never matches a metric,
so the setting would silently do nothing), a negative or malformed aggregation duration, and
an estimator other than the default one (Koordinator fails to build the plugin then).
"""

from __future__ import annotations

from typing import Final

import msgspec

from koordsched.api.durations import MAX_DURATION_SECONDS, DurationError, duration_ns
from koordsched.api.slo import AGGREGATION_TYPES
from koordsched.config.catalog import PluginArgs
from koordsched.plugins.helper import invalid, raise_field_errors, unsupported

DEFAULT_EXPIRATION_SECONDS: Final = 180
DEFAULT_ESTIMATOR: Final = "defaultEstimator"
_MAX_PERCENT: Final = 100


def default_resource_weights() -> dict[str, int]:
    return {"cpu": 1, "memory": 1}


def default_usage_thresholds() -> dict[str, int]:
    return {"cpu": 65, "memory": 95}


def default_scaling_factors() -> dict[str, int]:
    return {"cpu": 85, "memory": 70}


class _Part(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    pass


class LoadAwareSchedulingAggregatedArgs(_Part):
    usage_thresholds: dict[str, int] = {}
    #: ``avg|p50|p90|p95|p99``; empty: the filter does not use aggregated usage.
    usage_aggregation_type: str = ""
    #: A Go duration (``5m``); unset or 0: the longest window the NodeMetric has.
    usage_aggregated_duration: str | None = None
    #: Empty: the score uses ``nodeUsage``.
    score_aggregation_type: str = ""
    score_aggregated_duration: str | None = None

    @property
    def filter_enabled(self) -> bool:
        """``filterWithAggregation``: thresholds and a type are both given."""
        return bool(self.usage_thresholds) and self.usage_aggregation_type != ""

    @property
    def score_enabled(self) -> bool:
        """``scoreWithAggregation``."""
        return self.score_aggregation_type != ""

    @property
    def usage_duration_ns(self) -> int:
        return duration_ns(self.usage_aggregated_duration)

    @property
    def score_duration_ns(self) -> int:
        return duration_ns(self.score_aggregated_duration)


class LoadAwareSchedulingArgs(PluginArgs):
    filter_expired_node_metrics: bool | None = None
    node_metric_expiration_seconds: int | None = None
    enable_schedule_when_node_metrics_expired: bool | None = None
    resource_weights: dict[str, int] = {}
    usage_thresholds: dict[str, int] = {}
    prod_usage_thresholds: dict[str, int] = {}
    score_according_prod_usage: bool | None = None
    estimator: str = ""
    estimated_scaling_factors: dict[str, int] | None = None
    aggregated: LoadAwareSchedulingAggregatedArgs | None = None

    def __post_init__(self) -> None:
        if self.filter_expired_node_metrics is None:
            self.filter_expired_node_metrics = True
        if self.enable_schedule_when_node_metrics_expired is None:
            self.enable_schedule_when_node_metrics_expired = False
        if self.node_metric_expiration_seconds is None:
            self.node_metric_expiration_seconds = DEFAULT_EXPIRATION_SECONDS
        if self.score_according_prod_usage is None:
            self.score_according_prod_usage = False
        if not self.resource_weights:
            self.resource_weights = default_resource_weights()
        if not self.usage_thresholds:
            self.usage_thresholds = default_usage_thresholds()
        if self.estimated_scaling_factors is None:
            self.estimated_scaling_factors = default_scaling_factors()
        else:
            for name, factor in default_scaling_factors().items():
                self.estimated_scaling_factors.setdefault(name, factor)

    # --- defaulted views (never None after __post_init__) -----------------------------------

    @property
    def filter_expired(self) -> bool:
        return bool(self.filter_expired_node_metrics)

    @property
    def schedule_when_expired(self) -> bool:
        return bool(self.enable_schedule_when_node_metrics_expired)

    @property
    def expiration_seconds(self) -> int:
        return self.node_metric_expiration_seconds or 0

    @property
    def score_by_prod_usage(self) -> bool:
        return bool(self.score_according_prod_usage)

    @property
    def scaling_factors(self) -> dict[str, int]:
        return self.estimated_scaling_factors or {}

    @property
    def filter_aggregated(self) -> LoadAwareSchedulingAggregatedArgs | None:
        """``args.aggregated`` when the filter uses it (thresholds and a type), else None."""
        agg = self.aggregated
        return agg if agg is not None and agg.filter_enabled else None

    @property
    def score_aggregated(self) -> LoadAwareSchedulingAggregatedArgs | None:
        agg = self.aggregated
        return agg if agg is not None and agg.score_enabled else None

    def validate(self) -> None:
        errors: list[str] = []
        exp = self.node_metric_expiration_seconds
        if exp is not None and exp <= 0:
            # Go names the field by its old name here.
            errors.append(
                invalid(
                    "nodeMetricExpiredSeconds", exp, "nodeMetricExpiredSeconds should be a positive value"
                )
            )
        elif exp is not None and exp > MAX_DURATION_SECONDS:
            # Go multiplies it by time.Second, which overflows silently.
            errors.append(
                invalid(
                    "nodeMetricExpiredSeconds",
                    exp,
                    f"must be at most {MAX_DURATION_SECONDS} (the longest time.Duration in seconds)",
                )
            )
        problem = _percent_problem(self.resource_weights, "resource Weight", allow_zero=False)
        if problem:
            errors.append(invalid_map("resourceWeights", self.resource_weights, problem))
        problem = _percent_problem(self.usage_thresholds, "resource Threshold", allow_zero=True)
        if problem:
            errors.append(invalid_map("usageThresholds", self.usage_thresholds, problem))
        factors = self.scaling_factors
        problem = _percent_problem(factors, "estimated resource ScalingFactor", allow_zero=False)
        if problem:
            errors.append(invalid_map("estimatedScalingFactors", factors, problem))
        for name in self.resource_weights:
            if name not in factors:
                errors.append(f'estimatedScalingFactors: Not found: "{name}"')
                break
        if self.aggregated is not None:
            errors.extend(_validate_aggregated(self.aggregated, "aggregated"))
        if self.estimator not in ("", DEFAULT_ESTIMATOR):
            errors.append(unsupported("estimator", self.estimator, (DEFAULT_ESTIMATOR,)))
        raise_field_errors(errors)


def _percent_problem(values: dict[str, int], what: str, *, allow_zero: bool) -> str:
    """Go's message for the first value outside (0, 100] (or [0, 100] with ``allow_zero``), else ""."""
    for name, value in values.items():
        if value < 0 or (value == 0 and not allow_zero):
            return f"{what} of {name} should be a positive value, got {value}"
        if value > _MAX_PERCENT:
            return f"{what} of {name} should be less than 100, got {value}"
    return ""


def go_resource_map(values: dict[str, int]) -> str:
    """A ``map[corev1.ResourceName]int64`` as Go's ``%#v`` prints it (keys sorted)."""
    body = ", ".join(f'"{k}":{values[k]}' for k in sorted(values))
    return f"map[v1.ResourceName]int64{{{body}}}"


def invalid_map(path: str, values: dict[str, int], detail: str) -> str:
    return f"{path}: Invalid value: {go_resource_map(values)}: {detail}"


def _validate_aggregated(agg: LoadAwareSchedulingAggregatedArgs, path: str) -> list[str]:
    errors: list[str] = []
    problem = _percent_problem(agg.usage_thresholds, "resource Threshold", allow_zero=True)
    if problem:
        errors.append(invalid_map(f"{path}.usageThresholds", agg.usage_thresholds, problem))
    for field, agg_type, duration in (
        ("usage", agg.usage_aggregation_type, agg.usage_aggregated_duration),
        ("score", agg.score_aggregation_type, agg.score_aggregated_duration),
    ):
        if agg_type and agg_type not in AGGREGATION_TYPES:
            errors.append(unsupported(f"{path}.{field}AggregationType", agg_type, AGGREGATION_TYPES))
        try:
            ns = duration_ns(duration)
        except DurationError as err:
            errors.append(invalid(f"{path}.{field}AggregatedDuration", duration, str(err)))
            continue
        if ns < 0:
            errors.append(invalid(f"{path}.{field}AggregatedDuration", duration, "duration must be >= 0"))
    return errors
