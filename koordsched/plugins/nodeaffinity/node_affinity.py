"""NodeAffinity: ``spec.nodeSelector`` and required node affinity filter nodes; preferred terms score them.

What a pod asks for is compiled once per spec object (``framework.shared_memo``) and then
evaluated over every row at once with the snapshot's label columns (see
:mod:`koordsched.plugins.nodeaffinity.selector`). Malformed terms match nothing, as
upstream's lazy selector drops them, and a malformed *preferred* term fails PreScore
with an Error, as upstream's ``NewPreferredSchedulingTerms`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from koordsched.api.core import NodeSelectorTerm, Pod, PreferredSchedulingTerm
from koordsched.api.selectors import FIELD_METADATA_NAME, OP_IN, SelectorError, validate_node_selector_term
from koordsched.config.catalog import ArgsError
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
from koordsched.framework.shared_memo import IdentityMemo
from koordsched.framework.status import SKIP, SUCCESS, Code, Status
from koordsched.framework.types import NODE_ADD, NODE_UPDATE, PodInfo, PreFilterResult
from koordsched.kernels.resources import mask_codes
from koordsched.plugins.helper import as_rows, default_normalize_score
from koordsched.plugins.nodeaffinity.args import NodeAffinityArgs
from koordsched.plugins.nodeaffinity.selector import Masks, Term, compile_term, compile_terms

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

#: Filter codes.
CODE_POD = 1
CODE_ENFORCED = 2

_POD_STATUS = Status.unresolvable(ERR_REASON_POD)
_ENFORCED_STATUS = Status.unresolvable(ERR_REASON_ENFORCED)
_PRE_FILTER_KEY = "PreFilterNodeAffinity"
_PRE_SCORE_KEY = "PreScoreNodeAffinity"
#: A pod's compiled constraints, per spec object (they read nothing else; frozen values).
_COMPILED: IdentityMemo[tuple[_Required, _Preferred]] = IdentityMemo()


@dataclass(frozen=True, slots=True)
class _Required:
    """A pod's hard constraints: nodeSelector pairs and, when given, the required terms (ORed)."""

    node_selector: tuple[tuple[str, str], ...]
    terms: tuple[Term, ...] | None

    @property
    def empty(self) -> bool:
        return not self.node_selector and self.terms is None


@dataclass(frozen=True, slots=True)
class _Preferred:
    terms: tuple[tuple[int, Term], ...]
    error: str | None


def _required_of(pod: Pod) -> _Required:
    affinity = pod.spec.affinity
    node_affinity = affinity.node_affinity if affinity is not None else None
    required = node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
    terms = None if required is None else compile_terms(required.node_selector_terms)
    return _Required(tuple(pod.spec.node_selector.items()), terms)


def _preferred_terms(prefs: list[PreferredSchedulingTerm]) -> _Preferred:
    """``NewPreferredSchedulingTerms``: weight-0 and empty terms are dropped; a malformed one is an error."""
    out: list[tuple[int, Term]] = []
    errors: list[str] = []
    for i, pref in enumerate(prefs):
        if pref.weight == 0:
            continue
        term = compile_term(pref.preference)
        if term is not None:
            out.append((pref.weight, term))
        elif pref.preference.match_expressions or pref.preference.match_fields:
            try:
                validate_node_selector_term(pref.preference, 0)
            except SelectorError as err:
                errors.append(f"[{i}].preference.{str(err).removeprefix('nodeSelectorTerms[0].')}")
            else:
                errors.append(f"[{i}].preference: invalid node selector term")
    return _Preferred(tuple(out), ", ".join(errors) or None)


def _preferred_of(pod: Pod) -> _Preferred:
    affinity = pod.spec.affinity
    node_affinity = affinity.node_affinity if affinity is not None else None
    if node_affinity is None:
        return _Preferred((), None)
    return _preferred_terms(node_affinity.preferred_during_scheduling_ignored_during_execution)


def _node_names(terms: list[NodeSelectorTerm]) -> set[str] | None:
    """Upstream PreFilter's narrowing: the union over terms of each term's ANDed ``metadata.name In`` sets.

    None when some term names no node (that term can match any node).
    """
    names: set[str] = set()
    for term in terms:
        term_names: set[str] | None = None
        for req in term.match_fields:
            if req.key == FIELD_METADATA_NAME and req.operator == OP_IN:
                values = set(req.values)
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        names |= term_names
    return names


