"""``LowNodeLoadArgs``: fields, Koordinator's defaults (``SetDefaults_LowNodeLoadArgs``) and
validation (``ValidateLowLoadUtilizationArgs``, messages as Go's field errors print them).

The top-level threshold fields become an implicit first node pool (:meth:`LowNodeLoadArgs.pools`);
a pool without an anomaly condition or weights takes the top-level ones. Beyond Koordinator's
checks, thresholds over 100 % and a prod low threshold above its prod high one are refused
(they could never classify a node), as is a non-positive ``nodeMetricExpirationSeconds``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import msgspec

from koordsched.api.core import LabelSelector
from koordsched.api.durations import DurationError, parse_duration
from koordsched.api.selectors import SelectorError, validate_label_selector
from koordsched.config.catalog import PluginArgs
from koordsched.descheduler.plugins.common import Namespaces, namespaces_errors
from koordsched.plugins.helper import invalid, raise_field_errors

DEFAULT_EXPIRATION_SECONDS: Final = 180
DEFAULT_DETECTOR_CACHE_TIMEOUT: Final = "5m"
_ARGS = "LowNodeLoadArgs"


class _Part(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    pass


class LoadAnomalyCondition(_Part):
    timeout: str | None = None
    consecutive_abnormalities: int = 0
    consecutive_normalities: int = 0


def default_anomaly_condition() -> LoadAnomalyCondition:
    return LoadAnomalyCondition(timeout="1m", consecutive_abnormalities=5, consecutive_normalities=3)


UINT32_MAX: Final = 2**32 - 1


class PodSelector(_Part):
    name: str = ""
    selector: LabelSelector | None = None


class NodePool(_Part):
    name: str = ""
    node_selector: LabelSelector | None = None
    use_deviation_thresholds: bool = False
    high_thresholds: dict[str, float] = {}
    low_thresholds: dict[str, float] = {}
    prod_high_thresholds: dict[str, float] = {}
    prod_low_thresholds: dict[str, float] = {}
    resource_weights: dict[str, int] = {}
    anomaly_condition: LoadAnomalyCondition | None = None


@dataclass(frozen=True)
class Pool:
    """A node pool with its defaults applied: what the balance loop reads."""

    name: str
    node_selector: LabelSelector | None
    use_deviation: bool
    high: dict[str, float]
    low: dict[str, float]
    prod_high: dict[str, float]
    prod_low: dict[str, float]
    weights: dict[str, int]
    #: (timeout seconds, consecutive abnormalities, consecutive normalities)
    anomaly: tuple[float, int, int]


class LowNodeLoadArgs(PluginArgs):
    paused: bool = False
    dry_run: bool = False
    number_of_nodes: int = 0
    node_metric_expiration_seconds: int = DEFAULT_EXPIRATION_SECONDS
    evictable_namespaces: Namespaces | None = None
    node_selector: LabelSelector | None = None
    pod_selectors: list[PodSelector] = []
    node_fit: bool = True
    use_deviation_thresholds: bool = False
    high_thresholds: dict[str, float] = {}
    low_thresholds: dict[str, float] = {}
    prod_high_thresholds: dict[str, float] = {}
    prod_low_thresholds: dict[str, float] = {}
    resource_weights: dict[str, int] = {}
    anomaly_condition: LoadAnomalyCondition | None = None
    detector_cache_timeout: str | None = None
    node_pools: list[NodePool] = []

    def weights(self, extra: dict[str, float] | None = None) -> dict[str, int]:
        """Defaults: 1 for cpu, memory and every threshold resource; non-positive entries become 1."""
        out = dict(self.resource_weights)
        names = {"cpu", "memory", *self.low_thresholds, *self.high_thresholds, *(extra or {})}
        for name in names:
            if out.get(name, 0) <= 0:
                out[name] = 1
        return out

    def anomaly(self, cond: LoadAnomalyCondition | None = None) -> tuple[float, int, int]:
        c = cond or self.anomaly_condition or default_anomaly_condition()
        timeout = parse_duration(c.timeout) if c.timeout else 60.0
        abnormal = c.consecutive_abnormalities or 5
        return timeout, abnormal, c.consecutive_normalities

    def detector_timeout(self) -> float:
        return parse_duration(self.detector_cache_timeout or DEFAULT_DETECTOR_CACHE_TIMEOUT)

    def pools(self) -> list[Pool]:
        """The top-level thresholds as the first pool (when any is set), then ``nodePools``."""
        out: list[Pool] = []
        if (
            self.high_thresholds
            or self.low_thresholds
            or self.prod_high_thresholds
            or self.prod_low_thresholds
        ):
            out.append(
                Pool(
                    "",
                    None,
                    self.use_deviation_thresholds,
                    dict(self.high_thresholds),
                    dict(self.low_thresholds),
                    dict(self.prod_high_thresholds),
                    dict(self.prod_low_thresholds),
                    self.weights(),
                    self.anomaly(),
                )
            )
        for p in self.node_pools:
            weights = dict(p.resource_weights) if p.resource_weights else self.weights()
            for name in {"cpu", "memory", *p.low_thresholds, *p.high_thresholds}:
                if weights.get(name, 0) <= 0:
                    weights[name] = 1
            out.append(
                Pool(
                    p.name,
                    p.node_selector,
                    p.use_deviation_thresholds,
                    dict(p.high_thresholds),
                    dict(p.low_thresholds),
                    dict(p.prod_high_thresholds),
                    dict(p.prod_low_thresholds),
                    weights,
                    self.anomaly(p.anomaly_condition),
                )
            )
        return out

    def validate(self) -> None:
        errs: list[str] = []
        if self.number_of_nodes < 0:
            errs.append(
                invalid(f"{_ARGS}.numberOfNodes", self.number_of_nodes, "must be greater than or equal to 0")
            )
        if self.node_metric_expiration_seconds <= 0:
            errs.append(
                invalid(
                    f"{_ARGS}.nodeMetricExpirationSeconds",
                    self.node_metric_expiration_seconds,
                    "must be greater than 0",
                )
            )
        errs += namespaces_errors(f"{_ARGS}.evictableNamespaces", self.evictable_namespaces)
        errs += _selector_errors(f"{_ARGS}.nodeSelector", self.node_selector)
        for i, ps in enumerate(self.pod_selectors):
            errs += _selector_errors(f"{_ARGS}.podSelectors[{i}]", ps.selector)
        errs += _threshold_errors(
            _ARGS,
            self.high_thresholds,
            self.low_thresholds,
            self.prod_high_thresholds,
            self.prod_low_thresholds,
        )
        errs += _anomaly_errors(f"{_ARGS}.anomalyCondition", self.anomaly_condition)
        if self.detector_cache_timeout is not None:
            errs += _duration_errors(f"{_ARGS}.detectorCacheTimeout", self.detector_cache_timeout)
        top = (
            self.high_thresholds
            or self.low_thresholds
            or self.prod_high_thresholds
            or self.prod_low_thresholds
        )
        if self.node_pools and top:
            # The implicit pool from the top-level thresholds would select every node first and
            # leave the listed pools nothing: refused rather than silently unused.
            errs.append(
                invalid(
                    f"{_ARGS}.nodePools",
                    len(self.node_pools),
                    "set the thresholds in each node pool, not also at the top level",
                )
            )
        for i, pool in enumerate(self.node_pools):
            path = f"{_ARGS}.nodePools[{i}]"
            errs += _selector_errors(f"{path}.nodeSelector", pool.node_selector)
            errs += _threshold_errors(
                path,
                pool.high_thresholds,
                pool.low_thresholds,
                pool.prod_high_thresholds,
                pool.prod_low_thresholds,
            )
            errs += _anomaly_errors(f"{path}.anomalyCondition", pool.anomaly_condition)
        raise_field_errors(errs)


def _selector_errors(path: str, sel: LabelSelector | None) -> list[str]:
    try:
        validate_label_selector(sel)
    except SelectorError as err:
        return [f"{path}: Invalid value: {err}"]
    return []


def _duration_errors(path: str, text: str) -> list[str]:
    try:
        seconds = parse_duration(text)
    except DurationError as err:
        return [f"{path}: {err}"]
    if seconds < 0:
        return [invalid(path, text, "must not be negative")]
    return []


def _anomaly_errors(path: str, cond: LoadAnomalyCondition | None) -> list[str]:
    if cond is None:
        return []
    errs: list[str] = []
    if cond.timeout is not None:
        errs += _duration_errors(f"{path}.timeout", cond.timeout)
    if cond.consecutive_abnormalities < 0:
        errs.append(
            invalid(
                f"{path}.consecutiveAbnormalities",
                cond.consecutive_abnormalities,
                "consecutiveAbnormalities must be greater than 0",
            )
        )
    for name, value in (
        ("consecutiveAbnormalities", cond.consecutive_abnormalities),
        ("consecutiveNormalities", cond.consecutive_normalities),
    ):
        if value > UINT32_MAX:
            # uint32 in Koordinator's types: a larger number does not decode there.
            errs.append(invalid(f"{path}.{name}", value, f"must be less than or equal to {UINT32_MAX}"))
    if cond.consecutive_normalities < 0:
        errs.append(
            invalid(f"{path}.consecutiveNormalities", cond.consecutive_normalities, "must not be negative")
        )
    return errs


def _threshold_errors(
    path: str,
    high: dict[str, float],
    low: dict[str, float],
    prod_high: dict[str, float],
    prod_low: dict[str, float],
) -> list[str]:
    errs: list[str] = []

    def shown(v: float) -> object:
        if not math.isfinite(v):
            return _GoFloat(v)
        return int(v) if float(v).is_integer() else v  # Go's %v prints 80, not 80.0

    for field, values in (
        ("highThresholds", high),
        ("lowThresholds", low),
        ("prodHighThresholds", prod_high),
        ("prodLowThresholds", prod_low),
    ):
        for name, pct in sorted(values.items()):
            if math.isnan(pct):
                # Every comparison with NaN is false: Koordinator's range check lets it through and
                # the usage arithmetic fails on it; refused here with the others.
                errs.append(
                    invalid(
                        f"{path}.{field}[{name}]", shown(pct), "percentage must be a number between 0 and 100"
                    )
                )
            elif pct < 0:
                errs.append(
                    invalid(
                        f"{path}.{field}[{name}]", shown(pct), "percentage must be greater than or equal to 0"
                    )
                )
            elif pct > 100:
                errs.append(
                    invalid(
                        f"{path}.{field}[{name}]", shown(pct), "percentage must be less than or equal to 100"
                    )
                )
    for lo_field, lo, hi in (("lowThresholds", low, high), ("prodLowThresholds", prod_low, prod_high)):
        for name, pct in sorted(lo.items()):
            if name in hi and pct > hi[name]:  # False when either is NaN (refused above)
                hi_field = "highThresholds" if lo_field == "lowThresholds" else "prodHighThresholds"
                errs.append(
                    invalid(
                        f"{path}.{lo_field}[{name}]",
                        shown(pct),
                        f"low percentage must be less than or equal to {hi_field}",
                    )
                )
    return errs


class _GoFloat:
    """A non-finite float64 as Go's ``%v`` prints it in a field error (``NaN``, ``+Inf``, ``-Inf``)."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __str__(self) -> str:
        if math.isnan(self.value):
            return "NaN"
        return "+Inf" if self.value > 0 else "-Inf"
