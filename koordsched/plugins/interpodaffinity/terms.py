"""A pod's affinity terms, compiled once: namespaces, label selectors and topology keys.

Mirrors upstream's ``framework.AffinityTerm`` and ``PodInfo`` parsing:

* ``namespaces`` empty and ``namespaceSelector`` nil: the pod's own namespace;
* a nil ``namespaceSelector`` selects no namespace, an empty one every namespace;
* a nil ``labelSelector`` selects no pod, an empty one every pod;
* ``matchLabelKeys`` / ``mismatchLabelKeys`` are ANDed into the label selector from the
  pod's own labels as ``key In (value)`` / ``key NotIn (value)``, as the API server does at
  creation (1.31+). A key the selector already names was merged there (validation forbids
  it otherwise) and is not merged twice.

A term that cannot be parsed makes the whole list of its kind empty, as upstream's
``GetAffinityTerms`` returns nothing on error; the error is kept, and the incoming pod is
refused with it at PreFilter (``parsing pod: ...``).

Compiling is cached by the terms' encoded form and namespace, so the replicas of one
workload share one compiled value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import msgspec

from koordsched.api.core import (
    LabelSelector,
    LabelSelectorRequirement,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    WeightedPodAffinityTerm,
)
from koordsched.api.selectors import (
    OP_DOES_NOT_EXIST,
    OP_EXISTS,
    OP_IN,
    OP_NOT_IN,
    SelectorError,
    validate_label_selector,
)
from koordsched.framework.pod_topology import Term
from koordsched.framework.types import PodInfo

_IN, _NOT_IN, _EXISTS, _DOES_NOT_EXIST = 0, 1, 2, 3
_OPS: Final = {OP_IN: _IN, OP_NOT_IN: _NOT_IN, OP_EXISTS: _EXISTS, OP_DOES_NOT_EXIST: _DOES_NOT_EXIST}
_NO_LABELS: Mapping[str, str] = {}


@dataclass(frozen=True, slots=True)
class Selector:
    """A parsed label selector; equal selectors compare and hash equal."""

    labels: tuple[tuple[str, str], ...] = ()
    exprs: tuple[tuple[str, int, frozenset[str]], ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for key, value in self.labels:
            if labels.get(key) != value:
                return False
        for key, op, values in self.exprs:
            have = labels.get(key)
            if op == _IN:
                if have is None or have not in values:
                    return False
            elif op == _NOT_IN:
                if have is not None and have in values:
                    return False
            elif op == _EXISTS:
                if have is None:
                    return False
            elif have is not None:
                return False
        return True

    @property
    def everything(self) -> bool:
        return not self.nothing and not self.labels and not self.exprs


EVERYTHING: Final = Selector()
NOTHING: Final = Selector(nothing=True)


def compile_selector(sel: LabelSelector | None) -> Selector:
    """``metav1.LabelSelectorAsSelector``; raises :class:`SelectorError` as it would fail."""
    if sel is None:
        return NOTHING
    validate_label_selector(sel)
    exprs = tuple((r.key, _OPS[r.operator], frozenset(r.values)) for r in sel.match_expressions)
    return Selector(tuple(sorted(sel.match_labels.items())), exprs)


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """One pod affinity term of a pod, as upstream's ``AffinityTerm``.

    ``label_selector`` is the (merged) selector as an API object, for the shared per-row
    match counts (:class:`~koordsched.framework.pod_topology.MatchCounts`).
    """

    namespaces: frozenset[str]
    #: NOTHING (nil) selects no namespace by labels, EVERYTHING (empty) every namespace.
    ns_selector: Selector
    selector: Selector
    topology_key: str
    label_selector: LabelSelector | None = field(compare=False, hash=False)

    def matches(self, pod: Pod, ns_labels: Mapping[str, str] | None) -> bool:
        """``AffinityTerm.Matches``: the pod's namespace is selected and its labels match."""
        meta = pod.metadata
        if meta.namespace in self.namespaces or self.ns_selector.matches(
            ns_labels if ns_labels is not None else _NO_LABELS
        ):
            return self.selector.matches(meta.labels)
        return False

    def count_term(self) -> Term | None:
        """The term for the shared per-row counts; None when it selects no pod at all.

        Only valid for a term whose namespace selector was resolved (``resolved``): the counts
        know namespaces by name only.
        """
        if self.selector.nothing or (not self.namespaces and not self.ns_selector.everything):
            return None
        namespaces = None if self.ns_selector.everything else self.namespaces
        return Term(namespaces, self.label_selector or LabelSelector())

    def resolved(self, namespaces: Mapping[str, Mapping[str, str]]) -> AffinityTerm:
        """The incoming pod's term with its namespace selector unrolled into names
        (``mergeAffinityTermNamespacesIfNotEmpty``): an empty selector stays (every namespace)."""
        if self.ns_selector.nothing or self.ns_selector.everything:
            return self
        picked = {name for name, labels in namespaces.items() if self.ns_selector.matches(labels)}
        return AffinityTerm(
            self.namespaces | picked, NOTHING, self.selector, self.topology_key, self.label_selector
        )


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int
    term: AffinityTerm


