"""Node usage, per-node thresholds and classification for one node pool (spec 7.1 steps 1-3).

Amounts are canonical integers (millicores for cpu, bytes, pod counts), as the scheduler's
columns are. A node's total is its ``raw-allocatable`` annotation when readable, else its
allocatable. Usage is the NodeMetric's ``nodeUsage``; prod usage is the sum over the node's
koord-prod pods (by class, with its default) of their reported usage; ``pods`` counts them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

from koordsched.api.core import Node, Pod
from koordsched.api.node_metric import MetricError, MetricView, parse_node_metric, resource_value
from koordsched.api.priority import PRIORITY_PROD, priority_class_with_default
from koordsched.api.quantity import QuantityError
from koordsched.api.resources import resource_list
from koordsched.api.slo import NodeMetric
from koordsched.descheduler.plugins.lownodeload.args import Pool

log = logging.getLogger(__name__)

PODS: Final = "pods"
#: ``node.koordinator.sh/raw-allocatable``: the node's allocatable before amplification.
ANNOTATION_RAW_ALLOCATABLE: Final = "node.koordinator.sh/raw-allocatable"

Amounts = dict[str, int]


@dataclass
class NodeUsage:
    node: Node
    pods: list[Pod]
    prod_pods: list[Pod]
    allocatable: Amounts
    usage: Amounts
    prod_usage: Amounts
    #: (namespace, name) -> the pod's reported usage.
    pod_metrics: dict[tuple[str, str], Amounts]
    low: Amounts = field(default_factory=dict)
    high: Amounts = field(default_factory=dict)
    prod_low: Amounts = field(default_factory=dict)
    prod_high: Amounts = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.node.metadata.name


def node_total(node: Node) -> Amounts:
    """``GetNodeRawAllocatableFromNode``: the raw-allocatable annotation, else allocatable."""
    raw = node.metadata.annotations.get(ANNOTATION_RAW_ALLOCATABLE)
    if raw:
        try:
            data = json.loads(raw)
            if isinstance(data, dict):
                return resource_list(data)
            raise ValueError("not a JSON object")
        except (ValueError, QuantityError, TypeError) as err:
            log.warning(
                "node %s: invalid %s, its allocatable is used: %s",
                node.metadata.name,
                ANNOTATION_RAW_ALLOCATABLE,
                err,
            )
    try:
        return resource_list(node.status.allocatable)
    except QuantityError:
        return {}


def metric_view(metric: NodeMetric | None, now: float, expiration: float) -> MetricView | None:
    """The NodeMetric's view when it is usable: present, readable, reported and not expired."""
    if metric is None:
        return None
    try:
        view = parse_node_metric(metric)
    except MetricError as err:
        log.warning("NodeMetric %s cannot be read, its node is skipped: %s", metric.metadata.name, err)
        return None
    if view.node_usage is None or view.update_time is None:
        return None
    if expiration > 0 and now - view.update_time >= expiration:
        return None
    return view


def _amounts(usage: Mapping[str, Fraction], names: Sequence[str]) -> Amounts:
    return {n: resource_value(n, usage[n]) if n in usage else 0 for n in names}


def node_usage(node: Node, pods: list[Pod], view: MetricView, names: Sequence[str]) -> NodeUsage:
    assert view.node_usage is not None
    usage = _amounts(view.node_usage, names)
    prod_pods = [p for p in pods if priority_class_with_default(p, p.spec.priority or 0) == PRIORITY_PROD]
    pod_metrics = {key: _amounts(u, names) for key, u in view.pod_usages.items()}
    prod_usage = {n: 0 for n in names}
    for p in prod_pods:
        m = pod_metrics.get((p.metadata.namespace, p.metadata.name))
        if m is not None:
            for n in names:
                prod_usage[n] += m.get(n, 0)
    usage[PODS] = len(pods)
    prod_usage[PODS] = len(prod_pods)
    return NodeUsage(node, pods, prod_pods, node_total(node), usage, prod_usage, pod_metrics)


def resource_names(pool: Pool) -> list[str]:
    """The threshold resources of the pool, plus memory (``newThresholds``)."""
    names = dict.fromkeys([*pool.low, *pool.high, *pool.prod_low, *pool.prod_high, "memory"])
    return list(names)


def fill_thresholds(pool: Pool, names: Sequence[str]) -> tuple[dict[str, float], dict[str, float]]:
    """Missing entries: 100 % in absolute mode, 0 (capacity) in deviation mode."""
    fill = 0.0 if pool.use_deviation else 100.0
    low = {n: float(pool.low.get(n, fill)) for n in names}
    high = {n: float(pool.high.get(n, fill)) for n in names}
    return low, high


