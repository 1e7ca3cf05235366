"""The affinity terms of the pods already placed, grouped by term, with per-row counts.

Upstream walks ``PodsWithRequiredAntiAffinity`` (Filter) and ``PodsWithAffinity`` (Score) on
every node in every cycle. Here the placed pods' terms are kept as the snapshot changes: one
:class:`Group` per distinct term (and, for scoring, weight), counting on each node row how
many placed pods carry it. A pod then asks each distinct term once whether it matches,
instead of once per placed pod, and the matching groups' row counts fold into per-domain
counts in one kernel pass each. Pods without pod (anti-)affinity cost one attribute test.

Attached to the snapshot once (``of``), shared by every profile; the ``hardPodAffinityWeight``
of a profile's args is applied when scoring, not here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from koordsched.api.core import Node, Pod
from koordsched.framework.snapshot import I64, NodeInfo, Snapshot
from koordsched.framework.types import PodInfo
from koordsched.plugins.interpodaffinity.terms import AffinityTerm, pod_terms

log = logging.getLogger(__name__)

#: Distinct (namespace, labels) answers remembered per kind before starting over.
_MEMO_LIMIT = 4096
#: Below this many groups a pod checks them directly rather than through the memo.
_DIRECT = 4


@dataclass(eq=False)
class Group:
    """Placed pods carrying one term: how many on each row.

    ``weight`` is signed for preferred terms (negative: anti-affinity); ``hard`` marks a
    required affinity term, weighted by the profile's ``hardPodAffinityWeight``.
    """

    term: AffinityTerm
    weight: int = 0
    hard: bool = False
    #: A required anti-affinity term (Filter), not a scoring one.
    anti: bool = False
    counts: I64 = field(default_factory=lambda: np.zeros(8, dtype=np.int64))
    pods: int = 0


GroupKey = tuple[AffinityTerm, int, bool]
_MemoKey = tuple[str, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]


class ExistingTerms:
    """SnapshotListener: the placed pods' terms, required anti-affinity apart from the scoring ones."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self.anti: dict[GroupKey, Group] = {}
        self.scoring: dict[GroupKey, Group] = {}
        #: (node name, pod uid) -> the groups the pod was counted in (once per term).
        self._added: dict[tuple[str, str], tuple[Group, ...]] = {}
        #: Moves whenever a group appears or goes away (the memos below are then void).
        self.epoch = 0
        self._memo: dict[bool, tuple[int, dict[_MemoKey, tuple[Group, ...]]]] = {}
        for info in snapshot.infos:
            for pod in info.pods.values():
                self.on_pod_added(info, pod)

    @classmethod
    def of(cls, snapshot: Snapshot) -> ExistingTerms:
        for listener in snapshot.listeners:
            if isinstance(listener, cls):
                return listener
        index = cls(snapshot)
        snapshot.listeners.append(index)
        return index

    # --- queries ---------------------------------------------------------------------------

    def matching(self, anti: bool, pod: Pod, ns_labels: Mapping[str, str]) -> tuple[Group, ...]:
        """The groups (required anti-affinity, or scoring) whose term matches ``pod``,
        whose namespace has ``ns_labels``."""
        groups = self.anti if anti else self.scoring
        if not groups:
            return ()
        if len(groups) <= _DIRECT:
            return tuple(g for g in groups.values() if g.term.matches(pod, ns_labels))
        meta = pod.metadata
        key = (meta.namespace, tuple(sorted(meta.labels.items())), tuple(sorted(ns_labels.items())))
        epoch, memo = self._memo.get(anti, (-1, {}))
        if epoch != self.epoch:
            memo = {}
            self._memo[anti] = (self.epoch, memo)
        found = memo.get(key)
        if found is None:
            if len(memo) >= _MEMO_LIMIT:
                memo.clear()
            found = memo[key] = tuple(g for g in groups.values() if g.term.matches(pod, ns_labels))
        return found

    def counts(self, group: Group) -> I64:
        """The group's per-row counts, at least as long as the snapshot's rows."""
        size = len(self._snapshot.row_gen)
        if len(group.counts) < size:
            group.counts = _grown(group.counts, size)
        return group.counts

    # --- upkeep ----------------------------------------------------------------------------

    def _group(self, groups: dict[GroupKey, Group], key: GroupKey) -> Group:
        found = groups.get(key)
        if found is None:
            size = len(self._snapshot.row_gen)
            found = groups[key] = Group(key[0], key[1], key[2], groups is self.anti, np.zeros(size, np.int64))
            self.epoch += 1
        return found

    def _groups_of(self, pod: PodInfo) -> tuple[Group, ...]:
        terms = pod_terms(pod)
        if terms.error is not None:
            # The API server refuses such a pod; a hand-written manifest may not. Upstream drops
            # the kind that fails to parse and keeps the others: so does this.
            log.warning("pod %s: affinity terms ignored: %s", pod.key, terms.error)
        out = [self._group(self.anti, (t, 0, False)) for t in terms.anti_affinity]
        out += [self._group(self.scoring, (t, 0, True)) for t in terms.affinity]
        out += [self._group(self.scoring, (w.term, w.weight, False)) for w in terms.preferred_affinity]
        out += [self._group(self.scoring, (w.term, -w.weight, False)) for w in terms.preferred_anti_affinity]
        return tuple(out)

    def on_pod_added(self, info: NodeInfo, pod: PodInfo) -> None:
        affinity = pod.pod.spec.affinity
        if affinity is None or (affinity.pod_affinity is None and affinity.pod_anti_affinity is None):
            return
        groups = self._groups_of(pod)
        if not groups:
            return
        row = info.row
        for g in groups:
            counts = self.counts(g) if row >= len(g.counts) else g.counts
            counts[row] += 1
            g.pods += 1
        self._added[(info.name, pod.uid)] = groups

    def on_pod_removed(self, info: NodeInfo, pod: PodInfo) -> None:
        groups = self._added.pop((info.name, pod.uid), None)
        if groups is None:
            return
        row = info.row
        for g in groups:
            g.counts[row] -= 1
            g.pods -= 1
            if g.pods == 0:
                table = self.anti if g.anti else self.scoring
                key = (g.term, g.weight, g.hard)
                if table.get(key) is g:
                    del table[key]
                    self.epoch += 1

    def _all_groups(self) -> list[Group]:
        return [*self.anti.values(), *self.scoring.values()]

    def on_node_added(self, info: NodeInfo) -> None:
        for g in self._all_groups():
            if info.row < len(g.counts):
                g.counts[info.row] = 0

    def on_node_updated(self, info: NodeInfo, old: Node) -> None:
        return None

    def on_node_removed(self, info: NodeInfo, moved: NodeInfo | None) -> None:
        # The node's pods were taken off first (Cache.remove_node): its row holds 0. The moved
        # node's counts follow it from the last row.
        last = self._snapshot.n
        for g in self._all_groups():
            counts = g.counts
            if moved is not None and last < len(counts):
                counts[moved.row] = counts[last]
                counts[last] = 0
            elif info.row < len(counts):
                counts[info.row] = 0


def _grown(counts: I64, size: int) -> I64:
    grown = np.zeros(max(size, 2 * len(counts)), dtype=np.int64)
    grown[: len(counts)] = counts
    return grown
