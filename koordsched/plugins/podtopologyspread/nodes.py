"""Which nodes count as a constraint's domains, as boolean columns over the snapshot rows.

A node counts when it has every constraint's topology key and, per constraint, passes the
node inclusion policies (``matchNodeInclusionPolicies``): with nodeAffinityPolicy Honor it
matches the pod's nodeSelector and required node affinity (malformed terms match nothing,
as upstream ignores their parse errors), with nodeTaintsPolicy Honor the pod tolerates its
NoSchedule and NoExecute taints. The affinity column is NodeAffinity's selector evaluation
over the snapshot's label columns; the taint column is one answer per taint set
(``Snapshot.taint_sets``), kept per toleration list and spread to rows by ``taint_class``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from koordsched.api.core import Pod, Toleration
from koordsched.api.taints import NO_EXECUTE, NO_SCHEDULE, find_untolerated_taint
from koordsched.framework.pod_topology import TopologyDomains
from koordsched.framework.snapshot import BoolArray, Snapshot
from koordsched.framework.types import PodInfo
from koordsched.plugins.nodeaffinity.selector import Masks, Term, compile_terms

_EFFECTS = (NO_SCHEDULE, NO_EXECUTE)
_EXTRA_KEY = "PodTopologySpread/requiredAffinity"
#: Distinct toleration lists remembered; past this the tables start over.
_CACHE_LIMIT = 4096


@dataclass(frozen=True, slots=True)
class RequiredAffinity:
    """``nodeaffinity.GetRequiredNodeAffinity``: nodeSelector pairs and the required terms (ORed;
    None when the pod has no required node affinity)."""

    node_selector: tuple[tuple[str, str], ...]
    terms: tuple[Term, ...] | None

    @property
    def empty(self) -> bool:
        return not self.node_selector and self.terms is None


def required_affinity(pod: PodInfo) -> RequiredAffinity:
    known: RequiredAffinity | None = pod.extra.get(_EXTRA_KEY)
    if known is None:
        known = pod.extra[_EXTRA_KEY] = _required_of(pod.pod)
    return known


def _required_of(pod: Pod) -> RequiredAffinity:
    affinity = pod.spec.affinity
    node_affinity = affinity.node_affinity if affinity is not None else None
    required = node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
    terms = None if required is None else compile_terms(required.node_selector_terms)
    return RequiredAffinity(tuple(pod.spec.node_selector.items()), terms)


class NodeMasks:
    """Builds the per-row columns; remembers the taint-set answers per toleration list."""

    def __init__(self) -> None:
        self._affinity = Masks()
        self._snapshot: Snapshot | None = None
        self._tolerated: dict[tuple[Toleration, ...], BoolArray] = {}

    def has_keys(self, snap: Snapshot, domains: TopologyDomains, keys: Sequence[str]) -> BoolArray:
        """Rows whose node has every key (``nodeLabelsMatchSpreadConstraints``)."""
        n = snap.n
        mask = domains.column(keys[0])[:n] >= 0
        for key in keys[1:]:
            mask &= domains.column(key)[:n] >= 0
        return mask

    def affinity(self, snap: Snapshot, pod: PodInfo) -> BoolArray | None:
        """Rows matching the pod's required node affinity; None when every row does."""
        req = required_affinity(pod)
        if req.empty:
            return None
        mask = self._affinity.labels_equal(snap, req.node_selector)
        if req.terms is not None:
            terms = self._affinity.any_term(snap, req.terms)
            mask = terms if mask is None else mask & terms
        return mask

    def tolerated(self, snap: Snapshot, pod: PodInfo) -> BoolArray | None:
        """Rows whose NoSchedule/NoExecute taints the pod tolerates; None when every row's are."""
        if snap is not self._snapshot:
            self._snapshot = snap
            self._tolerated = {}
        tolerations = pod.pod.spec.tolerations
        key = tuple(tolerations)
        table = self._tolerated.get(key)
        sets = snap.taint_sets
        if table is None or len(table) < len(sets):
            known = 0 if table is None else len(table)
            fresh = [find_untolerated_taint(ts, tolerations, _EFFECTS) is None for ts in sets[known:]]
            grown = np.asarray(fresh, dtype=np.bool_)
            table = grown if table is None else np.concatenate([table, grown])
            if len(self._tolerated) >= _CACHE_LIMIT:
                self._tolerated.clear()
            self._tolerated[key] = table
        if table.all():
            return None
        out: BoolArray = table[snap.taint_class[: snap.n]]
        return out
