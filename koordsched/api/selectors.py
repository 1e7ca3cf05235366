"""Label and node selector matching with the Kubernetes semantics the scheduler relies on.

The matchers check the structure the Go code checks when it builds a selector (a valid
operator, the right number of values) so that a malformed selector fails the same way
whatever labels it meets. Key and value *syntax* is only checked by the ``validate_*``
functions: that costs regexes, and the API server has already enforced it for any object
read from a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Final

from koordsched.api.core import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
)

__all__ = [
    "OP_DOES_NOT_EXIST",
    "OP_EXISTS",
    "OP_GT",
    "OP_IN",
    "OP_LT",
    "OP_NOT_IN",
    "SelectorError",
    "is_qualified_name",
    "is_valid_label_value",
    "match_label_selector",
    "match_node_selector",
    "match_node_selector_requirement",
    "match_node_selector_term",
    "pod_matches_node_selector_and_affinity",
    "validate_label_selector",
    "validate_node_selector",
    "validate_node_selector_term",
]

OP_IN: Final = "In"
OP_NOT_IN: Final = "NotIn"
OP_EXISTS: Final = "Exists"
OP_DOES_NOT_EXIST: Final = "DoesNotExist"
OP_GT: Final = "Gt"
OP_LT: Final = "Lt"

#: The only field a node selector term's matchFields may name.
FIELD_METADATA_NAME: Final = "metadata.name"

_LABEL_SELECTOR_OPS: Final = frozenset((OP_IN, OP_NOT_IN, OP_EXISTS, OP_DOES_NOT_EXIST))
_NODE_SELECTOR_OPS: Final = frozenset((OP_IN, OP_NOT_IN, OP_EXISTS, OP_DOES_NOT_EXIST, OP_GT, OP_LT))
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_INT_RE: Final = re.compile(r"[+-]?[0-9]+")
_NAME_RE: Final = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS1123_SUBDOMAIN_RE: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class SelectorError(ValueError):
    """A selector Kubernetes would refuse to build (bad operator, wrong number of values, bad key)."""


# --- syntax -------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def is_qualified_name(value: str) -> bool:
    """k8s ``IsQualifiedName``: ``[dns-subdomain/]name``, the shape of label keys and resource names."""
    prefix, slash, name = value.rpartition("/")
    if slash:
        if "/" in prefix or not prefix or len(prefix) > 253:
            return False
        if _DNS1123_SUBDOMAIN_RE.fullmatch(prefix) is None:
            return False
    return 0 < len(name) <= 63 and _NAME_RE.fullmatch(name) is not None


@lru_cache(maxsize=4096)
def is_valid_label_value(value: str) -> bool:
    """k8s ``IsValidLabelValue``: empty, or at most 63 alphanumerics with ``-_.`` inside."""
    return value == "" or (len(value) <= 63 and _NAME_RE.fullmatch(value) is not None)


@lru_cache(maxsize=4096)
def _parse_int64(value: str) -> int | None:
    """Go's ``strconv.ParseInt(value, 10, 64)``: None where Go returns an error."""
    if _INT_RE.fullmatch(value) is None:
        return None
    n = int(value)
    return n if _INT64_MIN <= n <= _INT64_MAX else None


# --- structural checks (what NewRequirement rejects) ---------------------------------------------


def _check_requirement(operator: str, values: list[str], allowed: frozenset[str], what: str) -> None:
    if operator not in allowed:
        raise SelectorError(f"{operator!r} is not a valid {what} operator")
    n = len(values)
    if operator in (OP_IN, OP_NOT_IN):
        if n == 0:
            raise SelectorError(f"operator {operator} needs at least one value")
    elif operator in (OP_EXISTS, OP_DOES_NOT_EXIST):
        if n:
            raise SelectorError(f"operator {operator} must not have values")
    elif n != 1 or _parse_int64(values[0]) is None:
        raise SelectorError(f"operator {operator} needs exactly one integer value, got {values!r}")


def _check_field_requirement(req: NodeSelectorRequirement) -> None:
    if req.key != FIELD_METADATA_NAME:
        raise SelectorError(f"field {req.key!r} is not supported in matchFields (only {FIELD_METADATA_NAME})")
    if req.operator not in (OP_IN, OP_NOT_IN):
        raise SelectorError(f"{req.operator!r} is not a valid field selector operator (In or NotIn)")
    if len(req.values) != 1:
        raise SelectorError(f"field selector operator {req.operator} needs exactly one value")


def _matches(operator: str, key: str, values: list[str], labels: Mapping[str, str]) -> bool:
    """``labels.Requirement.Matches`` for an already checked requirement."""
    value = labels.get(key)
    if operator == OP_IN:
        return value is not None and value in values
    if operator == OP_NOT_IN:
        return value is None or value not in values
    if operator == OP_EXISTS:
        return value is not None
    if operator == OP_DOES_NOT_EXIST:
        return value is None
    # Gt / Lt: a missing or non-integer label value never matches.
    if value is None:
        return False
    have = _parse_int64(value)
    want = _parse_int64(values[0])
    if have is None or want is None:
        return False
    return have > want if operator == OP_GT else have < want


# --- label selectors -----------------------------------------------------------------------------


