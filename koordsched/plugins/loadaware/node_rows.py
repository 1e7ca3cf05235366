"""Per-row arrays the LoadAware kernels read, rebuilt only for rows that changed.

For each snapshot row and each resource column (the weighted resources, then every resource
that has a threshold in the args or in some node's annotation) the row holds:

* ``total``: the node's allocatable, overridden by ``node.koordinator.sh/raw-allocatable``;
* the thresholds of the node's filter profile (args or annotation), for the usage path and
  for prod pods, and whether the usage path is the aggregated one;
* ``base``: the load on the node before the pod, as ``GetEstimatedUsed`` computes it without
  the pod's own estimate. For the usage path: the node usage (aggregated when the profile
  says so) minus the reported usage of the pods that need estimation, plus their estimates
  (each at least its reported usage). For the prod path: the reported usage of the other
  prod pods plus the estimates of the prod pods that need estimation. The Score has its
  own usage-path base (``aggregated.scoreAggregationType`` chooses its node usage).

A pod needs estimation when it is in the assign cache and: koordlet reported no usage for
it; or it was assigned after the metric's update time; or less than the report interval
before it; or score aggregation is configured and the metric lacks that aggregated usage.
None of this depends on the current time, so a row is rebuilt only when it changed: its
node, its pods, its NodeMetric (``Scheduler.on_object`` marks the row changed) or the
assign cache (Reserve marks it). Expiry, which does depend on the time, is the kernels' job.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from koordsched.api.core import Node
from koordsched.api.priority import PRIORITY_PROD, priority_class_with_default
from koordsched.api.quantity import QuantityError
from koordsched.api.resources import resource_list
from koordsched.framework.snapshot import NodeInfo, Snapshot
from koordsched.framework.types import PodInfo
from koordsched.plugins.loadaware.args import LoadAwareSchedulingArgs
from koordsched.plugins.loadaware.assign_cache import AssignCache, AssignInfo
from koordsched.plugins.loadaware.estimator import Estimator
from koordsched.plugins.loadaware.node_metrics import MetricView, NodeMetricStore, Usage, resource_value
from koordsched.plugins.loadaware.thresholds import FilterProfile, ThresholdProfiles

log = logging.getLogger(__name__)

ANNOTATION_RAW_ALLOCATABLE: Final = "node.koordinator.sh/raw-allocatable"
_PRIORITY_KEY: Final = "LoadAwareScheduling/priorityClass"

I64 = npt.NDArray[np.int64]


def pod_priority_class(pod: PodInfo) -> str:
    """The pod's priority class with its default, computed once per pod object."""
    cached: tuple[Any, str] | None = pod.extra.get(_PRIORITY_KEY)
    if cached is not None and cached[0] is pod.pod:
        return cached[1]
    pc = priority_class_with_default(pod.pod, pod.priority)
    pod.extra[_PRIORITY_KEY] = (pod.pod, pc)
    return pc


def raw_allocatable(node: Node) -> dict[str, int] | None:
    """The ``raw-allocatable`` annotation in canonical units; None when absent or unreadable
    (Koordinator then uses the node's allocatable)."""
    raw = node.metadata.annotations.get(ANNOTATION_RAW_ALLOCATABLE)
    if not raw:
        return None
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return resource_list(data)
    except (ValueError, QuantityError, TypeError) as err:
        log.warning(
            "node %s: invalid %s annotation, its allocatable is used: %s",
            node.metadata.name,
            ANNOTATION_RAW_ALLOCATABLE,
            err,
        )
        return None


def _sum_usage(views: Mapping[tuple[str, str], Usage], keys: set[tuple[str, str]], inside: bool) -> Usage:
    """Reported usages summed over the pods in ``keys`` (``inside``) or over the others."""
    out: Usage = {}
    for key, usage in views.items():
        if (key in keys) is inside:
            for name, q in usage.items():
                out[name] = out.get(name, Fraction(0)) + q
    return out


