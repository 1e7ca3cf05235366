"""LowNodeLoad's Balance (spec 7.1 steps 4-7), per node pool.

A node belongs to the first pool whose selector matches it. Nodes without a usable NodeMetric
are left out. The eviction order, stop conditions and reason strings are Koordinator's. Node
fit asks the scheduler (every Filter of its profile, LoadAwareScheduling's estimator
included) whether another node under the low thresholds would take the pod, and then checks
that the pod's measured usage would not push that node over its high threshold.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from koordsched.api.core import LabelSelector, Node, Pod
from koordsched.api.selectors import match_label_selector
from koordsched.descheduler.framework import EvictOptions, Handle
from koordsched.descheduler.plugins.lownodeload.args import LowNodeLoadArgs, Pool
from koordsched.descheduler.plugins.lownodeload.detector import ANOMALY, Detector, DetectorCache
from koordsched.descheduler.plugins.lownodeload.sorting import sort_pods, usage_score
from koordsched.descheduler.plugins.lownodeload.usage import (
    Amounts,
    NodeUsage,
    classify,
    metric_view,
    node_usage,
    over,
    percentages,
    resource_names,
    set_thresholds,
)

log = logging.getLogger(__name__)

NAME: Final = "LowNodeLoad"


@dataclass
class Decision:
    """One eviction LowNodeLoad asked for (or would have, in dry run)."""

    pod: Pod
    node: str
    pool: str
    reason: str
    #: The low node the pod was found to fit (node fit), or None when nodeFit is off.
    target: str | None
    evicted: bool


class LowNodeLoad:
    def __init__(self, args: LowNodeLoadArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self._pools = args.pools()
        self.detectors = DetectorCache(args.detector_timeout())
        #: What the last round decided (the simulator and the tests read it).
        self.decisions: list[Decision] = []

    @property
    def name(self) -> str:
        return NAME

    def balance(self, nodes: Sequence[Node]) -> None:
        self.decisions = []
        if self.args.paused:
            log.info("LowNodeLoad is paused and will do nothing")
            return
        nodes = [n for n in nodes if _selects(self.args.node_selector, n.metadata.labels)]
        taken: set[str] = set()
        for pool in self._pools:
            members = [
                n
                for n in nodes
                if n.metadata.name not in taken and _selects(pool.node_selector, n.metadata.labels)
            ]
            taken.update(n.metadata.name for n in members)
            if members:
                self._balance_pool(pool, members)

    # --- one pool --------------------------------------------------------------------------

    def _balance_pool(self, pool: Pool, nodes: list[Node]) -> None:
        now = self.handle.wall()
        names = resource_names(pool)
        usages: list[NodeUsage] = []
        for node in nodes:
            view = metric_view(
                self.handle.node_metric(node.metadata.name),
                now,
                float(self.args.node_metric_expiration_seconds),
            )
            if view is None:
                continue
            usages.append(node_usage(node, self.handle.pods_on(node.metadata.name), view, names))
        if not usages:
            return
        set_thresholds(pool, usages, names)
        classes = classify(usages)
        low_nodes = classes.all_low
        for nu in low_nodes:
            self._reset(nu.name, now)
        if not classes.high and not classes.prod_high:
            log.debug("pool %r: no node is over its high thresholds", pool.name)
            return
        if not low_nodes:
            log.debug("pool %r: no node is under its low thresholds", pool.name)
            return
        if len(low_nodes) <= self.args.number_of_nodes:
            log.debug("pool %r: %d low nodes, not more than numberOfNodes", pool.name, len(low_nodes))
            return
        if len(low_nodes) == len(usages):
            return
        sources = self._abnormal(classes.high, pool, now)
        prod_sources = self._abnormal(classes.prod_high, pool, now)
        if not sources and not prod_sources:
            log.debug("pool %r: no node is abnormal yet", pool.name)
            return
        targets = [*classes.low, *classes.both_low]
        available = _headroom(targets, names, prod=False)
        self._balance(pool, sources, targets, available, names, prod=False)
        # What the node pass used of the both-low nodes is no longer theirs to give.
        both_available = _headroom(classes.both_low, names, prod=False)
        for n in names:
            both_available[n] = min(both_available[n], available[n])
        prod_targets = [*classes.prod_low, *classes.both_low]
        prod_available = _headroom(classes.prod_low, names, prod=True)
        both_prod = _headroom(classes.both_low, names, prod=True)
        for n in names:
            prod_available[n] += min(both_prod[n], both_available[n])
        self._balance(pool, prod_sources, prod_targets, prod_available, names, prod=True)
        for nu in [*classes.high, *classes.prod_high]:
            d = self.detectors.get(nu.name, now)
            if d is not None:
                d.mark(True, now)

    def _reset(self, node: str, now: float) -> None:
        d = self.detectors.get(node, now)
        if d is not None:
            d.reset()

    def _abnormal(self, candidates: list[NodeUsage], pool: Pool, now: float) -> list[NodeUsage]:
        timeout, abnormalities, _ = pool.anomaly
        out: list[NodeUsage] = []
        for nu in candidates:
            d = self.detectors.get(nu.name, now) or Detector(timeout, abnormalities)
            if d.mark(False, now) == ANOMALY:
                out.append(nu)
            self.detectors.put(nu.name, d, now)
        out.sort(key=lambda nu: -usage_score(nu.usage, nu.allocatable, pool.weights))
        return out

    def _balance(
        self,
        pool: Pool,
        sources: list[NodeUsage],
        targets: list[NodeUsage],
        available: Amounts,
        names: list[str],
        *,
        prod: bool,
    ) -> None:
        if not sources or not targets:
            return
        for src in sources:
            pods = src.prod_pods if prod else src.pods
            removable = [p for p in pods if self._evictable(p)]
            if not removable:
                continue
            usage, high = (src.prod_usage, src.prod_high) if prod else (src.usage, src.high)
            exceeded = {n: usage[n] - high[n] for n in over(usage, high)}
            weights = {n: pool.weights.get(n, 0) for n in exceeded}
            for pod in sort_pods(removable, src.pod_metrics, exceeded, weights):
                if not over(usage, high):
                    self._reset(src.name, self.handle.wall())
                    break
                if any(available.get(n, 0) <= 0 for n in names):
                    break
                key = (pod.metadata.namespace, pod.metadata.name)
                metric = src.pod_metrics.get(key)
                target: str | None = None
                if self.args.node_fit:
                    if metric is None:
                        continue  # no measured usage: where it would land cannot be judged
                    target = self._fit(pod, metric, targets, prod)
                    if target is None:
                        continue
                reason = _reason(src, pool, prod)
                evicted = False
                if not self.args.dry_run:
                    evicted = self.handle.evictor.evict(pod, EvictOptions(NAME, reason))
                    if not evicted:
                        continue
                self.decisions.append(Decision(pod, src.name, pool.name, reason, target, evicted))
                if metric is None:
                    continue
                for n in names:
                    q = 1 if n == "pods" else metric.get(n, 0)
                    available[n] = available.get(n, 0) - q
                    src.usage[n] = src.usage.get(n, 0) - q
                    if prod:
                        src.prod_usage[n] = src.prod_usage.get(n, 0) - q

    def _evictable(self, pod: Pod) -> bool:
        ns = self.args.evictable_namespaces
        if ns is not None and not ns.admits(pod.metadata.namespace):
            return False
        if self.args.pod_selectors and not any(
            s.selector is None or match_label_selector(s.selector, pod.metadata.labels)
            for s in self.args.pod_selectors
        ):
            return False
        return self.handle.evictor.filter(pod)

    def _fit(self, pod: Pod, metric: Amounts, targets: list[NodeUsage], prod: bool) -> str | None:
        """The first target the scheduler accepts and that stays under its high thresholds with
        the pod's usage added; that usage is then counted on it for the pods that follow."""
        by_name = {t.name: t for t in targets}
        for name in self.handle.node_fit.fits(pod, list(by_name)):
            t = by_name[name]
            usage, high = (t.prod_usage, t.prod_high) if prod else (t.usage, t.high)
            added = {n: usage.get(n, 0) + metric.get(n, 0) for n in high if n in usage}
            if any(added[n] > high[n] for n in added):
                continue
            usage.update(added)
            return name
        return None