def match_label_selector(sel: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """``LabelSelectorAsSelector(sel).Matches(labels)``.

    A nil selector selects nothing while an empty one selects everything: that is how
    Kubernetes tells "no selector given" from "match all" (e.g. in pod affinity terms).
    """
    if sel is None:
        return False
    exprs = sel.match_expressions
    for req in exprs:
        _check_requirement(req.operator, req.values, _LABEL_SELECTOR_OPS, "label selector")
    for k, v in sel.match_labels.items():
        if labels.get(k) != v:
            return False
    return all(_matches(req.operator, req.key, req.values, labels) for req in exprs)


def _validate_label_requirement(req: LabelSelectorRequirement | NodeSelectorRequirement, where: str) -> None:
    if not is_qualified_name(req.key):
        raise SelectorError(f"{where}: key {req.key!r} is not a valid label key")
    for v in req.values:
        if not is_valid_label_value(v):
            raise SelectorError(f"{where}: key {req.key!r}: value {v!r} is not a valid label value")


def validate_label_selector(sel: LabelSelector | None) -> None:
    """Everything ``LabelSelectorAsSelector`` would reject, including key and value syntax."""
    if sel is None:
        return
    for k, v in sel.match_labels.items():
        if not is_qualified_name(k):
            raise SelectorError(f"matchLabels: key {k!r} is not a valid label key")
        if not is_valid_label_value(v):
            raise SelectorError(f"matchLabels: key {k!r}: value {v!r} is not a valid label value")
    for i, req in enumerate(sel.match_expressions):
        where = f"matchExpressions[{i}]"
        try:
            _check_requirement(req.operator, req.values, _LABEL_SELECTOR_OPS, "label selector")
        except SelectorError as e:
            raise SelectorError(f"{where}: key {req.key!r}: {e}") from None
        _validate_label_requirement(req, where)


# --- node selectors ------------------------------------------------------------------------------


def match_node_selector_requirement(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """One matchExpressions entry against node labels.

    NotIn and DoesNotExist hold when the key is absent; Gt and Lt compare as int64 and
    fail when the label is absent or not an integer. A malformed requirement (unknown
    operator, In without values, Gt with a non-integer) raises :class:`SelectorError`.
    """
    _check_requirement(req.operator, req.values, _NODE_SELECTOR_OPS, "node selector")
    return _matches(req.operator, req.key, req.values, labels)


def match_node_selector_term(term: NodeSelectorTerm, labels: Mapping[str, str], node_name: str) -> bool:
    """All matchExpressions and all matchFields hold; an empty term matches no node.

    The whole term is checked before any of it is evaluated, so a malformed term raises
    whatever node it meets (Go fails to build it at all).
    """
    exprs = term.match_expressions
    fields = term.match_fields
    if not exprs and not fields:
        return False
    for req in exprs:
        _check_requirement(req.operator, req.values, _NODE_SELECTOR_OPS, "node selector")
    for req in fields:
        _check_field_requirement(req)
    for req in exprs:
        if not _matches(req.operator, req.key, req.values, labels):
            return False
    # In: the name is the value; NotIn: it is not.
    return all((node_name == req.values[0]) == (req.operator == OP_IN) for req in fields)


def match_node_selector(ns: NodeSelector, labels: Mapping[str, str], node_name: str) -> bool:
    """Any term matches (no terms: no node).

    A malformed term counts as not matching rather than raising, as upstream's
    NodeAffinity filter ignores the term's error; :func:`validate_node_selector` is
    where such a selector should be reported.
    """
    for term in ns.node_selector_terms:
        try:
            if match_node_selector_term(term, labels, node_name):
                return True
        except SelectorError:
            continue
    return False


def validate_node_selector_term(term: NodeSelectorTerm, index: int = 0) -> None:
    """Raise :class:`SelectorError` naming the term and key of the first malformed requirement."""
    for i, req in enumerate(term.match_expressions):
        where = f"nodeSelectorTerms[{index}].matchExpressions[{i}]"
        try:
            _check_requirement(req.operator, req.values, _NODE_SELECTOR_OPS, "node selector")
        except SelectorError as e:
            raise SelectorError(f"{where}: key {req.key!r}: {e}") from None
        _validate_label_requirement(req, where)
    for i, req in enumerate(term.match_fields):
        try:
            _check_field_requirement(req)
        except SelectorError as e:
            where = f"nodeSelectorTerms[{index}].matchFields[{i}]"
            raise SelectorError(f"{where}: key {req.key!r}: {e}") from None


def validate_node_selector(ns: NodeSelector) -> None:
    """What the API server and the scheduler's selector builder reject, with the term index and key."""
    if not ns.node_selector_terms:
        raise SelectorError("nodeSelectorTerms: must have at least one term")
    for index, term in enumerate(ns.node_selector_terms):
        validate_node_selector_term(term, index)


def pod_matches_node_selector_and_affinity(pod: Pod, labels: Mapping[str, str], node_name: str) -> bool:
    """``spec.nodeSelector`` (every key=value) and required node affinity, as the NodeAffinity filter."""
    for k, v in pod.spec.node_selector.items():
        if labels.get(k) != v:
            return False
    affinity = pod.spec.affinity
    if affinity is None or affinity.node_affinity is None:
        return True
    required = affinity.node_affinity.required_during_scheduling_ignored_during_execution
    if required is None:
        return True
    return match_node_selector(required, labels, node_name)
