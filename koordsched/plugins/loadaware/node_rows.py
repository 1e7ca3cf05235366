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
node, its pods, its NodeMetric (``EventHandlers.on_object`` marks the row changed) or the
assign cache (Reserve marks it). Expiry, which does depend on the time, is the kernels' job.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from koordsched.api.core import Node
from koordsched.api.node_metric import MetricView, Usage, resource_value
from koordsched.api.priority import PRIORITY_PROD
from koordsched.api.quantity import QuantityError
from koordsched.api.resources import resource_list
from koordsched.framework.snapshot import NodeInfo, Snapshot
from koordsched.plugins.loadaware import kernels
from koordsched.plugins.loadaware.args import LoadAwareSchedulingArgs
from koordsched.plugins.loadaware.assign_cache import AssignCache, AssignInfo
from koordsched.plugins.loadaware.estimator import Estimator, pod_priority_class
from koordsched.plugins.loadaware.node_metrics import NodeMetricStore
from koordsched.plugins.loadaware.thresholds import FilterProfile, ThresholdProfiles

log = logging.getLogger(__name__)

ANNOTATION_RAW_ALLOCATABLE: Final = "node.koordinator.sh/raw-allocatable"
#: Every amount the kernels read is clamped to [0, ROW_MAX] (2^56: 72 peta-units, far beyond any
#: node): then a base plus a pod's estimate, and either times 100, still fit in int64, so no
#: NodeMetric, allocatable or estimate can overflow a kernel or push a score out of 0-100.
ROW_MAX: Final = 1 << 56
#: Seconds by which expiry is expected early (see NodeRows.expiry_epoch).
_EXPIRY_MARGIN: Final = 1e-3

I64 = npt.NDArray[np.int64]


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


def clamp(value: int) -> int:
    """``value`` within [0, ROW_MAX] (see ROW_MAX)."""
    return 0 if value < 0 else min(value, ROW_MAX)


