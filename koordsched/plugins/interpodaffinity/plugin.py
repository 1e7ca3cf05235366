"""InterPodAffinity: required pod (anti-)affinity as a filter, preferred terms as a score.

The adapter for the extension points, as upstream's ``plugin.go``; the work is in
:mod:`~koordsched.plugins.interpodaffinity.filtering` and
:mod:`~koordsched.plugins.interpodaffinity.scoring`, over the placed pods' terms kept in
:mod:`~koordsched.plugins.interpodaffinity.existing` and the snapshot's topology domains and
match counts (:mod:`koordsched.framework.pod_topology`).

A pod without pod (anti-)affinity, in a cluster where no placed pod has any, costs two
dictionary lookups: PreFilter and PreScore both return Skip.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from koordsched.api.kinds import NAMESPACES
from koordsched.framework.batch import FilterCodes
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
    NODE_UPDATE,
    ActionType,
    ClusterEvent,
    PodInfo,
    PreFilterResult,
)
from koordsched.plugins.helper import as_rows
from koordsched.plugins.interpodaffinity import filtering, hints, scoring
from koordsched.plugins.interpodaffinity.args import InterPodAffinityArgs
from koordsched.plugins.interpodaffinity.existing import ExistingTerms
from koordsched.plugins.interpodaffinity.terms import PodTerms, pod_terms

NAME = "InterPodAffinity"
_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME
_NO_LABELS: Mapping[str, str] = {}

NAMESPACE_ADD = ClusterEvent(NAMESPACES.kind, ActionType.ADD, "NamespaceAdd")
NAMESPACE_UPDATE = ClusterEvent(NAMESPACES.kind, ActionType.UPDATE, "NamespaceUpdate")
NAMESPACE_DELETE = ClusterEvent(NAMESPACES.kind, ActionType.DELETE, "NamespaceDelete")


class InterPodAffinity:
    name = NAME

    def __init__(self, args: InterPodAffinityArgs | None, handle: Handle) -> None:
        args = args if args is not None else InterPodAffinityArgs()
        args.validate()
        self._args = args
        self._handle = handle
        self._codes = FilterCodes(NAME, filtering.FILTER_STATUSES)
        # Attach the placed pods' index now, so it follows the cluster from the first event.
        self._snapshot = handle.snapshot
        self._existing = ExistingTerms.of(self._snapshot)

    def _index(self) -> ExistingTerms:
        snap = self._handle.snapshot
        if snap is not self._snapshot:
            self._snapshot = snap
            self._existing = ExistingTerms.of(snap)
        return self._existing

    # --- namespaces ------------------------------------------------------------------------

    def _ns_labels(self, namespace: str) -> Mapping[str, str]:
        """``GetNamespaceLabelsSnapshot``: the namespace's labels, none if it is not known."""
        ns = self._handle.objects(NAMESPACES).get(namespace)
        return ns.metadata.labels if ns is not None else _NO_LABELS

    def _namespaces(self, terms: PodTerms) -> Mapping[str, Mapping[str, str]] | None:
        """Name -> labels of every Namespace, when some term selects namespaces by labels."""
        if not terms.needs_namespaces:
            return None
        return {
            ns.metadata.name or key: ns.metadata.labels
            for key, ns in self._handle.objects(NAMESPACES).items()
        }

    # --- PreFilter / Filter ----------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        affinity = pod.pod.spec.affinity
        if (
            affinity is None or (affinity.pod_affinity is None and affinity.pod_anti_affinity is None)
        ) and not (self._index().anti):
            return None, SKIP  # the usual pod, in the usual cluster: nothing to look at
        terms = pod_terms(pod)
        if terms.error is not None:
            return None, Status.unresolvable(f"parsing pod: {terms.error}")
        snap = self._handle.snapshot
        if not terms.required and not self._index().anti:
            return None, SKIP
        namespace = pod.pod.metadata.namespace
        built = filtering.build(snap, pod, terms, self._ns_labels(namespace), self._namespaces(terms))
        if built is None:
            return None, SKIP
        state.write(_PRE_FILTER_KEY, built)
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        return self._update(state, to_add, node, 1)

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status:
        return self._update(state, to_remove, node, -1)

    def _update(self, state: CycleState, other: PodInfo, node: NodeInfo, sign: int) -> Status:
        s = state.read_optional(_PRE_FILTER_KEY, filtering.PreFilterState)
        if s is None:
            return Status(Code.ERROR, f'error reading "{_PRE_FILTER_KEY}" from cycleState: not found')
        filtering.update(s, self._handle.snapshot, other, node, sign)
        return SUCCESS

    def filter_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Codes:
        s = state.read_optional(_PRE_FILTER_KEY, filtering.PreFilterState)
        if s is None or len(rows) == 0:
            return np.zeros(len(rows), dtype=np.int64)
        return filtering.filter_rows(s, self._handle.snapshot, as_rows(rows))

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """The per-node Filter, for callers outside the batch path."""
        code = int(self.filter_batch(state, pod, np.asarray([node.row], dtype=np.int64))[0])
        return SUCCESS if code == 0 else self.explain(state, pod, code)

    def explain(self, state: CycleState, pod: PodInfo, code: int) -> Status:
        return self._codes.status(code)

    # --- PreScore / Score ------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        affinity = pod.pod.spec.affinity
        if (affinity is None or (affinity.pod_affinity is None and affinity.pod_anti_affinity is None)) and (
            self._args.ignore_preferred_terms_of_existing_pods or not self._index().scoring
        ):
            return SKIP
        terms = pod_terms(pod)
        if terms.error is not None:
            return Status(Code.ERROR, f"failed to parse pod: {terms.error}")
        has_preferred = bool(terms.preferred_affinity or terms.preferred_anti_affinity)
        if not has_preferred and (
            self._args.ignore_preferred_terms_of_existing_pods or not self._index().scoring
        ):
            return SKIP
        namespace = pod.pod.metadata.namespace
        built = scoring.build(
            self._handle.snapshot,
            pod,
            terms,
            self._ns_labels(namespace),
            self._namespaces(terms),
            self._args.hard_pod_affinity_weight,
        )
        if built is None:
            return SKIP
        state.write(_PRE_SCORE_KEY, built)
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        s = state.read_optional(_PRE_SCORE_KEY, scoring.PreScoreState)
        if s is None or len(rows) == 0:
            return np.zeros(len(rows), dtype=np.int64)
        return scoring.score_rows(s, self._handle.snapshot, as_rows(rows))

    def normalize_score(self, state: CycleState, pod: PodInfo, rows: Rows, scores: Scores) -> Status:
        if state.read_optional(_PRE_SCORE_KEY, scoring.PreScoreState) is not None:
            scoring.normalize(scores)
        return SUCCESS

    # --- queueing --------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ASSIGNED_POD_ADD, hints.after_pod_add),
            ClusterEventWithHint(ASSIGNED_POD_UPDATE, hints.after_pod_update),
            ClusterEventWithHint(ASSIGNED_POD_DELETE, hints.after_pod_delete),
            ClusterEventWithHint(NODE_ADD, hints.after_node_change),
            ClusterEventWithHint(NODE_UPDATE, hints.after_node_change),
            ClusterEventWithHint(NAMESPACE_ADD, hints.after_namespace_change),
            ClusterEventWithHint(NAMESPACE_UPDATE, hints.after_namespace_change),
            ClusterEventWithHint(NAMESPACE_DELETE, hints.after_namespace_change),
        ]


if TYPE_CHECKING:
    _pre_filter: type[PreFilterPlugin] = InterPodAffinity
    _filter: type[BatchFilterPlugin] = InterPodAffinity
    _pre_score: type[PreScorePlugin] = InterPodAffinity
    _score: type[BatchScorePlugin] = InterPodAffinity
    _normalize_score: type[NormalizeScorePlugin] = InterPodAffinity
    _enqueue_extensions: type[EnqueueExtensions] = InterPodAffinity
    _extensions: type[PreFilterExtensions] = InterPodAffinity
