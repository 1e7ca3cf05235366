"""InterPodAffinity's PreFilter state, its preemption updates (AddPod/RemovePod) and Filter.

Upstream's PreFilter builds three maps from topology pair (key, value) to a count:

* existing pods whose required anti-affinity matches the incoming pod (on every pair of the
  node they run on, for their term's key);
* existing pods matching *all* of the incoming pod's required affinity terms (for each term's key);
* existing pods matching each of its required anti-affinity terms (for that term's key).

Here each becomes, per topology key, an array indexed by domain id. The incoming pod's counts
come from the snapshot's per-row match counts (``MatchCounts``), the existing pods' from
:class:`~koordsched.plugins.interpodaffinity.existing.ExistingTerms`; either is one kernel pass
per term over the rows. Filter then reads the arrays back per candidate row.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from koordsched.api.core import Pod
from koordsched.framework.cycle_state import StateData
from koordsched.framework.pod_topology import MatchCounts, TopologyDomains
from koordsched.framework.snapshot import I64, NodeInfo, Snapshot
from koordsched.framework.status import Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.interpodaffinity import kernels
from koordsched.plugins.interpodaffinity.existing import ExistingTerms
from koordsched.plugins.interpodaffinity.terms import (
    AffinityTerm,
    PodTerms,
    combined_count_term,
    matches_all,
    pod_terms,
)

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

#: Filter code -> Status, with upstream's codes: no node can be made to match the pod's
#: affinity by removing pods, so that one is UnschedulableAndUnresolvable.
FILTER_STATUSES: Mapping[int, Status] = {
    kernels.CODE_AFFINITY: Status.unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH),
    kernels.CODE_ANTI_AFFINITY: Status.unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH),
    kernels.CODE_EXISTING_ANTI_AFFINITY: Status.unschedulable(
        ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH
    ),
}


class KeyCounts:
    """Per domain of one topology key: the three counts of upstream's maps."""

    __slots__ = ("affinity", "anti", "existing", "is_affinity")

    def __init__(self, size: int) -> None:
        self.affinity: I64 = np.zeros(size, dtype=np.int64)
        self.anti: I64 = np.zeros(size, dtype=np.int64)
        self.existing: I64 = np.zeros(size, dtype=np.int64)
        #: A key of the pod's required affinity: a node must have it.
        self.is_affinity = False

    def fit(self, size: int) -> None:
        """Make room for domain ids below ``size`` (domains seen after PreFilter)."""
        if len(self.affinity) < size:
            for name in ("affinity", "anti", "existing"):
                old = getattr(self, name)
                new = np.zeros(size, dtype=np.int64)
                new[: len(old)] = old
                setattr(self, name, new)


@dataclass
class PreFilterState(StateData):
    pod: Pod
    #: The pod's required terms with their namespace selectors resolved to names.
    affinity: tuple[AffinityTerm, ...]
    anti_affinity: tuple[AffinityTerm, ...]
    #: The labels of the pod's namespace (matched by placed pods' namespace selectors).
    ns_labels: Mapping[str, str]
    keys: dict[str, KeyCounts]
    #: The pod matches all its own required affinity terms (upstream's "first pod" rule).
    self_match: bool

    def clone(self) -> PreFilterState:
        keys = {}
        for k, v in self.keys.items():
            c = copy.copy(v)
            c.affinity, c.anti, c.existing = v.affinity.copy(), v.anti.copy(), v.existing.copy()
            keys[k] = c
        return PreFilterState(
            self.pod, self.affinity, self.anti_affinity, self.ns_labels, keys, self.self_match
        )


def _key(keys: dict[str, KeyCounts], domains: TopologyDomains, key: str) -> KeyCounts:
    found = keys.get(key)
    size = domains.count(key)
    if found is None:
        found = keys[key] = KeyCounts(size)
    else:
        found.fit(size)
    return found


def build(
    snap: Snapshot,
    pod: PodInfo,
    terms: PodTerms,
    ns_labels: Mapping[str, str],
    namespaces: Mapping[str, Mapping[str, str]] | None,
) -> PreFilterState | None:
    """The state for Filter; None when there is nothing to check (upstream's Skip).

    ``namespaces`` (name -> labels) is needed only when some term selects namespaces by labels.
    """
    index = ExistingTerms.of(snap)
    domains = TopologyDomains.of(snap)
    n = snap.n
    keys: dict[str, KeyCounts] = {}
    seen = 0
    for g in index.matching(True, pod.pod, ns_labels):
        tk = g.term.topology_key
        seen += kernels.add_domain_counts(
            index.counts(g), domains.column(tk), n, _key(keys, domains, tk).existing, 1
        )
    if not terms.required and seen == 0:
        return None
    affinity, anti = terms.affinity, terms.anti_affinity
    if namespaces is not None:
        affinity = tuple(t.resolved(namespaces) for t in affinity)
        anti = tuple(t.resolved(namespaces) for t in anti)
    counts = MatchCounts.of(snap)
    if affinity:
        combined = combined_count_term(affinity)
        per_row = counts.per_row(combined) if combined is not None else None
        for tk in dict.fromkeys(t.topology_key for t in affinity):
            kc = _key(keys, domains, tk)
            kc.is_affinity = True
            if per_row is not None:
                kernels.add_domain_counts(per_row, domains.column(tk), n, kc.affinity, 1)
    for t in anti:
        ct = t.count_term()
        if ct is not None:
            tk = t.topology_key
            kernels.add_domain_counts(
                counts.per_row(ct), domains.column(tk), n, _key(keys, domains, tk).anti, 1
            )
    return PreFilterState(pod.pod, affinity, anti, ns_labels, keys, matches_all(affinity, pod.pod))


def update(state: PreFilterState, snap: Snapshot, other: PodInfo, node: NodeInfo, sign: int) -> None:
    """``preFilterState.updateWithPod``: ``other`` added to (1) or removed from (-1) ``node``."""
    domains = TopologyDomains.of(snap)
    keys = state.keys

    def bump(tk: str, field: str) -> None:
        d = int(domains.column(tk)[node.row])
        if d >= 0:
            kc = _key(keys, domains, tk)
            getattr(kc, field)[d] += sign

    for t in pod_terms(other).anti_affinity:
        if t.matches(state.pod, state.ns_labels):
            bump(t.topology_key, "existing")
    if matches_all(state.affinity, other.pod):
        for tk in dict.fromkeys(t.topology_key for t in state.affinity):
            bump(tk, "affinity")
    for t in state.anti_affinity:
        if t.matches(other.pod, None):
            bump(t.topology_key, "anti")


def filter_rows(state: PreFilterState, snap: Snapshot, rows: I64) -> I64:
    """Each row's filter code (0: the node passes)."""
    keys = state.keys
    if not any(kc.is_affinity or kc.anti.any() or kc.existing.any() for kc in keys.values()):
        return np.zeros(len(rows), dtype=np.int64)
    domains = TopologyDomains.of(snap)
    flags = np.zeros(len(rows), dtype=np.uint8)
    first_of_group = state.self_match
    for tk, kc in keys.items():
        kernels.mark_key(rows, domains.column(tk), kc.affinity, kc.anti, kc.existing, kc.is_affinity, flags)
        if kc.is_affinity and kc.affinity.any():
            first_of_group = False
    return kernels.filter_codes(flags, first_of_group)