class NodeAffinity:
    name = "NodeAffinity"

    def __init__(self, args: NodeAffinityArgs | None, handle: Handle) -> None:
        args = args if args is not None else NodeAffinityArgs()
        args.validate()
        self._handle = handle
        self._masks = Masks()
        added = args.added_affinity
        self._added_required: tuple[Term, ...] | None = None
        self._added_preferred: tuple[tuple[int, Term], ...] = ()
        if added is not None:
            required = added.required_during_scheduling_ignored_during_execution
            if required is not None:
                self._added_required = compile_terms(required.node_selector_terms)
            preferred = _preferred_terms(added.preferred_during_scheduling_ignored_during_execution)
            if preferred.error is not None:  # validate() should have caught it
                raise ArgsError(
                    f"addedAffinity.preferredDuringSchedulingIgnoredDuringExecution{preferred.error}"
                )
            self._added_preferred = preferred.terms

    def _compiled(self, pod: PodInfo) -> tuple[_Required, _Preferred]:
        spec = pod.pod.spec
        cached = _COMPILED.get(spec)
        if cached is None:
            cached = _COMPILED.put(spec, (_required_of(pod.pod), _preferred_of(pod.pod)))
        return cached

    # --- filter --------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        required, _ = self._compiled(pod)
        if required.empty and self._added_required is None:
            return None, SKIP
        state.write(_PRE_FILTER_KEY, required)
        affinity = pod.pod.spec.affinity
        node_affinity = affinity.node_affinity if affinity is not None else None
        selector = (
            node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
        )
        if selector is None or not selector.node_selector_terms:
            return None, SUCCESS
        names = _node_names(selector.node_selector_terms)
        if names is None:
            return None, SUCCESS
        if not names:
            return None, Status.unresolvable(ERR_REASON_CONFLICT)
        return PreFilterResult(names), SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Codes:
        """CODE_ENFORCED where the added affinity fails (checked first), else CODE_POD where the pod's."""
        snap = self._handle.snapshot
        required = state.read_optional(_PRE_FILTER_KEY, _Required)
        if required is None:
            required = self._compiled(pod)[0]
        codes: Codes | None = None
        mask = self._masks.labels_equal(snap, required.node_selector)
        if required.terms is not None:
            terms = self._masks.any_term(snap, required.terms)
            mask = terms if mask is None else mask & terms
        if mask is not None:
            codes = mask_codes(mask, as_rows(rows), False, CODE_POD)
        if self._added_required is not None:
            added = self._masks.any_term(snap, self._added_required)
            if codes is None:
                codes = np.zeros(len(rows), dtype=np.int64)
            codes[~added[rows]] = CODE_ENFORCED
        return codes if codes is not None else np.zeros(len(rows), dtype=np.int64)

    def explain(self, state: CycleState, pod: PodInfo, code: int) -> Status:
        return _ENFORCED_STATUS if code == CODE_ENFORCED else _POD_STATUS

    # --- score ---------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        """Skip when neither the pod nor the args have a preferred term; Error for a malformed one."""
        _, preferred = self._compiled(pod)
        if preferred.error is not None:
            return Status(Code.ERROR, preferred.error)
        if not preferred.terms and not self._added_preferred:
            return SKIP
        state.write(_PRE_SCORE_KEY, preferred)
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        """Sum of the weights of the preferred terms (the args' and the pod's) each node matches."""
        snap = self._handle.snapshot
        preferred = state.read_optional(_PRE_SCORE_KEY, _Preferred)
        if preferred is None:
            preferred = self._compiled(pod)[1]
        scores = np.zeros(len(rows), dtype=np.int64)
        for weight, term in (*self._added_preferred, *preferred.terms):
            scores[self._masks.term(snap, term)[rows]] += weight
        return scores

    def normalize_score(self, state: CycleState, pod: PodInfo, rows: Rows, scores: Scores) -> Status:
        default_normalize_score(scores, reverse=False)
        return SUCCESS

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(NODE_ADD), ClusterEventWithHint(NODE_UPDATE)]


if TYPE_CHECKING:
    # The extension points NodeAffinity implements; mypy checks each line, nothing runs.
    _pre_filter: type[PreFilterPlugin] = NodeAffinity
    _filter: type[BatchFilterPlugin] = NodeAffinity
    _pre_score: type[PreScorePlugin] = NodeAffinity
    _score: type[BatchScorePlugin] = NodeAffinity
    _normalize_score: type[NormalizeScorePlugin] = NodeAffinity
    _enqueue_extensions: type[EnqueueExtensions] = NodeAffinity


__all__ = ["ERR_REASON_CONFLICT", "ERR_REASON_ENFORCED", "ERR_REASON_POD", "NodeAffinity"]