def _selects(sel: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """An unset selector selects every node (a LabelSelector of None matches nothing)."""
    return sel is None or match_label_selector(sel, labels)


def _headroom(nodes: Sequence[NodeUsage], names: Sequence[str], *, prod: bool) -> Amounts:
    """``targetAvailableUsage``: sum of (high threshold - usage) over the nodes."""
    out = {n: 0 for n in names}
    for nu in nodes:
        usage, high = (nu.prod_usage, nu.prod_high) if prod else (nu.usage, nu.high)
        for n in names:
            out[n] += high.get(n, nu.allocatable.get(n, 0)) - usage.get(n, 0)
    return out


def _reason(src: NodeUsage, pool: Pool, prod: bool) -> str:
    """``node is overutilized, node cpu usage(80.00%)>threshold(75.00%)``, resources by name."""
    usage, high, pcts = (
        (src.prod_usage, src.prod_high, pool.prod_high) if prod else (src.usage, src.high, pool.high)
    )
    shown = percentages(usage, src.allocatable)
    prefix = "prod" if prod else "node"
    parts = [
        f"{prefix} {n} usage({shown.get(n, 0.0):.2f}%)>threshold({pcts.get(n, 100.0):.2f}%)"
        for n in over(usage, high)
    ]
    return "node is overutilized, " + ", ".join(parts)
