"""PodTopologySpread: kube-scheduler's topology spread constraints, hard and soft, with system defaults.

A thin adapter for the extension points; the logic lives in ``constraints`` (what a pod
asks), ``defaults`` (the default selector from Services and controllers), ``nodes`` (which
nodes count), ``filtering`` and ``scoring``, over the kernels in ``kernels``.

A pod with no constraints of its own gets the plugin's default constraints (System: hostname
maxSkew 3 and zone maxSkew 5, both ScheduleAnyway) with a selector built from the Services
selecting it and its controller; when that selector is empty it gets none. A pod without any
constraint returns Skip from PreFilter and PreScore, so it pays a few dict lookups.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from koordsched.api.core import LabelSelector, Node, Pod
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    ClusterEventWithHint,
    Codes,
    EnqueueExtensions,
    Handle,
    NormalizeScorePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    Rows,
    Scores,
)
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SKIP, SUCCESS, Code, Status
from koordsched.framework.types import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    ASSIGNED_POD_UPDATE,
    NODE_ADD,
    NODE_DELETE,
    NODE_UPDATE,
    PodInfo,
    PreFilterResult,
)
from koordsched.plugins.podtopologyspread import filtering, scoring
from koordsched.plugins.podtopologyspread.args import DO_NOT_SCHEDULE, SCHEDULE_ANYWAY, PodTopologySpreadArgs
from koordsched.plugins.podtopologyspread.constraints import (
    NONE,
    Constraint,
    Constraints,
    default_constraints,
    own_constraints,
)
from koordsched.plugins.podtopologyspread.defaults import DefaultSelectors
from koordsched.plugins.podtopologyspread.nodes import NodeMasks

NAME = "PodTopologySpread"
_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME
_OWN_KEY = NAME
#: Default constraints remembered per selector; past this the memo starts over.
_BUILT_LIMIT = 4096
#: Not yet looked at (the pod's own constraints are compiled once per PodInfo).
_UNSEEN = object()

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "PodTopologySpread",
]

ERR_REASON_CONSTRAINTS_NOT_MATCH = filtering.ERR_REASON_CONSTRAINTS_NOT_MATCH
ERR_REASON_NODE_LABEL_NOT_MATCH = filtering.ERR_REASON_NODE_LABEL_NOT_MATCH


class PodTopologySpread:
    name = NAME

    def __init__(self, args: PodTopologySpreadArgs | None, handle: Handle) -> None:
        args = args if args is not None else PodTopologySpreadArgs()
        args.validate()
        self._handle = handle
        self._defaults = args.constraints()
        self._system_defaulted = args.system_defaulted
        self._hard_defaults = any(c.when_unsatisfiable == DO_NOT_SCHEDULE for c in self._defaults)
        self._soft_defaults = any(c.when_unsatisfiable == SCHEDULE_ANYWAY for c in self._defaults)
        self._selectors = DefaultSelectors(handle)
        #: (namespace, id(selector)) -> (the selector, the default constraints built with it).
        self._built: dict[tuple[str, int], tuple[LabelSelector, Constraints]] = {}
        self._masks = NodeMasks()

    # --- the pod's constraints -------------------------------------------------------------------

    def _own(self, pod: PodInfo) -> Constraints | None:
        """The pod's own constraints, compiled once per PodInfo (None: it has none)."""
        if not pod.pod.spec.topology_spread_constraints:
            return None  # most pods: nothing to compile, nothing kept on the PodInfo
        known: Any = pod.extra.get(_OWN_KEY, _UNSEEN)
        if known is not _UNSEEN:
            found: Constraints | None = known
            return found
        found = own_constraints(pod.pod) if pod.pod.spec.topology_spread_constraints else None
        pod.extra[_OWN_KEY] = found
        return found

    def _from_defaults(self, pod: PodInfo) -> Constraints:
        """The default constraints with the pod's default selector; built once per selector and
        namespace (what they depend on besides the pod's labels, which the selector's memo keys)."""
        selector = self._selectors.selector(pod)
        if selector is None:
            return NONE
        key = (pod.pod.metadata.namespace, id(selector))
        known = self._built.get(key)
        if known is not None and known[0] is selector:
            return known[1]
        built = default_constraints(self._defaults, selector, pod.pod)
        if len(self._built) >= _BUILT_LIMIT:
            self._built.clear()
        self._built[key] = (selector, built)
        return built

    def constraints(self, pod: PodInfo, *, hard: bool) -> tuple[Constraint, ...]:
        """``getConstraints``: the pod's hard (or soft) constraints, else the defaults'."""
        own = self._own(pod)
        if own is not None:
            return own.hard if hard else own.soft
        if not (self._hard_defaults if hard else self._soft_defaults):
            return ()
        built = self._from_defaults(pod)
        return built.hard if hard else built.soft

    # --- filter --------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        constraints = self.constraints(pod, hard=True)
        if not constraints:
            return None, SKIP
        snap = self._handle.snapshot
        state.write(_PRE_FILTER_KEY, filtering.compute(snap, self._masks, pod, constraints))
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def _pre_filter_state(self, state: CycleState, pod: PodInfo) -> filtering.PreFilterState | None:
        known = state.read_optional(_PRE_FILTER_KEY, filtering.PreFilterState)
        if known is not None:
            return known
        # PreFilter did not run (a direct Filter call): compute what it would have.
        constraints = self.constraints(pod, hard=True)
        if not constraints:
            return None
        return filtering.compute(self._handle.snapshot, self._masks, pod, constraints)

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        return self._update(state, to_add, node, 1)

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status:
        return self._update(state, to_remove, node, -1)

    def _update(self, state: CycleState, other: PodInfo, node: NodeInfo, delta: int) -> Status:
        known = state.read_optional(_PRE_FILTER_KEY, filtering.PreFilterState)
        if known is None:
            return Status(Code.ERROR, f'reading "{_PRE_FILTER_KEY}" from cycleState: not found')
        known.update(other, node, delta)
        return SUCCESS

    def filter_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Codes:
        """0 where every hard constraint holds; else the first failing one's code
        (:data:`filtering.CODE_MISSING_LABEL` or :data:`filtering.CODE_SKEW`)."""
        known = self._pre_filter_state(state, pod)
        if known is None:
            return np.zeros(len(rows), dtype=np.int64)
        return filtering.filter_rows(known, rows)

    def explain(self, state: CycleState, pod: PodInfo, code: int) -> Status:
        return filtering.explain(code)

    # --- score ---------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        """Skip without soft constraints (own or default) or without nodes to score."""
        constraints = self.constraints(pod, hard=False)
        snap = self._handle.snapshot
        if not constraints or len(rows) == 0 or snap.n == 0:
            return SKIP
        # Only the pod's own constraints and List defaults require every key on a node:
        # with the system defaults a node without a zone label still spreads by hostname.
        require_all = pod.pod.spec.topology_spread_constraints != [] or not self._system_defaulted
        state.write(_PRE_SCORE_KEY, scoring.compute(snap, self._masks, pod, constraints, rows, require_all))
        return SUCCESS

    def _pre_score_state(self, state: CycleState) -> scoring.PreScoreState:
        return state.read(_PRE_SCORE_KEY, scoring.PreScoreState)

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        return scoring.score_rows(self._pre_score_state(state), rows)

    def normalize_score(self, state: CycleState, pod: PodInfo, rows: Rows, scores: Scores) -> Status:
        scoring.normalize(self._pre_score_state(state), rows, scores)
        return SUCCESS

    # --- queueing hints ------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ASSIGNED_POD_ADD, self._after_pod_add),
            ClusterEventWithHint(ASSIGNED_POD_UPDATE, self._after_pod_update),
            ClusterEventWithHint(ASSIGNED_POD_DELETE, self._after_pod_delete),
            ClusterEventWithHint(NODE_ADD, self._after_node_change),
            ClusterEventWithHint(NODE_UPDATE, self._after_node_change),
            ClusterEventWithHint(NODE_DELETE, self._after_node_change),
        ]

    def _hard(self, pod: PodInfo) -> tuple[Constraint, ...]:
        return self.constraints(pod, hard=True)

    @staticmethod
    def _involved(other: Pod, pod: PodInfo) -> bool:
        """``involvedInTopologySpreading``: the pod itself, or a bound pod of its namespace."""
        return other.identity == pod.uid or (
            other.spec.node_name != "" and other.metadata.namespace == pod.pod.metadata.namespace
        )

    def _after_pod_add(self, pod: PodInfo, old: Any, new: Any) -> bool:
        """A bound pod of the namespace that one of the constraints selects appeared."""
        return self._pod_counts(pod, new)

    def _after_pod_delete(self, pod: PodInfo, old: Any, new: Any) -> bool:
        return self._pod_counts(pod, old)

    def _pod_counts(self, pod: PodInfo, other: Any) -> bool:
        if not isinstance(other, Pod):
            return True  # nothing to judge by: retry
        return self._involved(other, pod) and any(c.matches(other) for c in self._hard(pod))

    def _after_pod_update(self, pod: PodInfo, old: Any, new: Any) -> bool:
        if not isinstance(new, Pod) or not isinstance(old, Pod):
            return True
        if not self._involved(new, pod) or not self._involved(old, pod):
            return False
        if old.metadata.labels == new.metadata.labels:
            return False
        return any(c.matches(old) != c.matches(new) for c in self._hard(pod))

    def _after_node_change(self, pod: PodInfo, old: Any, new: Any) -> bool:
        """Queue when the node starts or stops having every key, or keeps them and a key's
        value or the taints changed; a deleted node we cannot see is assumed to matter."""
        if not isinstance(new, Node):
            return True  # a deletion: the scheduler's event carries no node
        keys = [c.topology_key for c in self._hard(pod)]
        now = all(k in new.metadata.labels for k in keys)
        if not isinstance(old, Node):
            return now
        before = all(k in old.metadata.labels for k in keys)
        if before != now:
            return True
        if not now:
            return False
        changed = any(old.metadata.labels.get(k) != new.metadata.labels.get(k) for k in keys)
        return changed or old.spec.taints != new.spec.taints


if TYPE_CHECKING:
    # The extension points PodTopologySpread implements; mypy checks each line, nothing runs.
    _pre_filter: type[PreFilterPlugin] = PodTopologySpread
    _filter: type[BatchFilterPlugin] = PodTopologySpread
    _pre_score: type[PreScorePlugin] = PodTopologySpread
    _score: type[BatchScorePlugin] = PodTopologySpread
    _normalize_score: type[NormalizeScorePlugin] = PodTopologySpread
    _enqueue_extensions: type[EnqueueExtensions] = PodTopologySpread
    _extensions: type[PreFilterExtensions] = PodTopologySpread