@dataclass(frozen=True, slots=True)
class PodTerms:
    """All four kinds of a pod's inter-pod affinity terms (empty tuples where absent)."""

    affinity: tuple[AffinityTerm, ...] = ()
    anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedTerm, ...] = ()
    #: Why some kind could not be parsed (that kind is then empty), as upstream's aggregate.
    error: str | None = None

    @property
    def required(self) -> bool:
        return bool(self.affinity or self.anti_affinity)

    @property
    def any(self) -> bool:
        return bool(
            self.affinity or self.anti_affinity or self.preferred_affinity or self.preferred_anti_affinity
        )

    @property
    def needs_namespaces(self) -> bool:
        """Whether some term selects namespaces by labels (resolved against Namespace objects)."""
        return any(
            not t.ns_selector.nothing and not t.ns_selector.everything
            for t in (
                *self.affinity,
                *self.anti_affinity,
                *(w.term for w in self.preferred_affinity),
                *(w.term for w in self.preferred_anti_affinity),
            )
        )


EMPTY: Final = PodTerms()


def _merged_selector(term: PodAffinityTerm, labels: Mapping[str, str]) -> LabelSelector | None:
    sel = term.label_selector
    if sel is None or (not term.match_label_keys and not term.mismatch_label_keys):
        return sel
    named = set(sel.match_labels) | {r.key for r in sel.match_expressions}
    extra = [
        LabelSelectorRequirement(key=k, operator=op, values=[labels[k]])
        for keys, op in ((term.match_label_keys, OP_IN), (term.mismatch_label_keys, OP_NOT_IN))
        for k in keys
        if k in labels and k not in named
    ]
    if not extra:
        return sel
    return LabelSelector(match_labels=sel.match_labels, match_expressions=[*sel.match_expressions, *extra])


def _term(namespace: str, term: PodAffinityTerm, labels: Mapping[str, str], where: str) -> AffinityTerm:
    merged = _merged_selector(term, labels)
    try:
        selector = compile_selector(merged)
    except SelectorError as err:
        raise SelectorError(f"{where}.labelSelector: {err}") from None
    try:
        ns_selector = compile_selector(term.namespace_selector)
    except SelectorError as err:
        raise SelectorError(f"{where}.namespaceSelector: {err}") from None
    if not term.namespaces and term.namespace_selector is None:
        namespaces = frozenset((namespace,))
    else:
        namespaces = frozenset(term.namespaces)
    return AffinityTerm(namespaces, ns_selector, selector, term.topology_key, merged)


def _required(
    namespace: str, terms: list[PodAffinityTerm], labels: Mapping[str, str], kind: str, errors: list[str]
) -> tuple[AffinityTerm, ...]:
    try:
        return tuple(_term(namespace, t, labels, f"[{i}]") for i, t in enumerate(terms))
    except SelectorError as err:
        errors.append(f"{kind}: {err}")
        return ()


def _preferred(
    namespace: str,
    terms: list[WeightedPodAffinityTerm],
    labels: Mapping[str, str],
    kind: str,
    errors: list[str],
) -> tuple[WeightedTerm, ...]:
    try:
        return tuple(
            WeightedTerm(w.weight, _term(namespace, w.pod_affinity_term, labels, f"[{i}].podAffinityTerm"))
            for i, w in enumerate(terms)
        )
    except SelectorError as err:
        errors.append(f"{kind}: {err}")
        return ()


