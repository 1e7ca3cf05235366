"""Queueing hints: whether a cluster change may let a pod this plugin rejected pass its Filter.

Upstream registers Pod add/label update/delete and Node add/label update with hints. These
answer "maybe" in every case upstream's do, and also where upstream's answer "no" although
the pod could now fit (a deleted pod whose own anti-affinity blocked it; a new node for a pod
with anti-affinity only; the last matching pod leaving, so the "first pod of the group" rule
applies). A term that selects namespaces by labels counts as selecting any namespace here:
hints run without the Namespace objects, and a spare retry is cheaper than a missed one.
Namespace changes are registered too, since namespace selectors read their labels.
"""

from __future__ import annotations

from typing import Any

from koordsched.api.core import Node, Pod
from koordsched.api.workloads import Namespace
from koordsched.framework.types import PodInfo
from koordsched.plugins.interpodaffinity.terms import AffinityTerm, PodTerms, compile_terms, pod_terms


def _loose(term: AffinityTerm, pod: Pod) -> bool:
    """``term.matches`` with any namespace selector taken as selecting the pod's namespace."""
    meta = pod.metadata
    if meta.namespace in term.namespaces or not term.ns_selector.nothing:
        return term.selector.matches(meta.labels)
    return False


def _all(terms: tuple[AffinityTerm, ...], pod: Pod) -> bool:
    return bool(terms) and all(_loose(t, pod) for t in terms)


def _any(terms: tuple[AffinityTerm, ...], pod: Pod) -> bool:
    return any(_loose(t, pod) for t in terms)


def _blocks(placed: Pod, target: Pod) -> bool:
    """Whether a placed pod's required anti-affinity may match the target."""
    return _any(compile_terms(placed).anti_affinity, target)


def _first_of_group(terms: PodTerms, target: Pod, placed: Pod) -> bool:
    """Losing ``placed`` may leave no pod matching the target's affinity, which the target matches."""
    return _all(terms.affinity, placed) and _all(terms.affinity, target)


def after_pod_add(target: PodInfo, old: Any, new: Any) -> bool:
    """A pod was placed (our own bind confirmed carries the pending version as ``old``: ignored).
    Only the target's required affinity can gain from it."""
    if not isinstance(new, Pod) or not new.spec.node_name:
        return not isinstance(new, Pod)
    return _all(pod_terms(target).affinity, new)


def after_pod_update(target: PodInfo, old: Any, new: Any) -> bool:
    """A placed pod's labels changed."""
    if not isinstance(old, Pod) or not isinstance(new, Pod):
        return True
    if not new.spec.node_name or old.metadata.labels == new.metadata.labels:
        return False
    terms = pod_terms(target)
    pod = target.pod
    if not _all(terms.affinity, old) and _all(terms.affinity, new):
        return True
    if any(_loose(t, old) and not _loose(t, new) for t in terms.anti_affinity):
        return True
    if compile_terms(old).anti_affinity != compile_terms(new).anti_affinity and _blocks(old, pod):
        return True  # matchLabelKeys: its terms follow its labels
    return _first_of_group(terms, pod, old) and not _all(terms.affinity, new)


def after_pod_delete(target: PodInfo, old: Any, new: Any) -> bool:
    """A placed pod went away: it may have been what the target's anti-affinity met, or whose
    anti-affinity met the target, or the last pod its affinity matched."""
    if not isinstance(old, Pod):
        return True
    if not old.spec.node_name:
        return False
    terms = pod_terms(target)
    pod = target.pod
    return _any(terms.anti_affinity, old) or _blocks(old, pod) or _first_of_group(terms, pod, old)


def after_node_change(target: PodInfo, old: Any, new: Any) -> bool:
    if not isinstance(new, Node):
        return True
    if isinstance(old, Node) and old.metadata.labels == new.metadata.labels:
        return False
    # A node lacking a key of the required affinity fails it whatever else changes.
    labels = new.metadata.labels
    return all(t.topology_key in labels for t in pod_terms(target).affinity)


def after_namespace_change(target: PodInfo, old: Any, new: Any) -> bool:
    ns = new if isinstance(new, Namespace) else old
    if isinstance(ns, Namespace) and ns.metadata.name == target.pod.metadata.namespace:
        return True  # placed pods' namespace selectors read the target's namespace labels
    terms = pod_terms(target)
    return any(not t.ns_selector.nothing for t in (*terms.affinity, *terms.anti_affinity))