def _fraction(pct: float, total: int) -> int:
    # Go: int64(float64(threshold) * 0.01 * float64(capacity)), truncated toward zero.
    return int(pct * 0.01 * float(total))


def _clamp(pct: float) -> float:
    return min(100.0, max(0.0, pct))


def average_percent(usages: Sequence[NodeUsage], prod: bool) -> dict[str, float]:
    sums: dict[str, float] = {}
    for nu in usages:
        for name, used in (nu.prod_usage if prod else nu.usage).items():
            total = nu.allocatable.get(name, 0)
            if total:
                sums[name] = sums.get(name, 0.0) + used / total * 100.0
    return {n: s / len(usages) for n, s in sums.items()} if usages else {}


def set_thresholds(pool: Pool, usages: Sequence[NodeUsage], names: Sequence[str]) -> None:
    """``getNodeThresholds``: each node's low/high (and prod) thresholds as amounts."""
    low, high = fill_thresholds(pool, names)
    avg = average_percent(usages, prod=False) if pool.use_deviation else {}
    prod_avg = average_percent(usages, prod=True) if pool.use_deviation else {}
    for nu in usages:
        for n in names:
            total = nu.allocatable.get(n, 0)
            if pool.use_deviation:
                if low[n] == 0:
                    nu.low[n] = nu.high[n] = total
                else:
                    nu.low[n] = _fraction(_clamp(avg.get(n, 0.0) - low[n]), total)
                    nu.high[n] = _fraction(_clamp(avg.get(n, 0.0) + high[n]), total)
                if n in pool.prod_low or n in pool.prod_high:
                    plo, phi = pool.prod_low.get(n, 0.0), pool.prod_high.get(n, 0.0)
                    if plo == 0:
                        nu.prod_low[n] = nu.prod_high[n] = total
                    else:
                        nu.prod_low[n] = _fraction(_clamp(prod_avg.get(n, 0.0) - plo), total)
                        nu.prod_high[n] = _fraction(_clamp(prod_avg.get(n, 0.0) + phi), total)
            else:
                nu.low[n] = _fraction(low[n], total)
                nu.high[n] = _fraction(high[n], total)
                if n in pool.prod_low:
                    nu.prod_low[n] = _fraction(pool.prod_low[n], total)
                if n in pool.prod_high:
                    nu.prod_high[n] = _fraction(pool.prod_high[n], total)


def over(usage: Mapping[str, int], thresholds: Mapping[str, int]) -> list[str]:
    """``isNodeOverutilized``: the resources above their threshold, by name."""
    return sorted(n for n, t in thresholds.items() if n in usage and usage[n] > t)


def under(usage: Mapping[str, int], thresholds: Mapping[str, int]) -> bool:
    """``isNodeUnderutilized``: every resource at or below its threshold."""
    return all(usage[n] <= t for n, t in thresholds.items() if n in usage)


@dataclass
class Classes:
    low: list[NodeUsage] = field(default_factory=list)
    high: list[NodeUsage] = field(default_factory=list)
    prod_low: list[NodeUsage] = field(default_factory=list)
    prod_high: list[NodeUsage] = field(default_factory=list)
    both_low: list[NodeUsage] = field(default_factory=list)

    @property
    def all_low(self) -> list[NodeUsage]:
        return [*self.low, *self.prod_low, *self.both_low]


def classify(usages: Sequence[NodeUsage]) -> Classes:
    """``classifyNodes``. Prod thresholds only classify when the pool sets them."""
    out = Classes()
    for nu in usages:
        prod_high = bool(nu.prod_high) and bool(over(nu.prod_usage, nu.prod_high))
        prod_low = bool(nu.prod_low) and under(nu.prod_usage, nu.prod_low)
        if not nu.node.spec.unschedulable and under(nu.usage, nu.low):
            if prod_high:
                out.prod_high.append(nu)
            elif prod_low:
                out.both_low.append(nu)
            else:
                out.low.append(nu)
        elif over(nu.usage, nu.high):
            out.high.append(nu)
        elif prod_high:
            out.prod_high.append(nu)
        elif prod_low:
            out.prod_low.append(nu)
    return out


def percentages(usage: Mapping[str, int], total: Mapping[str, int]) -> dict[str, float]:
    return {n: 100.0 * u / total[n] for n, u in usage.items() if total.get(n)}
