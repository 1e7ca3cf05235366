"""One framework per profile: instantiates the plugins and runs them at each extension point.

Order, weights and Skip handling follow kube-scheduler's ``frameworkImpl``. Every
extension point is timed into ``scheduler_framework_extension_point_duration_seconds``;
per-plugin timings go to ``scheduler_plugin_execution_duration_seconds`` on the sampled
cycles only (``CycleState.record_plugin_metrics``), as upstream does.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

import numpy as np

from koordsched.config.load import ResolvedProfile
from koordsched.framework.binding_points import BindingPoints
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.diagnosis import Diagnosis
from koordsched.framework.filter_walk import FilterWalk
from koordsched.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    BindPlugin,
    ClusterEventWithHint,
    Codes,
    ConstantScorePlugin,
    CopiesFilterPlugin,
    EnqueueExtensions,
    FilterPlugin,
    FindOneNodePlugin,
    Handle,
    NormalizeScorePlugin,
    PassAllFilterPlugin,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    RowLocalScorePlugin,
    Rows,
    ScorePlugin,
    Scores,
)
from koordsched.framework.nominated import (
    ClusterPods,
    NoClusterPods,
    NominatedFilterError,
    filter_verdicts,
    recheck_with_nominated,
)
from koordsched.framework.plugin_calls import PluginCalls, failure, first
from koordsched.framework.point_metrics import PointMetrics
from koordsched.framework.registry import Registry
from koordsched.framework.reservation_points import ReservationPoints
from koordsched.framework.score_sum import RowLocalSum, add_checked, flat_scores
from koordsched.framework.search import search_rows
from koordsched.framework.status import SUCCESS, Code, PluginError, Status
from koordsched.framework.steps import (
    BatchFilter,
    BatchScorer,
    FilterStep,
    PerNodeFilter,
    PerNodeScorer,
    ScoreBreakdown,
    ScoreResult,
    ScoreStep,
)
from koordsched.framework.types import (
    MAX_PERMIT_TIMEOUT,
    PodInfo,
    PostFilterResult,
    PreFilterResult,
)
from koordsched.framework.waiting_pods import WaitingPodImpl, WaitingPods
from koordsched.kernels.scores import best_and_ties, nth_maximum
from koordsched.observability.metrics import FrameworkMetrics, NullMetrics

_now = time.perf_counter
_SKIP, _ERROR = Code.SKIP, Code.ERROR  # module constants: 3.11's Code.X is a slow lookup (status.py)

P = TypeVar("P", bound=Plugin)


class FrameworkError(Exception):
    """A profile that cannot be instantiated (missing plugin, wrong interface)."""


class Framework:
    def __init__(
        self,
        profile: ResolvedProfile,
        registry: Registry,
        handle: Handle,
        *,
        metrics: FrameworkMetrics | None = None,
        waiting_pods: WaitingPods | None = None,
        rng: random.Random | None = None,
        cluster_pods: ClusterPods | None = None,
    ) -> None:
        self.profile_name = profile.scheduler_name
        self.profile = profile
        self.handle = handle
        self.metrics: FrameworkMetrics = metrics or NullMetrics()
        #: Every plugin call goes through it: timing on sampled cycles, failures named (plugin_calls.py).
        self.calls = PluginCalls(self.metrics)
        self.waiting_pods = waiting_pods if waiting_pods is not None else WaitingPods()
        self.rng = rng or random.Random(0)
        #: Nominated and assumed pods (the scheduler's nominator; none for a bare framework).
        self.cluster_pods: ClusterPods = cluster_pods if cluster_pods is not None else NoClusterPods()
        #: Every enabled plugin by name, in the order they were built.
        self.plugins: dict[str, Plugin] = {}
        for name in profile.enabled_plugins():
            spec = registry.get(name)
            if spec is None:
                raise FrameworkError(f"profile {self.profile_name}: plugin {name!r} is not registered")
            self.plugins[name] = spec.factory(profile.args.get(name), handle)

        # ``kinds`` is a tuple for isinstance(): mypy refuses a bare protocol class as type[P].
        def at(point: str, kinds: tuple[type[P], ...]) -> list[P]:
            out = []
            for name, _ in profile.points.get(point, []):
                plugin = self.plugins[name]
                if not isinstance(plugin, kinds):
                    raise FrameworkError(f"plugin {name!r} does not implement {point}")
                out.append(plugin)
            return out

        self.pre_enqueue: list[PreEnqueuePlugin] = at("preEnqueue", (PreEnqueuePlugin,))
        sorters: list[QueueSortPlugin] = at("queueSort", (QueueSortPlugin,))
        if len(sorters) != 1:
            raise FrameworkError(f"profile {self.profile_name}: exactly one queueSort plugin is needed")
        self.queue_sort = sorters[0]
        self.pre_filter: list[PreFilterPlugin] = at("preFilter", (PreFilterPlugin,))
        self.filters: list[FilterStep] = []
        for name, _ in profile.points.get("filter", []):
            plugin = self.plugins[name]
            if isinstance(plugin, BatchFilterPlugin):
                self.filters.append(BatchFilter(plugin))
            elif isinstance(plugin, FilterPlugin):
                self.filters.append(PerNodeFilter(plugin))
            else:
                raise FrameworkError(f"plugin {name!r} does not implement filter")
        #: Filters that can say they pass every node for a pod (PassAllFilterPlugin).
        self._pass_all: dict[str, PassAllFilterPlugin] = {
            f.plugin.name: f.plugin for f in self.filters if isinstance(f.plugin, PassAllFilterPlugin)
        }
        #: Filters that can count copies of a pod without adding them (CopiesFilterPlugin).
        self._copies: dict[str, CopiesFilterPlugin] = {
            f.plugin.name: f.plugin for f in self.filters if isinstance(f.plugin, CopiesFilterPlugin)
        }
        self.post_filter: list[PostFilterPlugin] = at("postFilter", (PostFilterPlugin,))
        self.pre_score: list[PreScorePlugin] = at("preScore", (PreScorePlugin,))
        self.scorers: list[ScoreStep] = []
        for name, weight in profile.points.get("score", []):
            plugin = self.plugins[name]
            normalizer = plugin if isinstance(plugin, NormalizeScorePlugin) else None
            if isinstance(plugin, BatchScorePlugin):
                row_local = plugin if isinstance(plugin, RowLocalScorePlugin) and normalizer is None else None
                self.scorers.append(BatchScorer(plugin, weight, normalizer, row_local))
            elif isinstance(plugin, ScorePlugin):
                self.scorers.append(PerNodeScorer(plugin, weight, normalizer))
            else:
                raise FrameworkError(f"plugin {name!r} does not implement score")
        self.reserve: list[ReservePlugin] = at("reserve", (ReservePlugin,))
        self.permit: list[PermitPlugin] = at("permit", (PermitPlugin,))
        self.pre_bind: list[PreBindPlugin] = at("preBind", (PreBindPlugin,))
        self.bind_plugins: list[BindPlugin] = at("bind", (BindPlugin,))
        if not self.bind_plugins:
            raise FrameworkError(f"profile {self.profile_name}: at least one bind plugin is needed")
        self.post_bind: list[PostBindPlugin] = at("postBind", (PostBindPlugin,))
        self.find_one_node = [p for p in self.plugins.values() if isinstance(p, FindOneNodePlugin)]
        self.timing = PointMetrics(self.metrics, self.profile_name, self._pass_all)
        self._walk = FilterWalk(
            self.filters, self._pass_all, self.calls, self.timing, lambda: handle.snapshot.infos
        )
        self.binding = BindingPoints(
            handle, self.calls, self.timing, self.waiting_pods, reserve=self.reserve,
            pre_bind=self.pre_bind, bind=self.bind_plugins, post_bind=self.post_bind,
        )  # fmt: skip
        self.reservation_points = ReservationPoints(self.plugins.values())
        #: The row-local scorers' weighted sum, remembered per row (score_sum.py).
        self._row_local = RowLocalSum(self.scorers, self.metrics, self.calls)
        #: Score plugins that can say when they score every node alike (ConstantScorePlugin).
        self._constant: list[ConstantScorePlugin] = [
            s.plugin
            for s in self.scorers
            if isinstance(s, BatchScorer)
            and s.normalizer is None
            and isinstance(s.plugin, ConstantScorePlugin)
        ]

    # --- helpers -------------------------------------------------------------------------------

    def events_to_register(self) -> dict[str, list[ClusterEventWithHint] | None]:
        """Plugin name -> the events it cares about; None means every event (no hints declared)."""
        out: dict[str, list[ClusterEventWithHint] | None] = {}
        for name, plugin in self.plugins.items():
            out[name] = plugin.events_to_register() if isinstance(plugin, EnqueueExtensions) else None
        return out

    # --- queueing ------------------------------------------------------------------------------

    def run_pre_enqueue(self, pod: PodInfo) -> Status:
        for plugin in self.pre_enqueue:
            try:
                status = self.calls.status("PreEnqueue", plugin.name, False, plugin.pre_enqueue, pod)
            except PluginError as err:
                return err.status
            if not status.ok:
                return status.with_plugin(plugin.name)
        return SUCCESS

    def sort_key(self, pod: PodInfo) -> Any:
        # Any, as QueueSortPlugin.sort_key: whatever comparable key the profile's plugin returns.
        return self.queue_sort.sort_key(pod)

    # --- scheduling cycle ----------------------------------------------------------------------

    def run_pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        t0 = _now()
        result: PreFilterResult | None = None
        status = SUCCESS
        sampled = state.record_plugin_metrics
        pair, raised, evaluated = self.calls.pair, self.calls.raised, self.timing.evaluated
        for plugin in self.pre_filter:
            try:  # unsampled, the plugin's own call: the hot path (see PluginCalls)
                if sampled:
                    r, s = pair("PreFilter", plugin.name, True, plugin.pre_filter, state, pod)
                else:
                    r, s = plugin.pre_filter(state, pod)
                if s.code is _ERROR:
                    raise PluginError(failure("PreFilter", plugin.name, s))
            except Exception as err:
                r, s = None, raised("PreFilter", plugin.name, err).status
            if s.code is _SKIP:
                state.skip_filter.add(plugin.name)
                continue
            evaluated(plugin.name, "PreFilter", 1)  # a Skip is not counted, as upstream
            if not s.ok:
                status = s.with_plugin(plugin.name)
                break
            if r is not None:
                result = r if result is None else result.merge(r)
                if result.node_names is not None and not result.node_names:
                    status = Status.unresolvable(
                        "node(s) didn't satisfy plugin(s) [" + plugin.name + "] simultaneously",
                        plugin=plugin.name,
                    )
                    break
        self.timing.point("PreFilter", status, t0)
        return result, status

    def run_pre_filter_add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node_name: str
    ) -> Status:
        """Tell PreFilter plugins ``to_add`` is (hypothetically) on ``node_name`` (preemption, nominees)."""
        return self._pre_filter_extension(state, pod, to_add, node_name, adding=True)

    def run_pre_filter_remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node_name: str
    ) -> Status:
        return self._pre_filter_extension(state, pod, to_remove, node_name, adding=False)

    def _pre_filter_extension(
        self, state: CycleState, pod: PodInfo, other: PodInfo, node_name: str, *, adding: bool
    ) -> Status:
        info = self.handle.snapshot.by_name[node_name]
        point = "PreFilterExtensionAddPod" if adding else "PreFilterExtensionRemovePod"
        for plugin in self.pre_filter:
            if plugin.name in state.skip_filter:
                continue
            ext = plugin.pre_filter_extensions()
            if ext is None:
                continue
            change = ext.add_pod if adding else ext.remove_pod
            try:
                s = self.calls.status(point, plugin.name, False, change, state, pod, other, info)
            except PluginError as err:
                return err.status
            if not s.ok:
                return s.with_plugin(plugin.name)
        return SUCCESS

    def find_feasible(
        self,
        state: CycleState,
        pod: PodInfo,
        rows: Rows,
        num_to_find: int,
        diagnosis: Diagnosis,
    ) -> tuple[Rows, int]:
        """Feasible rows (at most ``num_to_find``, in ``rows`` order) and how many rows were examined."""
        t0 = _now()
        nominated = self.cluster_pods.any_nominated()

        def recheck(ok: Rows) -> Rows:  # nodes holding equal or higher nominees must fit them too
            return recheck_with_nominated(self, state, pod, ok, diagnosis.reject_row) if nominated else ok

        try:
            active = self._walk.active(state, pod)
            feasible, examined = search_rows(
                lambda chunk, limit: self._walk.rows(state, pod, chunk, diagnosis, limit, active),
                recheck,
                rows,
                num_to_find,
                chunked=not active or isinstance(active[-1], BatchFilter),
            )
        except NominatedFilterError as nominated_err:
            self.timing.point("Filter", nominated_err.status, t0)
            raise PluginError(nominated_err.status) from None
        except PluginError as err:
            self.timing.point("Filter", err.status, t0)
            raise
        if len(feasible) > num_to_find:
            # Upstream stops at the num_to_find-th feasible node; rows after it count as unexamined.
            last = int(feasible[num_to_find - 1])
            position = int(np.nonzero(rows == last)[0][0])
            feasible = feasible[:num_to_find]
            examined = position + 1
        self.timing.point("Filter", SUCCESS, t0)
        return feasible, examined

    def filter_rows(
        self, state: CycleState, pod: PodInfo, rows: Rows, diagnosis: Diagnosis, *, nominees: bool = True
    ) -> Rows:
        """Every Filter plugin over ``rows`` (nominees counted unless told not to), without the
        search's limit or its metrics: the preemption dry run's question about many nodes at once."""
        feasible, _ = self._walk.rows(state, pod, rows, diagnosis, len(rows))
        if nominees and len(feasible) and self.cluster_pods.any_nominated():
            try:
                feasible = recheck_with_nominated(self, state, pod, feasible, diagnosis.reject_row)
            except NominatedFilterError as err:
                raise PluginError(err.status) from None
        return feasible

    def filter_copies(self, state: CycleState, pods: Sequence[PodInfo], rows: Rows) -> Codes | None:
        """How many of ``pods`` each row holds one after the other, by every active filter's own
        count (the smallest wins: a pod fits where every filter passes it); None when a filter
        cannot count, or nominated pods would join the check (``filter_rows`` adds them)."""
        if not pods or self.cluster_pods.any_nominated():
            return None
        counts: Codes = np.full(len(rows), len(pods), dtype=np.int64)
        for step in self._walk.active(state, pods[0]):
            name = step.plugin.name
            plugin = self._copies.get(name)
            if plugin is None:
                return None
            got = self.calls.value("Filter", name, False, plugin.filter_copies, state, pods, rows)
            if got is None:
                return None
            np.minimum(counts, got, out=counts)
        return counts

    def pre_filter_extensions_active(self, state: CycleState) -> bool:
        """Whether a PreFilter plugin running for this pod keeps state its AddPod/RemovePod change
        that one of its filters reads (ElasticQuota keeps such state for its own PostFilter only)."""
        filters = {f.plugin.name for f in self.filters}
        return any(
            p.name not in state.skip_filter and p.name in filters and p.pre_filter_extensions() is not None
            for p in self.pre_filter
        )

    def run_post_filter(
        self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        if not self.post_filter:
            return None, Status.unschedulable("no PostFilter plugins")
        t0 = _now()
        snap = self.handle.snapshot
        if diagnosis.pre_filter_status is not None:
            statuses = dict.fromkeys((info.name for info in snap.infos), diagnosis.pre_filter_status)
        else:
            statuses = diagnosis.node_statuses(state, pod, snap)
        reasons: list[str] = []
        result: tuple[PostFilterResult | None, Status] = (None, Status.unschedulable())
        # A rejecting plugin's result still counts (e.g. clearing a stale nomination), as upstream.
        kept: PostFilterResult | None = None
        sampled = state.record_plugin_metrics
        for plugin in self.post_filter:
            try:
                r, s = self.calls.pair(
                    "PostFilter", plugin.name, sampled, plugin.post_filter, state, pod, statuses
                )
            except PluginError as err:
                r, s = None, err.status
            if s.ok:
                result = (r, s)
                break
            if s.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                result = (r, s.with_plugin(plugin.name))
                break
            if s.code is Code.ERROR:
                result = (None, s.with_plugin(plugin.name))
                break
            reasons.extend(s.reasons)
            kept = r if r is not None else kept
        else:
            result = (kept, Status(Code.UNSCHEDULABLE, *reasons))
        self.timing.point("PostFilter", result[1], t0)
        return result

    def run_pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        t0 = _now()
        status = SUCCESS
        sampled = state.record_plugin_metrics
        call, raised = self.calls.status, self.calls.raised
        for plugin in self.pre_score:
            try:  # unsampled, the plugin's own call: the hot path (see PluginCalls)
                if sampled:
                    s = call("PreScore", plugin.name, True, plugin.pre_score, state, pod, rows)
                else:
                    s = plugin.pre_score(state, pod, rows)
                if s.code is _ERROR:
                    raise PluginError(failure("PreScore", plugin.name, s))
            except Exception as err:
                s = raised("PreScore", plugin.name, err).status
            if s.code is _SKIP:
                state.skip_score.add(plugin.name)
                continue
            if not s.ok:
                status = s.with_plugin(plugin.name)
                break
        self.timing.point("PreScore", status, t0)
        return status

    def run_score(self, state: CycleState, pod: PodInfo, rows: Rows, *, explain: bool = False) -> ScoreResult:
        t0 = _now()
        sampled = state.record_plugin_metrics
        value = self.calls.value
        folded: frozenset[int] = frozenset()  # ids of the scorers the row-local sum covers
        total: Scores | None = None
        skip: AbstractSet[str] = state.skip_score
        if self._constant and not explain:
            skip = flat_scores(self._constant, state, pod, self.calls)
        if self._row_local.enabled and not explain:
            total, steps = self._row_local.total(state, pod, rows, self.handle.snapshot, skip)
            folded = frozenset(map(id, steps))
        if total is None:
            total = np.zeros(len(rows), dtype=np.int64)
        result = ScoreResult(total)
        for scorer in self.scorers:
            plugin, weight = scorer.plugin, scorer.weight
            if plugin.name in skip or id(scorer) in folded:
                continue
            if isinstance(scorer, BatchScorer):
                try:  # unsampled, the plugin's own call: the hot path (see PluginCalls)
                    if sampled:
                        scores = value(
                            "Score", plugin.name, True, scorer.plugin.score_batch, state, pod, rows
                        )
                    else:
                        scores = scorer.plugin.score_batch(state, pod, rows)
                except Exception as err:
                    raise self.calls.raised("Score", plugin.name, err) from err
            else:
                scores = value(
                    "Score", plugin.name, sampled, self._score_nodes, scorer.plugin, state, pod, rows
                )
            raw = scores.copy() if explain else scores
            if scorer.normalizer is not None:
                normalize = scorer.normalizer.normalize_score
                s = self.calls.status(
                    "ScoreExtensionNormalize", plugin.name, sampled, normalize, state, pod, rows, scores
                )
                if not s.ok:  # any answer but Success fails the cycle, as upstream
                    raise PluginError(failure("ScoreExtensionNormalize", plugin.name, s))
            add_checked(total, scores, weight, plugin.name)
            if explain:
                result.breakdown.append(ScoreBreakdown(plugin.name, weight, raw, scores.copy()))
        self.timing.point("Score", SUCCESS, t0)
        return result

    def _score_nodes(self, plugin: ScorePlugin, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        """A per-node Score plugin over ``rows``; any answer but Success fails the cycle, as upstream."""
        infos = self.handle.snapshot.infos
        values = []
        for row in rows.tolist():
            value, s = plugin.score(state, pod, infos[row])
            if not s.ok:
                raise PluginError(failure("Score", plugin.name, s))
            values.append(value)
        return np.asarray(values, dtype=np.int64)

    def select_host(self, rows: Rows, total: Scores) -> int:
        """The highest-scoring row; ties are broken at random, as upstream does, with a seeded RNG."""
        first, ties = best_and_ties(total)
        pick = first if ties == 1 else nth_maximum(total, self.rng.randrange(ties))
        return int(rows[pick])

    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        t0 = _now()
        status = SUCCESS
        sampled = state.record_plugin_metrics
        skip, call = state.skip_binding, self.calls.status
        for plugin in self.reserve:
            if plugin.name in skip:
                continue
            try:  # unsampled, the plugin's own call: the hot path (see PluginCalls)
                if sampled:
                    s = call("Reserve", plugin.name, True, plugin.reserve, state, pod, node_name)
                else:
                    s = plugin.reserve(state, pod, node_name)
                if s.code is _ERROR:
                    raise PluginError(failure("Reserve", plugin.name, s))
            except Exception as err:
                s = self.calls.raised("Reserve", plugin.name, err).status
            if not s.ok:
                status = s.with_plugin(plugin.name)
                break
        self.timing.point("Reserve", status, t0)
        return status

    def run_permit(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        t0 = _now()
        waits: dict[str, float] = {}
        timeouts: dict[str, float] = {}
        status = SUCCESS
        sampled = state.record_plugin_metrics
        skip = state.skip_binding
        for plugin in self.permit:
            if plugin.name in skip:
                continue
            try:
                s, timeout = self.calls.call(
                    "Permit", plugin.name, sampled, first, plugin.permit, state, pod, node_name
                )
            except PluginError as err:
                s, timeout = err.status, 0.0
            if s.code is Code.WAIT:
                timeouts[plugin.name] = min(timeout, MAX_PERMIT_TIMEOUT)
                waits[plugin.name] = self.handle.clock.now() + timeouts[plugin.name]
            elif not s.ok:
                status = s.with_plugin(plugin.name)
                break
        if status.ok and waits:
            self.waiting_pods.add(WaitingPodImpl(pod, node_name, waits, timeouts))
            status = Status(Code.WAIT, "one or more plugins asked to wait", plugin=next(iter(waits)))
        self.timing.point("Permit", status, t0)
        return status

    def explain_filters(self, state: CycleState, pod: PodInfo, row: int) -> list[tuple[str, Status]]:
        """Every Filter plugin's verdict on one node (no short-circuit), for ``--explain``."""
        return filter_verdicts(self, state, pod, self.handle.snapshot.infos[row])