def compile_terms(pod: Pod) -> PodTerms:
    """The pod's terms, uncached (see :func:`pod_terms`)."""
    affinity = pod.spec.affinity
    if affinity is None:
        return EMPTY
    pa, anti = affinity.pod_affinity, affinity.pod_anti_affinity
    if pa is None and anti is None:
        return EMPTY
    ns = pod.metadata.namespace
    labels = pod.metadata.labels
    errors: list[str] = []
    none = PodAffinity()
    pa = pa or none
    anti = anti or none
    out = PodTerms(
        _required(
            ns,
            pa.required_during_scheduling_ignored_during_execution,
            labels,
            "requiredAffinityTerms",
            errors,
        ),
        _required(
            ns,
            anti.required_during_scheduling_ignored_during_execution,
            labels,
            "requiredAntiAffinityTerms",
            errors,
        ),
        _preferred(
            ns,
            pa.preferred_during_scheduling_ignored_during_execution,
            labels,
            "preferredAffinityTerms",
            errors,
        ),
        _preferred(
            ns,
            anti.preferred_during_scheduling_ignored_during_execution,
            labels,
            "preferredAntiAffinityTerms",
            errors,
        ),
        (errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]") if errors else None,
    )
    return out if out.any or out.error else EMPTY


def _label_keys(pod: Pod) -> tuple[str, ...]:
    """Every matchLabelKeys / mismatchLabelKeys entry of the pod's terms (the labels compiling reads)."""
    affinity = pod.spec.affinity
    assert affinity is not None
    keys: list[str] = []
    for group in (affinity.pod_affinity, affinity.pod_anti_affinity):
        if group is None:
            continue
        for t in group.required_during_scheduling_ignored_during_execution:
            keys += t.match_label_keys + t.mismatch_label_keys
        for w in group.preferred_during_scheduling_ignored_during_execution:
            keys += w.pod_affinity_term.match_label_keys + w.pod_affinity_term.mismatch_label_keys
    return tuple(keys)


_ENCODE = msgspec.msgpack.Encoder()
#: (namespace, encoded terms, the label values they merge) -> compiled terms.
_CACHE: dict[tuple[str, bytes, tuple[str | None, ...]], PodTerms] = {}
_CACHE_LIMIT = 4096
_EXTRA_KEY = "InterPodAffinity"


def pod_terms(pod: PodInfo) -> PodTerms:
    """The pod's compiled terms, kept on the PodInfo and shared between pods with equal terms.

    Kept with the Pod object they were compiled from: a PodInfo whose pod was replaced (a
    bound pod's update keeps ``extra``) is compiled again, since its labels may have changed.
    """
    spec_pod = pod.pod
    cached = pod.extra.get(_EXTRA_KEY)
    if cached is not None and cached[0] is spec_pod:
        terms: PodTerms = cached[1]
        return terms
    affinity = spec_pod.spec.affinity
    if affinity is None or (affinity.pod_affinity is None and affinity.pod_anti_affinity is None):
        terms = EMPTY
    else:
        keys = _label_keys(spec_pod)
        labels = spec_pod.metadata.labels
        key = (
            spec_pod.metadata.namespace,
            _ENCODE.encode((affinity.pod_affinity, affinity.pod_anti_affinity)),
            tuple(labels.get(k) for k in keys),
        )
        found = _CACHE.get(key)
        if found is None:
            if len(_CACHE) >= _CACHE_LIMIT:
                _CACHE.clear()
            found = _CACHE[key] = compile_terms(spec_pod)
        terms = found
    pod.extra[_EXTRA_KEY] = (spec_pod, terms)
    return terms


def matches_all(terms: tuple[AffinityTerm, ...], pod: Pod) -> bool:
    """``podMatchesAllAffinityTerms`` for the incoming pod's (resolved) terms: no terms, no match."""
    if not terms:
        return False
    return all(t.matches(pod, None) for t in terms)


def combined_count_term(terms: tuple[AffinityTerm, ...]) -> Term | None:
    """One counting term for "matches every one of ``terms``" (resolved terms); None: no pod can."""
    if len(terms) == 1:
        return terms[0].count_term()
    namespaces: frozenset[str] | None = None
    exprs: list[LabelSelectorRequirement] = []
    for t in terms:
        single = t.count_term()
        if single is None:
            return None
        if single.namespaces is not None:
            namespaces = single.namespaces if namespaces is None else namespaces & single.namespaces
        sel = single.selector
        exprs += [
            LabelSelectorRequirement(key=k, operator=OP_IN, values=[v]) for k, v in sel.match_labels.items()
        ]
        exprs += sel.match_expressions
    if namespaces is not None and not namespaces:
        return None
    return Term(namespaces, LabelSelector(match_expressions=exprs))