def _set_row(arr: I64, r: int, values: list[int]) -> None:
    """``arr[r] = values`` (clamped) for the few columns a row has, without building an array."""
    row = arr[r]
    for c, v in enumerate(values):
        row[c] = clamp(v)


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
        #: id(usage) -> (usage, its entries as integers); see _values.
        self._usage_values: dict[int, tuple[Usage, dict[str, int]]] = {}
        #: Moves when rows were rewritten without their snapshot row changing (see ``key``).
        self.version = 0
        # Expiry (see expiry_epoch): the epoch, the earliest time a row's metric may expire
        # (-inf: to be worked out), the earliest expiry among rows rebuilt since, the last time asked.
        self._expiration = float(args.expiration_seconds)
        self._epoch = 0
        self._horizon = -math.inf
        self._pending = math.inf
        self._last_now = -math.inf

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
        #: Per row, the (node, view, profile) its static part was written from (see _build_row).
        self._static: list[tuple[Node, MetricView | None, FilterProfile, bytes] | None] = [None] * cap

    # --- sync --------------------------------------------------------------------------------

    def sync(self) -> bool:
        """Rebuild the rows that changed since the last call (every row the first time).

        False when no node has a NodeMetric, without looking at any row: every row then
        passes the Filter and scores 0. Rows are not rebuilt then, and ``_synced`` stays
        where it was, so the first sync after a NodeMetric arrives rebuilds every row that
        changed meanwhile (or every row, before the first sync).
        """
        snap = self.snapshot
        objects = self._objects()
        if not objects and not self._seen:
            return False
        infos = snap.infos
        synced = self._synced
        full = synced is None or len(snap.row_gen) > self._cap
        rows: list[int]
        if full or synced is None:
            rows = list(range(snap.n))
        elif len(objects) != self._n_objects:
            # Objects put in place without marking their row (tests): compare them all.
            changed = snap.row_gen[: snap.n] > synced
            seen = self._seen
            for r, info in enumerate(infos):
                if objects.get(info.name) is not seen.get(info.name):
                    changed[r] = True
            rows = np.flatnonzero(changed).tolist()
        elif snap.generation != synced:
            # One kernel pass, shared with DeviceShare's and NodeNUMAResource's look in the same cycle.
            rows = snap.rows_changed_since(synced)
        else:
            return True
        profiles = {r: self.profiles.of(infos[r].node) for r in rows}
        grew = False
        for profile in profiles.values():
            for name in [
                *profile.usage,
                *profile.prod,
                *(profile.aggregated.thresholds if profile.aggregated else ()),
            ]:
                grew |= self._add_col(name)
        if grew or full or len(objects) != self._n_objects:
            self.version += 1
            self._horizon = -math.inf
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
            expires = float(self.update_time[r]) + self._expiration
            if expires < self._pending:  # NaN (never reported) compares False: expired for good
                self._pending = expires
            if obj is None:
                self._seen.pop(info.name, None)
            else:
                self._seen[info.name] = obj
        if len(self._seen) > len(objects):
            self._seen = {k: v for k, v in self._seen.items() if k in objects}
        self._synced = snap.generation
        self._n_objects = len(objects)
        return True

    # --- expiry ------------------------------------------------------------------------------

    def expiry_epoch(self, now: float) -> int:
        """A number that moves whenever a row's NodeMetric may have expired since the last call.

        Filter and Score results depend on the time only through expiry (``expired`` in the
        kernels: never reported, or ``now - update_time >= expiration``), which happens once
        per metric; so results remembered per row stay valid while the epoch holds. Rows whose
        metric is reported again are rebuilt (their row changes), and their new expiry counts
        from then on.
        """
        if self._expiration <= 0:
            return self._epoch  # only "never reported" counts, which does not depend on the time
        # Rows rebuilt since the last call: an expiry still ahead (or too close to tell) counts;
        # one well past was already so when the row was rebuilt, and stays so.
        if self._pending + _EXPIRY_MARGIN > now:
            self._horizon = min(self._horizon, self._pending - _EXPIRY_MARGIN)
        self._pending = math.inf
        if now >= self._horizon or now < self._last_now:
            self._epoch += 1
            n = self.snapshot.n
            ut = self.update_time[:n]
            with np.errstate(invalid="ignore"):
                alive = self.has_metric[:n] & (now - ut < self._expiration)
            # The earliest future expiry, a little early: the kernels compare ``now - t`` with the
            # expiration, which may round differently from ``t + expiration``.
            self._horizon = (
                float(ut[alive].min()) + self._expiration - _EXPIRY_MARGIN if alive.any() else math.inf
            )
        self._last_now = now
        return self._epoch

    # --- the kernels over the rows ------------------------------------------------------------

    def filter_codes(self, rows: I64, pod_est: I64, pod_is_prod: bool, now: float) -> I64:
        """Filter codes of ``rows`` for a pod with estimate ``pod_est`` (:func:`kernels.filter_rows`)."""
        args = self._args
        codes: I64 = kernels.filter_rows(
            rows,
            self.has_metric,
            self.update_time,
            self.has_node_metric,
            self.total,
            self.thresholds,
            self.aggregated,
            self.filter_base,
            self.prod_thresholds,
            self.has_prod,
            self.prod_base,
            pod_est,
            pod_is_prod,
            now,
            self._expiration,
            args.filter_expired,
            args.schedule_when_expired,
        )
        return codes

    def scores(self, rows: I64, pod_est: I64, prod: bool, now: float) -> I64:
        """Scores of ``rows`` for a pod with estimate ``pod_est``, against the prod usage with ``prod``
        (:func:`kernels.score_rows`)."""
        scores: I64 = kernels.score_rows(
            rows,
            self.has_metric,
            self.update_time,
            self.has_node_metric,
            self.total,
            self.prod_base if prod else self.score_base,
            pod_est,
            self.weights,
            now,
            self._expiration,
        )
        return scores

    # --- one row -----------------------------------------------------------------------------

    def _build_row(self, r: int, info: NodeInfo, obj: Any, profile: FilterProfile) -> None:
        view = self._store.view(info.name, obj)
        alloc = self.snapshot.alloc[r].tobytes()
        known = self._static[r]
        if (
            known is None
            or known[0] is not info.node
            or known[1] is not view
            or known[2] is not profile
            or known[3] != alloc
        ):
            # What follows from the node (its allocatable), its NodeMetric and its profile alone;
            # a row rebuilt because a pod was placed there keeps it.
            self._write_static(r, info, view, profile)
            self._static[r] = (info.node, view, profile, alloc)
        if view is None or view.node_usage is None:
            self.filter_base[r] = 0
            self.score_base[r] = 0
            self.prod_base[r] = 0
            return

        assigned = self._assign.pods_on(info.name)
        score_missing = False
        score_usage: Usage | None = view.node_usage
        if self._score_agg is not None:
            score_usage = view.target_aggregated(*self._score_agg)
            score_missing = score_usage is None
        all_pods = view.pod_usages
        estimated, estimated_pods = self._estimate_assigned(view, assigned, all_pods, False, score_missing)
        estimated_actual = _sum_usage(all_pods, estimated_pods, inside=True)
        filter_usage: Usage | None = view.node_usage
        if profile.aggregated is not None:
            agg = profile.aggregated
            filter_usage = view.target_aggregated(agg.duration, agg.agg_type)
        _set_row(self.filter_base, r, self._base(estimated, filter_usage, estimated_actual))
        _set_row(self.score_base, r, self._base(estimated, score_usage, estimated_actual))

        if profile.prod or self._need_prod_score:
            prod_pods = view.prod_pod_usages
            p_estimated, p_pods = self._estimate_assigned(view, assigned, prod_pods, True, score_missing)
            actual = _sum_usage(prod_pods, p_pods, inside=False)
            prod_base = []
            for name in self.names:
                q = actual.get(name)
                prod_base.append(p_estimated.get(name, 0) + (resource_value(name, q) if q else 0))
            _set_row(self.prod_base, r, prod_base)
        # Else the row's prod base is never read: no prod thresholds, no scoring by prod usage.

    def _write_static(self, r: int, info: NodeInfo, view: MetricView | None, profile: FilterProfile) -> None:
        """Row ``r``'s flags, update time, totals and thresholds (zero where the node has no usage)."""
        self.has_metric[r] = view is not None
        self.update_time[r] = np.nan if view is None or view.update_time is None else view.update_time
        if view is None or view.node_usage is None:
            self.has_node_metric[r] = False
            for arr in (self.total, self.thresholds, self.prod_thresholds):
                arr[r] = 0
            self.aggregated[r] = False
            self.has_prod[r] = False
            return
        self.has_node_metric[r] = True
        cols = self.cols
        raw = raw_allocatable(info.node)
        totals = []
        for name in self.names:
            amount = raw.get(name) if raw is not None else None
            totals.append(info.allocatable(name) if amount is None else amount)
        _set_row(self.total, r, totals)
        usage_thresholds = profile.usage
        if profile.aggregated is not None:
            usage_thresholds = profile.aggregated.thresholds
        thresholds = [0] * len(cols)
        for name, value in usage_thresholds.items():
            thresholds[cols[name]] = value
        self.thresholds[r] = thresholds
        self.aggregated[r] = profile.aggregated is not None
        prod = [0] * len(cols)
        for name, value in profile.prod.items():
            prod[cols[name]] = value
        self.prod_thresholds[r] = prod
        self.has_prod[r] = bool(profile.prod)

    def _base(self, estimated: Mapping[str, int], usage: Usage | None, estimated_actual: Usage) -> list[int]:
        """``estimated`` plus the node usage less what the estimated pods reported (when it covers it),
        per column."""
        out = []
        values = self._values(usage) if usage is not None else None
        for name in self.names:
            value = estimated.get(name, 0)
            if usage is not None and values is not None:
                e = estimated_actual.get(name)
                if e:
                    q = usage.get(name)
                    if q is not None:
                        value += resource_value(name, q - e if q >= e else q)
                else:
                    value += values.get(name, 0)
            out.append(value)
        return out

    def _values(self, usage: Usage) -> Mapping[str, int]:
        """``resource_value`` of each entry of ``usage`` (a usage a kept NodeMetric view holds), worked
        out once: a row is rebuilt after every pod placed on its node, its NodeMetric rarely changes."""
        known = self._usage_values.get(id(usage))
        if known is not None and known[0] is usage:
            return known[1]
        if len(self._usage_values) >= 4 * self._cap + 64:
            self._usage_values.clear()
        values = {name: resource_value(name, q) for name, q in usage.items()}
        # The usage is kept with its values, so its id cannot be reused while the entry exists.
        self._usage_values[id(usage)] = (usage, values)
        return values

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
