"""Node selectors evaluated over all snapshot rows at once, as boolean columns.

A requirement becomes numpy operations on ``Snapshot.label_column`` columns: In is the
OR of equality columns, NotIn its negation (a node without the key satisfies NotIn),
Exists and DoesNotExist the existence column. Gt and Lt need an integer parse, so they
are evaluated per row, only over rows that have the key, and remembered for as long as
that key's existence column is the same object (the snapshot rebuilds its columns
whenever labels or rows change). ``matchFields`` on ``metadata.name`` is a row lookup.

Columns returned by the snapshot are shared; everything here builds new arrays rather
than modifying them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from koordsched.api.core import NodeSelectorRequirement, NodeSelectorTerm
from koordsched.api.selectors import (
    OP_DOES_NOT_EXIST,
    OP_EXISTS,
    OP_IN,
    OP_NOT_IN,
    SelectorError,
    match_node_selector_requirement,
    match_node_selector_term,
)
from koordsched.framework.snapshot import BoolArray, Snapshot

_NO_LABELS: Mapping[str, str] = {}


@dataclass(frozen=True, slots=True)
class Term:
    """A well-formed, non-empty node selector term: all its requirements must hold."""

    exprs: tuple[NodeSelectorRequirement, ...]
    fields: tuple[NodeSelectorRequirement, ...]


def compile_term(term: NodeSelectorTerm) -> Term | None:
    """None for a term that matches no node: empty, or malformed (upstream drops it when parsing)."""
    if not term.match_expressions and not term.match_fields:
        return None
    try:
        match_node_selector_term(term, _NO_LABELS, "")
    except SelectorError:
        return None
    return Term(tuple(term.match_expressions), tuple(term.match_fields))


def compile_terms(terms: Sequence[NodeSelectorTerm]) -> tuple[Term, ...]:
    return tuple(t for t in (compile_term(term) for term in terms) if t is not None)


class Masks:
    """Evaluates requirements and terms to boolean columns over the snapshot's live rows."""

    def __init__(self) -> None:
        self._snapshot: Snapshot | None = None
        #: (operator, key, value) -> (the existence column it was built from, the result).
        self._numeric: dict[tuple[str, str, str], tuple[BoolArray, BoolArray]] = {}

    def _check_snapshot(self, snap: Snapshot) -> None:
        if snap is not self._snapshot:
            self._snapshot = snap
            self._numeric = {}

    def requirement(self, snap: Snapshot, req: NodeSelectorRequirement) -> BoolArray:
        op = req.operator
        if op in (OP_IN, OP_NOT_IN):
            values = list(dict.fromkeys(req.values))
            hit = snap.label_column(req.key, values[0])
            for v in values[1:]:
                hit = hit | snap.label_column(req.key, v)
            return hit if op == OP_IN else ~hit
        exists = snap.label_column(req.key, None)
        if op == OP_EXISTS:
            return exists
        if op == OP_DOES_NOT_EXIST:
            return ~exists
        return self._numeric_requirement(snap, req, exists)

    def _numeric_requirement(
        self, snap: Snapshot, req: NodeSelectorRequirement, exists: BoolArray
    ) -> BoolArray:
        """Gt / Lt: parse the label of each row that has the key (others never match)."""
        self._check_snapshot(snap)
        key = (req.operator, req.key, req.values[0])
        cached = self._numeric.get(key)
        if cached is not None and cached[0] is exists:
            return cached[1]
        out = np.zeros(snap.n, dtype=np.bool_)
        infos = snap.infos
        for row in np.flatnonzero(exists).tolist():
            out[row] = match_node_selector_requirement(req, infos[row].node.metadata.labels)
        if len(self._numeric) > 1024:
            self._numeric.clear()
        self._numeric[key] = (exists, out)
        return out

    def _field(self, snap: Snapshot, req: NodeSelectorRequirement) -> BoolArray:
        """``metadata.name`` In / NotIn one name."""
        out = np.zeros(snap.n, dtype=np.bool_)
        info = snap.by_name.get(req.values[0])
        if info is not None:
            out[info.row] = True
        return out if req.operator == OP_IN else ~out

    def term(self, snap: Snapshot, term: Term) -> BoolArray:
        mask: BoolArray | None = None
        for req in term.exprs:
            m = self.requirement(snap, req)
            mask = m if mask is None else mask & m
        for req in term.fields:
            m = self._field(snap, req)
            mask = m if mask is None else mask & m
        assert mask is not None  # compile_term keeps non-empty terms only
        return mask

    def any_term(self, snap: Snapshot, terms: Sequence[Term]) -> BoolArray:
        """The ORed terms; no terms match no node."""
        if not terms:
            return np.zeros(snap.n, dtype=np.bool_)
        mask = self.term(snap, terms[0])
        for term in terms[1:]:
            mask = mask | self.term(snap, term)
        return mask

    def labels_equal(self, snap: Snapshot, selector: Sequence[tuple[str, str]]) -> BoolArray | None:
        """``spec.nodeSelector``: every key has the value. None when there is nothing to check."""
        mask: BoolArray | None = None
        for key, value in selector:
            m = snap.label_column(key, value)
            mask = m if mask is None else mask & m
        return mask
