"""InterPodAffinity's PreScore, Score and NormalizeScore.

Upstream's PreScore sums, per topology pair, the weights of:

* the incoming pod's preferred affinity (+weight) and anti-affinity (-weight) terms, for every
  placed pod each term matches;
* every placed pod's preferred affinity (+) and anti-affinity (-) terms that match the
  incoming pod, and its required affinity terms that do (+``hardPodAffinityWeight``).

A node's score is the sum over its labels of those pair totals; NormalizeScore scales the
candidates' scores linearly so the lowest becomes 0 and the highest 100. Here the pair totals
are per-domain arrays per topology key, built by one kernel pass per term (incoming pod) or per
matching group of placed pods' terms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from koordsched.framework.cycle_state import StateData
from koordsched.framework.pod_topology import MatchCounts, TopologyDomains
from koordsched.framework.snapshot import I64, Snapshot
from koordsched.framework.types import MAX_NODE_SCORE, PodInfo
from koordsched.plugins.interpodaffinity import kernels
from koordsched.plugins.interpodaffinity.existing import ExistingTerms
from koordsched.plugins.interpodaffinity.terms import PodTerms


@dataclass
class PreScoreState(StateData):
    #: Topology key -> summed weight per domain id.
    keys: dict[str, I64]

    def clone(self) -> PreScoreState:
        return self


def build(
    snap: Snapshot,
    pod: PodInfo,
    terms: PodTerms,
    ns_labels: Mapping[str, str],
    namespaces: Mapping[str, Mapping[str, str]] | None,
    hard_weight: int,
) -> PreScoreState | None:
    """The per-domain sums; None when no term matched any pod on a node with its key
    (upstream's Skip: every score would be 0)."""
    domains = TopologyDomains.of(snap)
    n = snap.n
    keys: dict[str, I64] = {}
    seen = 0

    def add(counts: I64, tk: str, weight: int) -> None:
        nonlocal seen
        out = keys.get(tk)
        if out is None:
            out = keys[tk] = np.zeros(domains.count(tk), dtype=np.int64)
        seen += kernels.add_domain_counts(counts, domains.column(tk), n, out, weight)

    preferred = [(w.weight, w.term) for w in terms.preferred_affinity]
    preferred += [(-w.weight, w.term) for w in terms.preferred_anti_affinity]
    if preferred:
        counts = MatchCounts.of(snap)
        for weight, term in preferred:
            resolved = term.resolved(namespaces) if namespaces is not None else term
            ct = resolved.count_term()
            if ct is not None:
                add(counts.per_row(ct), term.topology_key, weight)
    index = ExistingTerms.of(snap)
    for g in index.matching(False, pod.pod, ns_labels):
        if g.hard:
            if hard_weight <= 0:
                continue
            add(index.counts(g), g.term.topology_key, hard_weight)
        else:
            add(index.counts(g), g.term.topology_key, g.weight)
    return PreScoreState(keys) if seen else None


def score_rows(state: PreScoreState, snap: Snapshot, rows: I64) -> I64:
    """Each row's raw score: the sums of the domains it is in (negative for anti-affinity)."""
    out = np.zeros(len(rows), dtype=np.int64)
    domains = TopologyDomains.of(snap)
    for tk, per_domain in state.keys.items():
        kernels.add_gathered(rows, domains.column(tk), per_domain, out)
    return out


def normalize(scores: I64) -> None:
    """Upstream's NormalizeScore, in place: ``int64(100 * ((s - min) / (max - min)))``, 0 if all equal."""
    if len(scores) == 0:
        return
    low = int(scores.min())
    spread = int(scores.max()) - low
    if spread <= 0:
        scores[:] = 0
        return
    scaled = float(MAX_NODE_SCORE) * ((scores - low).astype(np.float64) / float(spread))
    scores[:] = scaled.astype(np.int64)