class NodeRows:
    """The kernels' arrays, one row per snapshot row, kept in step with the cluster."""

    def __init__(
        self,
        snapshot: Snapshot,
        objects: Callable[[], Mapping[str, Any]],
        args: LoadAwareSchedulingArgs,
        estimator: Estimator,
        assign: AssignCache,
    ) -> None:
        self.snapshot = snapshot
        self._objects = objects
        self._args = args
        self._estimator = estimator
        self._assign = assign
        self._store = NodeMetricStore()
        self.profiles = ThresholdProfiles(args)
        score_agg = args.score_aggregated
        self._score_agg = (
            (score_agg.score_duration_ns, score_agg.score_aggregation_type) if score_agg is not None else None
        )
        self._need_prod_score = args.score_by_prod_usage
        #: Resource columns: weighted resources first, then thresholded ones as they appear.
        self.names: list[str] = []
        self.cols: dict[str, int] = {}
        default = self.profiles.default
        for name in [*args.resource_weights, *default.usage, *default.prod]:
            self._add_col(name)
        if default.aggregated is not None:
            for name in default.aggregated.thresholds:
                self._add_col(name)
        self.weights: I64 = np.asarray([args.resource_weights.get(n, 0) for n in self.names], dtype=np.int64)
        self._cap = 0
        self._alloc(max(8, len(snapshot.row_gen)))
        #: Snapshot generation at the last sync; None before the first.
        self._synced: int | None = None
        #: Node name -> the NodeMetric object its row was built from.
        self._seen: dict[str, Any] = {}
        #: How many NodeMetric objects there were at the last sync.
        self._n_objects = 0

    # --- layout --------------------------------------------------------------------------------

    def _add_col(self, name: str) -> bool:
        if name in self.cols:
            return False
        self.cols[name] = len(self.names)
        self.names.append(name)
        return True

    def _alloc(self, cap: int) -> None:
        k = len(self.names)
        self._cap = cap
        self.has_metric = np.zeros(cap, dtype=np.bool_)
        self.has_node_metric = np.zeros(cap, dtype=np.bool_)
        self.update_time = np.full(cap, np.nan, dtype=np.float64)
        self.aggregated = np.zeros(cap, dtype=np.bool_)
        self.has_prod = np.zeros(cap, dtype=np.bool_)
        self.total = np.zeros((cap, k), dtype=np.int64)
        self.thresholds = np.zeros((cap, k), dtype=np.int64)
        self.prod_thresholds = np.zeros((cap, k), dtype=np.int64)
        self.filter_base = np.zeros((cap, k), dtype=np.int64)
        self.score_base = np.zeros((cap, k), dtype=np.int64)
        self.prod_base = np.zeros((cap, k), dtype=np.int64)

    # --- sync --------------------------------------------------------------------------------

    def sync(self) -> None:
        """Rebuild the rows that changed since the last call (every row the first time)."""
        snap = self.snapshot
        objects = self._objects()
        infos = snap.infos
        synced = self._synced
        full = synced is None or len(snap.row_gen) > self._cap
        if full or synced is None:
            rows = list(range(snap.n))
        elif snap.generation != synced or len(objects) != self._n_objects:
            changed = snap.row_gen[: snap.n] > synced
            if len(objects) != self._n_objects:
                # Objects put in place without marking their row (tests): compare them all.
                seen = self._seen
                for r, info in enumerate(infos):
                    if objects.get(info.name) is not seen.get(info.name):
                        changed[r] = True
            rows = np.flatnonzero(changed).tolist()
        else:
            return
        profiles = {r: self.profiles.of(infos[r].node) for r in rows}
        grew = False
        for profile in profiles.values():
            for name in [
                *profile.usage,
                *profile.prod,
                *(profile.aggregated.thresholds if profile.aggregated else ()),
            ]:
                grew |= self._add_col(name)
        if grew or full:
            # A new column (or more rows than the arrays hold): every row is written afresh.
            self._alloc(max(self._cap, len(snap.row_gen), 8))
            self.weights = np.asarray(
                [self._args.resource_weights.get(n, 0) for n in self.names], dtype=np.int64
            )
            rows = list(range(snap.n))
            profiles = {r: self.profiles.of(infos[r].node) for r in rows}
        for r in rows:
            info = infos[r]
            obj = objects.get(info.name)
            self._build_row(r, info, obj, profiles[r])
            if obj is None:
                self._seen.pop(info.name, None)
            else:
                self._seen[info.name] = obj
        if len(self._seen) > len(objects):
            self._seen = {k: v for k, v in self._seen.items() if k in objects}
        self._synced = snap.generation
        self._n_objects = len(objects)

    # --- one row -----------------------------------------------------------------------------

    def _build_row(self, r: int, info: NodeInfo, obj: Any, profile: FilterProfile) -> None:
        view = self._store.view(info.name, obj)
        self.has_metric[r] = view is not None
        self.has_node_metric[r] = False
        self.update_time[r] = np.nan
        for arr in (self.total, self.thresholds, self.prod_thresholds, self.filter_base, self.score_base):
            arr[r, :] = 0
        self.prod_base[r, :] = 0
        self.aggregated[r] = False
        self.has_prod[r] = False
        if view is None:
            return
        if view.update_time is not None:
            self.update_time[r] = view.update_time
        if view.node_usage is None:
            return
        self.has_node_metric[r] = True
        cols = self.cols
        raw = raw_allocatable(info.node)
        for name, c in cols.items():
            amount = raw.get(name) if raw is not None else None
            self.total[r, c] = info.allocatable(name) if amount is None else amount
        usage_thresholds = profile.usage
        if profile.aggregated is not None:
            usage_thresholds = profile.aggregated.thresholds
            self.aggregated[r] = True
        for name, value in usage_thresholds.items():
            self.thresholds[r, cols[name]] = value
        for name, value in profile.prod.items():
            self.prod_thresholds[r, cols[name]] = value
        self.has_prod[r] = bool(profile.prod)

        assigned = self._assign.pods_on(info.name)
        score_missing = False
        score_usage: Usage | None = view.node_usage
        if self._score_agg is not None:
            score_usage = view.target_aggregated(*self._score_agg)
            score_missing = score_usage is None
        all_pods = {key: pu.usage for key, pu in view.pods.items()}
        estimated, estimated_pods = self._estimate_assigned(view, assigned, all_pods, False, score_missing)
        estimated_actual = _sum_usage(all_pods, estimated_pods, inside=True)
        filter_usage: Usage | None = view.node_usage
        if profile.aggregated is not None:
            agg = profile.aggregated
            filter_usage = view.target_aggregated(agg.duration, agg.agg_type)
        self._write_base(self.filter_base, r, estimated, filter_usage, estimated_actual)
        self._write_base(self.score_base, r, estimated, score_usage, estimated_actual)

        if profile.prod or self._need_prod_score:
            prod_pods = {key: pu.usage for key, pu in view.pods.items() if pu.priority == PRIORITY_PROD}
            p_estimated, p_pods = self._estimate_assigned(view, assigned, prod_pods, True, score_missing)
            actual = _sum_usage(prod_pods, p_pods, inside=False)
            for name, c in cols.items():
                q = actual.get(name)
                self.prod_base[r, c] = p_estimated.get(name, 0) + (resource_value(name, q) if q else 0)

    def _write_base(
        self, arr: I64, r: int, estimated: Mapping[str, int], usage: Usage | None, estimated_actual: Usage
    ) -> None:
        """``estimated`` plus the node usage less what the estimated pods reported (when it covers it)."""
        for name, c in self.cols.items():
            value = estimated.get(name, 0)
            if usage is not None:
                q = usage.get(name)
                if q is not None:
                    e = estimated_actual.get(name)
                    if e and q >= e:
                        q = q - e
                    value += resource_value(name, q)
            arr[r, c] = value

    def _estimate_assigned(
        self,
        view: MetricView,
        assigned: Mapping[str, AssignInfo],
        pod_usages: Mapping[tuple[str, str], Usage],
        prod_only: bool,
        score_missing: bool,
    ) -> tuple[dict[str, int], set[tuple[str, str]]]:
        """``estimatedAssignedPodUsed``: the estimates of the assigned pods that need one."""
        estimated: dict[str, int] = {}
        pods: set[tuple[str, str]] = set()
        updated = view.update_time if view.update_time is not None else float("-inf")
        interval = view.report_interval
        for info in assigned.values():
            pod = info.pod
            if prod_only and pod_priority_class(pod) != PRIORITY_PROD:
                continue
            meta = pod.pod.metadata
            key = (meta.namespace, meta.name)
            usage = pod_usages.get(key)
            t = info.timestamp
            if not (not usage or t > updated or (t < updated and updated - t < interval) or score_missing):
                continue
            for name, value in self._estimator.estimate(pod).items():
                if usage:
                    q = usage.get(name)
                    if q is not None:
                        value = max(value, resource_value(name, q))
                estimated[name] = estimated.get(name, 0) + value
            pods.add(key)
        return estimated, pods
