"""LoadAwareScheduling: keep nodes under usage thresholds and prefer the least loaded (spec 4.6).

Koordinator v1.6's ``LoadAwareScheduling``, reading koordlet's NodeMetric objects.

**Filter** (batch): DaemonSet pods pass. A node without a (readable) NodeMetric passes. With
``filterExpiredNodeMetrics`` an expired metric (no update time, or older than
``nodeMetricExpirationSeconds``) rejects the node (``node(s) nodeMetric expired``) unless
``enableScheduleWhenNodeMetricsExpired``, which lets it pass unchecked. A metric without
``status.nodeMetric`` passes. Otherwise the node's profile (the ``usage-thresholds``
annotation over the args) chooses the path: prod thresholds for a koord-prod pod when the
profile has some, else the aggregated thresholds when configured, else the usage ones. The
pod's estimate plus the node's base load (see :mod:`~koordsched.plugins.loadaware.node_rows`)
must stay within each positive threshold, as ``round(used / total * 100)`` percent, for
every resource with a positive total (``node(s) <res> usage exceed threshold``, or
``aggregated usage`` on the aggregated path; the first resource over, in column order, is
reported where Go reports whichever its map iteration meets first).

**Score** (batch, no normalize): 0 without a metric, with an expired one (whatever
``filterExpiredNodeMetrics`` says) or without ``status.nodeMetric``; else the weighted
least-used score of the pod's estimate plus the base load (prod pods against prod usage
with ``scoreAccordingProdUsage``, others against the score-aggregated usage when
``aggregated.scoreAggregationType`` is set, else ``nodeUsage``).

**Reserve/Unreserve** record the pod in the assign cache, which also follows every pod the
snapshot adds or removes (:mod:`~koordsched.plugins.loadaware.assign_cache`).

Time: expiry and assign times are wall-clock (``Clock.wall``); in the simulator that is a
virtual wall clock starting at the newest NodeMetric's update time.

Cost: without any NodeMetric the Filter passes every node without looking at a row and the
Score is skipped (it would be 0 everywhere). Otherwise both are one kernel call over the rows
(:mod:`~koordsched.plugins.loadaware.kernels`, through
:class:`~koordsched.framework.batch.BatchEvaluator`: row memo and kernel tiers, no per-node
logic), and codes and scores are remembered per row for each pod signature (estimate vector,
koord-prod) until the row changes or some row's metric may have expired
(:meth:`NodeRows.expiry_epoch`). The kernel's codes are explained through one
:class:`~koordsched.framework.batch.FilterCodes` table, as the other batch filters' are.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from koordsched.api.kinds import NODE_METRICS
from koordsched.api.priority import PRIORITY_PROD
from koordsched.framework.batch import BatchEvaluator, FilterCodes
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    ClusterEventWithHint,
    Codes,
    EnqueueExtensions,
    Handle,
    PassAllFilterPlugin,
    ReservePlugin,
    Rows,
    Scores,
)
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import ASSIGNED_POD_DELETE, ActionType, ClusterEvent, PodInfo
from koordsched.plugins.helper import as_rows
from koordsched.plugins.loadaware.args import LoadAwareSchedulingArgs
from koordsched.plugins.loadaware.assign_cache import AssignCache
from koordsched.plugins.loadaware.estimator import Estimator, pod_priority_class
from koordsched.plugins.loadaware.kernels import EXPIRED, FIRST_USAGE
from koordsched.plugins.loadaware.node_rows import NodeRows, clamp

NAME: Final = "LoadAwareScheduling"

ERR_NODE_METRIC_EXPIRED: Final = "node(s) nodeMetric expired"
ERR_USAGE_EXCEED_THRESHOLD: Final = "node(s) {} usage exceed threshold"
ERR_AGGREGATED_USAGE_EXCEED_THRESHOLD: Final = "node(s) {} aggregated usage exceed threshold"

_INSTANCES = itertools.count()

NODE_METRIC_ADD: Final = ClusterEvent(NODE_METRICS.kind, ActionType.ADD, "NodeMetricAdd")
NODE_METRIC_UPDATE: Final = ClusterEvent(NODE_METRICS.kind, ActionType.UPDATE, "NodeMetricUpdate")
NODE_METRIC_DELETE: Final = ClusterEvent(NODE_METRICS.kind, ActionType.DELETE, "NodeMetricDelete")


def is_daemonset_pod(pod: PodInfo) -> bool:
    return any(ref.kind == "DaemonSet" for ref in pod.pod.metadata.owner_references)


def filter_codes(names: list[str]) -> FilterCodes:
    """The Filter's codes as the kernel hands them out (EXPIRED, else FIRST_USAGE + 2 * column
    + 1 on the aggregated path) for the resource columns ``names``."""
    fixed = {EXPIRED: Status.unschedulable(ERR_NODE_METRIC_EXPIRED)}
    for col, name in enumerate(names):
        fixed[FIRST_USAGE + 2 * col] = Status.unschedulable(ERR_USAGE_EXCEED_THRESHOLD.format(name))
        fixed[FIRST_USAGE + 2 * col + 1] = Status.unschedulable(
            ERR_AGGREGATED_USAGE_EXCEED_THRESHOLD.format(name)
        )
    return FilterCodes(NAME, fixed, first=FIRST_USAGE + 2 * len(names))


def _metric_changed(pod: PodInfo, old: Any, new: Any) -> bool:
    """Queueing hint for NodeMetric updates: only a change of what the plugin reads (the spec or
    the status) can change a verdict; a metadata-only update (labels, resourceVersion) cannot."""
    if old is None or new is None:
        return True
    try:
        return bool(old.spec != new.spec or old.status != new.status)
    except AttributeError:
        return True


class LoadAwareScheduling:
    name = NAME

    def __init__(self, args: LoadAwareSchedulingArgs | None, handle: Handle) -> None:
        args = args if args is not None else LoadAwareSchedulingArgs()
        args.validate()
        self._args = args
        self._handle = handle
        self._estimator = Estimator(args.resource_weights, args.scaling_factors)
        self._assign = AssignCache.of(handle.snapshot, lambda: handle.clock.wall())
        self.rows = NodeRows(
            handle.snapshot, lambda: handle.objects(NODE_METRICS), args, self._estimator, self._assign
        )
        #: The Filter's code table and how many resource columns it covers (columns are only ever
        #: appended, so a code keeps its meaning when the table is rebuilt for more).
        self._codes = filter_codes(self.rows.names)
        self._coded_columns = len(self.rows.names)
        self._load_key = f"{NAME}/load/{next(_INSTANCES)}"
        # Codes and scores per pod signature, reused for rows that did not change (see rowmemo);
        # the kernels decide every row.
        self._filter = BatchEvaluator()
        self._score = BatchEvaluator()

    # --- the pod's side --------------------------------------------------------------------

    def _pod_load(self, pod: PodInfo) -> tuple[np.ndarray, bool]:
        """The pod's estimate per resource column and whether it is koord-prod, computed once per
        pod object and column count (columns are only ever appended)."""
        names = self.rows.names
        cached: tuple[Any, int, np.ndarray, bool] | None = pod.extra.get(self._load_key)
        if cached is not None and cached[0] is pod.pod and cached[1] == len(names):
            return cached[2], cached[3]
        est = self._estimator.estimate(pod)
        vector = np.asarray([clamp(est.get(name, 0)) for name in names], dtype=np.int64)
        prod = pod_priority_class(pod) == PRIORITY_PROD
        pod.extra[self._load_key] = (pod.pod, len(names), vector, prod)
        return vector, prod

    # --- filter ------------------------------------------------------------------------------

    def passes_all(self, state: CycleState, pod: PodInfo) -> bool:
        """PassAllFilterPlugin: a DaemonSet pod, or no node has a NodeMetric (then the Score, 0 on
        every node, is skipped too, as filter_batch does)."""
        if is_daemonset_pod(pod):
            return True
        if not self.rows.sync():
            state.skip_score.add(NAME)
            return True
        return False

    def filter_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Codes:
        if is_daemonset_pod(pod):
            return np.zeros(len(rows), dtype=np.int64)
        nr = self.rows
        if not nr.sync():
            # No node has a NodeMetric: every node passes, and the Score would be 0 on every
            # node, so it is skipped as a PreScore Skip would skip it (see DeviceShare.pre_filter).
            state.skip_score.add(NAME)
            return np.zeros(len(rows), dtype=np.int64)
        vector, prod = self._pod_load(pod)
        now = self._handle.clock.wall()

        def kernel(stale: Rows) -> tuple[Codes, None]:
            return nr.filter_codes(stale, vector, prod, now), None

        # A row's code follows from its arrays (rebuilt when its snapshot row changes, or under a
        # new version), the pod's vector and, with filterExpiredNodeMetrics, the expiry epoch.
        epoch = nr.expiry_epoch(now) if self._args.filter_expired else -1
        key = (nr.version, epoch, prod, vector.tobytes())
        return self._filter.evaluate(
            self._handle.snapshot, as_rows(rows), memo_key=key, content_key=None, kernel=kernel
        )

    def explain(self, state: CycleState, pod: PodInfo, code: int) -> Status:
        names = self.rows.names
        if len(names) != self._coded_columns:
            self._codes, self._coded_columns = filter_codes(names), len(names)
        return self._codes.status(code)

    # --- score -------------------------------------------------------------------------------

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        nr = self.rows
        if not nr.sync():
            return np.zeros(len(rows), dtype=np.int64)
        vector, prod = self._pod_load(pod)
        prod = prod and self._args.score_by_prod_usage
        now = self._handle.clock.wall()

        def kernel(stale: Rows) -> tuple[Scores, None]:
            return nr.scores(stale, vector, prod, now), None

        key = (nr.version, nr.expiry_epoch(now), prod, vector.tobytes())
        return self._score.evaluate(
            self._handle.snapshot, as_rows(rows), memo_key=key, content_key=None, kernel=kernel
        )

    # --- reserve -----------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        self._assign.reserve(node_name, pod)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self._assign.unreserve(node_name, pod)

    # --- queueing ----------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ASSIGNED_POD_DELETE),
            ClusterEventWithHint(NODE_METRIC_ADD),
            ClusterEventWithHint(NODE_METRIC_UPDATE, _metric_changed),
            ClusterEventWithHint(NODE_METRIC_DELETE),
        ]

    # --- introspection -----------------------------------------------------------------------

    def estimate(self, pod: PodInfo) -> dict[str, int]:
        """The pod's estimated usage per weighted resource (for tests and ``--explain``)."""
        return dict(self._estimator.estimate(pod))


__all__ = ["LoadAwareScheduling", "is_daemonset_pod"]

if TYPE_CHECKING:
    # The extension points LoadAwareScheduling implements; mypy checks each line, nothing runs.
    _filter: type[BatchFilterPlugin] = LoadAwareScheduling
    _pass_all: type[PassAllFilterPlugin] = LoadAwareScheduling
    _score: type[BatchScorePlugin] = LoadAwareScheduling
    _reserve: type[ReservePlugin] = LoadAwareScheduling
    _enqueue_extensions: type[EnqueueExtensions] = LoadAwareScheduling
