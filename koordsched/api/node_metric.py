"""NodeMetric objects (``slo.koordinator.sh/v1alpha1``) parsed into exact usages (spec 3.6).

A :class:`MetricView` holds exact quantities (``Fraction``) so that sums and differences
round exactly where Go's ``resource.Quantity`` arithmetic does: only when a value is read
(``getResourceValue``: millicores, rounded up, for ``cpu``; ``Value()`` otherwise).

A NodeMetric with a malformed quantity, duration or timestamp raises :class:`MetricError`
naming the field; LoadAwareScheduling then treats it as absent (see its ``NodeMetricStore``),
and the simulator refuses it as input. A well-formed usage that cannot be one (negative, or
beyond int64 once read as Go reads it, ``cpu: "1e18"`` being 10^21 millicores) raises
:class:`MetricRangeError`: the node is treated as having no NodeMetric as well, and the
simulator warns and goes on, since a cluster can hold such an object. Without this, one
such NodeMetric failed every pod's cycle (an int64 overflow, or a score outside 0-100).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, Final

from koordsched.api.core import ResourceList
from koordsched.api.durations import DurationError, duration_ns
from koordsched.api.field_errors import Refused
from koordsched.api.priority import PRIORITY_PROD
from koordsched.api.quantity import INT64_MAX, QuantityError, describe_int, parse_quantity, show_quantity
from koordsched.api.slo import NodeMetric

#: ``DefaultNodeMetricReportInterval``: koordlet's reporting period when the spec has none.
DEFAULT_REPORT_INTERVAL: Final = 60.0

Usage = dict[str, Fraction]


class MetricError(ValueError):
    """A NodeMetric LoadAware cannot read; the message names the field."""


class MetricRangeError(MetricError, Refused):
    """A well-formed usage no node can have (negative, or beyond int64); the message names the field."""


def parse_time(text: str) -> float:
    """An RFC 3339 timestamp (``metav1.Time``) as Unix seconds; a zone-less one is read as UTC."""
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise MetricError(f"invalid RFC 3339 time {text!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def resource_value(name: str, amount: Fraction) -> int:
    """``getResourceValue``: millicores for cpu, ``Value()`` for anything else, both rounded up."""
    return math.ceil(amount * 1000) if name == "cpu" else math.ceil(amount)


def _usage(resources: ResourceList, where: str) -> Usage:
    out: Usage = {}
    for name, q in resources.items():
        try:
            amount = parse_quantity(q)
        except QuantityError as err:
            # Thousands of digits, or an exponent past 9999: well-formed, too large to be a usage.
            raise (MetricRangeError if err.too_large else MetricError)(f"{where}.{name}: {err}") from None
        if amount < 0:
            raise MetricRangeError(f"{where}.{name}: invalid usage {show_quantity(q)}: must not be negative")
        value = resource_value(name, amount)
        if value > INT64_MAX:
            unit = "millicores" if name == "cpu" else "units"
            raise MetricRangeError(
                f"{where}.{name}: usage {show_quantity(q)} is too large: {describe_int(value)} {unit} "
                f"is above the int64 maximum {INT64_MAX}"
            )
        out[name] = amount
    return out


@dataclass(frozen=True, slots=True)
class PodUsage:
    #: The priority class koordlet reported for the pod (``koord-prod``, ...).
    priority: str
    usage: Usage


@dataclass(frozen=True, slots=True)
class MetricView:
    #: Unix seconds of ``status.updateTime``; None when koordlet has not reported.
    update_time: float | None
    #: ``spec.metricCollectPolicy.reportIntervalSeconds``, 60 s when absent.
    report_interval: float
    #: ``status.nodeMetric.nodeUsage``; None when ``status.nodeMetric`` is nil.
    node_usage: Usage | None
    #: ``aggregatedNodeUsages`` in order: (window in ns, aggregation type -> usage).
    aggregated: tuple[tuple[int, Mapping[str, Usage]], ...]
    #: (namespace, name) -> the pod's reported usage; a later entry for a name wins, as in Go.
    pods: Mapping[tuple[str, str], PodUsage]
    #: ``pods`` without the priorities: every pod's usage, and the koord-prod pods' alone.
    pod_usages: Mapping[tuple[str, str], Usage] = field(default_factory=dict)
    prod_pod_usages: Mapping[tuple[str, str], Usage] = field(default_factory=dict)

    def target_aggregated(self, duration: int, agg_type: str) -> Usage | None:
        """``getTargetAggregatedUsage``: the usage over the window ``duration`` (ns) of ``agg_type``.

        Duration 0 takes the longest window with a non-empty usage of the type, falling back
        to ``nodeUsage`` when it is non-empty; a given duration takes the first window of
        exactly that length with a non-empty usage. None when nothing matches, or when the
        NodeMetric has no aggregated usages at all.
        """
        if self.node_usage is None or not self.aggregated:
            return None
        if duration == 0:
            best: Usage | None = None
            longest = 0
            for window, by_type in self.aggregated:
                usage = by_type.get(agg_type)
                if usage and window > longest:
                    longest, best = window, usage
            if best is not None:
                return best
            return self.node_usage or None
        for window, by_type in self.aggregated:
            usage = by_type.get(agg_type)
            if window == duration and usage:
                return usage
        return None


#: Node name -> (the NodeMetric last parsed, its view or error). The scheduler checks a NodeMetric
#: as it arrives and LoadAware reads the same object right after: it is parsed once.
_LAST: dict[str, tuple[NodeMetric, MetricView | MetricError]] = {}
_LAST_MAX: Final = 1 << 16


def parse_node_metric(metric: NodeMetric) -> MetricView:
    """The view of one NodeMetric; raises :class:`MetricError` naming the malformed field."""
    name = metric.metadata.name
    known = _LAST.get(name)
    if known is not None and known[0] is metric:
        if isinstance(known[1], MetricError):
            raise type(known[1])(str(known[1]))  # a fresh one: a raised error keeps its traceback
        return known[1]
    try:
        view: MetricView | MetricError = _parse(metric)
    except MetricError as err:
        view = err
    if len(_LAST) >= _LAST_MAX:
        _LAST.clear()
    _LAST[name] = (metric, view)
    if isinstance(view, MetricError):
        raise view
    return view


def _parse(metric: NodeMetric) -> MetricView:
    status = metric.status
    update_time = parse_time(status.update_time) if status.update_time else None
    policy = metric.spec.metric_collect_policy
    interval = DEFAULT_REPORT_INTERVAL
    if policy is not None and policy.report_interval_seconds is not None:
        interval = float(policy.report_interval_seconds)
    node_usage: Usage | None = None
    aggregated: list[tuple[int, Mapping[str, Usage]]] = []
    info = status.node_metric
    if info is not None:
        node_usage = _usage(info.node_usage.resources, "status.nodeMetric.nodeUsage.resources")
        for i, entry in enumerate(info.aggregated_node_usages):
            where = f"status.nodeMetric.aggregatedNodeUsages[{i}]"
            try:
                window = duration_ns(entry.duration)
            except DurationError as err:
                raise MetricError(f"{where}.duration: {err}") from None
            by_type = {t: _usage(m.resources, f"{where}.usage.{t}.resources") for t, m in entry.usage.items()}
            aggregated.append((window, by_type))
    pods: dict[tuple[str, str], PodUsage] = {}
    for i, pm in enumerate(status.pods_metric):
        usage = _usage(pm.pod_usage.resources, f"status.podsMetric[{i}].podUsage.resources")
        pods[(pm.namespace, pm.name)] = PodUsage(pm.priority, usage)
    return MetricView(
        update_time,
        interval,
        node_usage,
        tuple(aggregated),
        pods,
        {key: pu.usage for key, pu in pods.items()},
        {key: pu.usage for key, pu in pods.items() if pu.priority == PRIORITY_PROD},
    )


def newest_update_time(objects: Iterable[Any]) -> float | None:
    """The latest ``status.updateTime`` (Unix seconds) among NodeMetric objects; None if none has one.

    The simulator starts its wall clock there, so the metrics of a cluster file are fresh at
    the start of every run. Unreadable timestamps are skipped (the plugin reports them).
    """
    newest: float | None = None
    for obj in objects:
        if not isinstance(obj, NodeMetric) or not obj.status.update_time:
            continue
        try:
            t = parse_time(obj.status.update_time)
        except MetricError:
            continue
        if newest is None or t > newest:
            newest = t
    return newest
