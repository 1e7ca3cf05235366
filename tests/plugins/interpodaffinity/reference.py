"""A plain InterPodAffinity, written straight from upstream's algorithm, to check the plugin against.

Topology pairs (key, value) map to counts exactly as kube-scheduler's PreFilter and PreScore
build them, by walking every pod on every node; nothing is indexed or cached.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from koordsched.api.core import LabelSelector, LabelSelectorRequirement, Node, Pod, PodAffinityTerm
from koordsched.api.selectors import match_label_selector

Pair = tuple[str, str]
AFFINITY, ANTI, EXISTING = 1, 2, 3


@dataclass
class RefTerm:
    namespaces: set[str]
    ns_selector: LabelSelector | None
    selector: LabelSelector | None
    key: str
    weight: int = 0

    def matches(self, pod: Pod, ns_labels: Mapping[str, str] | None) -> bool:
        ns_ok = pod.metadata.namespace in self.namespaces or (
            self.ns_selector is not None and match_label_selector(self.ns_selector, ns_labels or {})
        )
        return ns_ok and match_label_selector(self.selector, pod.metadata.labels)


def _term(pod: Pod, t: PodAffinityTerm, weight: int = 0) -> RefTerm:
    sel = t.label_selector
    if sel is not None and (t.match_label_keys or t.mismatch_label_keys):
        named = set(sel.match_labels) | {r.key for r in sel.match_expressions}
        labels = pod.metadata.labels
        extra = [
            LabelSelectorRequirement(key=k, operator=op, values=[labels[k]])
            for keys, op in ((t.match_label_keys, "In"), (t.mismatch_label_keys, "NotIn"))
            for k in keys
            if k in labels and k not in named
        ]
        sel = LabelSelector(match_labels=sel.match_labels, match_expressions=[*sel.match_expressions, *extra])
    if not t.namespaces and t.namespace_selector is None:
        namespaces = {pod.metadata.namespace}
    else:
        namespaces = set(t.namespaces)
    return RefTerm(namespaces, t.namespace_selector, sel, t.topology_key, weight)


def terms(pod: Pod, kind: str) -> list[RefTerm]:
    aff = pod.spec.affinity
    if aff is None:
        return []
    group = aff.pod_affinity if kind in ("affinity", "preferred") else aff.pod_anti_affinity
    if group is None:
        return []
    if kind in ("affinity", "anti"):
        return [_term(pod, t) for t in group.required_during_scheduling_ignored_during_execution]
    return [
        _term(pod, w.pod_affinity_term, w.weight)
        for w in group.preferred_during_scheduling_ignored_during_execution
    ]


def resolve(t: RefTerm, namespaces: Mapping[str, Mapping[str, str]]) -> RefTerm:
    """``mergeAffinityTermNamespacesIfNotEmpty`` for the incoming pod's terms."""
    sel = t.ns_selector
    if sel is None or (not sel.match_labels and not sel.match_expressions):
        return t
    picked = {n for n, labels in namespaces.items() if match_label_selector(sel, labels)}
    return RefTerm(t.namespaces | picked, None, t.selector, t.key, t.weight)


def _all(ts: list[RefTerm], pod: Pod) -> bool:
    return bool(ts) and all(t.matches(pod, None) for t in ts)


def _add(m: dict[Pair, int], node: Node, key: str, v: int) -> None:
    value = node.metadata.labels.get(key)
    if value is not None:
        m[(key, value)] = m.get((key, value), 0) + v
        if m[(key, value)] == 0:
            del m[(key, value)]


def filter_codes(
    pod: Pod,
    placed: list[tuple[Node, Pod]],
    nodes: list[Node],
    namespaces: Mapping[str, Mapping[str, str]],
) -> list[int]:
    ns_labels = namespaces.get(pod.metadata.namespace, {})
    aff = [resolve(t, namespaces) for t in terms(pod, "affinity")]
    anti = [resolve(t, namespaces) for t in terms(pod, "anti")]
    existing: dict[Pair, int] = {}
    aff_counts: dict[Pair, int] = {}
    anti_counts: dict[Pair, int] = {}
    for node, other in placed:
        for t in terms(other, "anti"):
            if t.matches(pod, ns_labels):
                _add(existing, node, t.key, 1)
        if _all(aff, other):
            for t in aff:
                _add(aff_counts, node, t.key, 1)
        for t in anti:
            if t.matches(other, None):
                _add(anti_counts, node, t.key, 1)
    out = []
    for node in nodes:
        labels = node.metadata.labels
        code = 0
        pods_exist = True
        missing = False
        for t in aff:
            if t.key not in labels:
                missing = True
            elif aff_counts.get((t.key, labels[t.key]), 0) <= 0:
                pods_exist = False
        if missing or (not pods_exist and not (not aff_counts and _all(aff, pod))):
            code = AFFINITY
        elif any(t.key in labels and anti_counts.get((t.key, labels[t.key]), 0) > 0 for t in anti):
            code = ANTI
        elif any(existing.get((k, v), 0) > 0 for k, v in labels.items()):
            code = EXISTING
        out.append(code)
    return out


def scores(
    pod: Pod,
    placed: list[tuple[Node, Pod]],
    nodes: list[Node],
    namespaces: Mapping[str, Mapping[str, str]],
    hard_weight: int,
    ignore_existing: bool,
) -> list[int] | None:
    """Normalized scores over ``nodes``; None where PreScore returns Skip."""
    preferred = [resolve(t, namespaces) for t in terms(pod, "preferred")]
    preferred_anti = [resolve(t, namespaces) for t in terms(pod, "preferred_anti")]
    if ignore_existing and not preferred and not preferred_anti:
        return None
    ns_labels = namespaces.get(pod.metadata.namespace, {})
    topo: dict[Pair, int] = {}
    entries = 0

    def process(
        t: RefTerm, weight: int, target: Pod, labels_of_ns: Mapping[str, str] | None, node: Node
    ) -> None:
        nonlocal entries
        if t.matches(target, labels_of_ns) and t.key in node.metadata.labels:
            pair = (t.key, node.metadata.labels[t.key])
            topo[pair] = topo.get(pair, 0) + weight
            entries += 1

    for node, other in placed:
        for t in preferred:
            process(t, t.weight, other, None, node)
        for t in preferred_anti:
            process(t, -t.weight, other, None, node)
        if hard_weight > 0:
            for t in terms(other, "affinity"):
                process(t, hard_weight, pod, ns_labels, node)
        for t in terms(other, "preferred"):
            process(t, t.weight, pod, ns_labels, node)
        for t in terms(other, "preferred_anti"):
            process(t, -t.weight, pod, ns_labels, node)
    if not entries:
        return None
    raw = [sum(topo.get((k, v), 0) for k, v in node.metadata.labels.items()) for node in nodes]
    low, high = min(raw), max(raw)
    if high - low <= 0:
        return [0] * len(raw)
    return [int(100.0 * (float(s - low) / float(high - low))) for s in raw]
