"""Topology domains of nodes and counts of matching pods per node, kept as the cluster changes.

InterPodAffinity and PodTopologySpread both ask, for a pod, "how many pods matching this
selector (in these namespaces) are in each topology domain (zone, hostname, ...)?".
kube-scheduler answers by walking every pod on every node in PreFilter. Here the answer is
kept up to date instead, so a pod pays for its question only once per distinct *term*:

* :class:`TopologyDomains` gives every node row a small integer per topology key (the
  domain id of its label value, -1 without the label), maintained as nodes come and go;
* :class:`MatchCounts` keeps, for every term asked about so far, the number of matching
  pods on each row. A term is registered the first time it is asked about (one pass over
  the pods), then every pod added, removed, assumed or forgotten updates the counts of the
  terms it matches. Domain counts are then one ``bincount`` over the rows.

Both attach to the snapshot as :class:`~koordsched.framework.snapshot.SnapshotListener`,
once per snapshot (``of``), shared by every plugin and profile.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from koordsched.api.core import LabelSelector, Node
from koordsched.api.selectors import match_label_selector
from koordsched.framework.snapshot import I64, NodeInfo, Snapshot
from koordsched.framework.types import PodInfo

I32 = npt.NDArray[np.int32]

#: Terms kept before the least recently asked ones are dropped (their counts rebuilt on demand).
MAX_TERMS = 4096


class TopologyDomains:
    """Per topology key, each node row's domain id (-1: the node does not have the label)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        #: key -> (row -> domain id), grown with the snapshot.
        self._columns: dict[str, I32] = {}
        #: key -> value -> id, and key -> id -> value.
        self._ids: dict[str, dict[str, int]] = {}
        self._values: dict[str, list[str]] = {}

    @classmethod
    def of(cls, snapshot: Snapshot) -> TopologyDomains:
        for listener in snapshot.listeners:
            if isinstance(listener, cls):
                return listener
        domains = cls(snapshot)
        snapshot.listeners.append(domains)
        return domains

    def column(self, key: str) -> I32:
        """Domain id per row for ``key`` (only the first ``snapshot.n`` entries mean anything)."""
        col = self._columns.get(key)
        if col is None:
            col = self._columns[key] = np.full(max(8, len(self._snapshot.row_gen)), -1, dtype=np.int32)
            self._ids[key] = {}
            self._values[key] = []
            for info in self._snapshot.infos:
                col[info.row] = self._id(key, info.node.metadata.labels.get(key))
        elif len(col) < len(self._snapshot.row_gen):
            col = self._grow(key, len(self._snapshot.row_gen))
        return col

    def count(self, key: str) -> int:
        """How many distinct domains of ``key`` have been seen (ids are 0 .. count-1)."""
        self.column(key)
        return len(self._values[key])

    def value(self, key: str, domain: int) -> str:
        return self._values[key][domain]

    def id_of(self, key: str, value: str) -> int | None:
        """The id of a domain, None if no node ever had that value."""
        self.column(key)
        return self._ids[key].get(value)

    def _id(self, key: str, value: str | None) -> int:
        if value is None:
            return -1
        ids = self._ids[key]
        found = ids.get(value)
        if found is None:
            found = ids[value] = len(self._values[key])
            self._values[key].append(value)
        return found

    def _grow(self, key: str, size: int) -> I32:
        old = self._columns[key]
        col = np.full(max(size, 2 * len(old)), -1, dtype=np.int32)
        col[: len(old)] = old
        self._columns[key] = col
        return col

    def _write(self, info: NodeInfo) -> None:
        labels = info.node.metadata.labels
        for key in self._columns:
            col = self._columns[key]
            if info.row >= len(col):
                col = self._grow(key, info.row + 1)
            col[info.row] = self._id(key, labels.get(key))

    # --- SnapshotListener ------------------------------------------------------------------

    def on_node_added(self, info: NodeInfo) -> None:
        self._write(info)

    def on_node_updated(self, info: NodeInfo, old: Node) -> None:
        if old.metadata.labels != info.node.metadata.labels:
            self._write(info)

    def on_node_removed(self, info: NodeInfo, moved: NodeInfo | None) -> None:
        if moved is not None:
            self._write(moved)

    def on_pod_added(self, info: NodeInfo, pod: PodInfo) -> None:
        return None

    def on_pod_removed(self, info: NodeInfo, pod: PodInfo) -> None:
        return None


@dataclass(frozen=True)
class Term:
    """Which pods count: those in ``namespaces`` (None: any namespace) matching ``selector``.

    ``selector`` is compared by value, so equal terms of different pods share their counts.
    With ``skip_terminating``, pods being deleted do not count (PodTopologySpread's rule;
    InterPodAffinity counts them).
    """

    namespaces: frozenset[str] | None
    selector: LabelSelector
    skip_terminating: bool = False

    def matches(self, pod: PodInfo) -> bool:
        meta = pod.pod.metadata
        if self.namespaces is not None and meta.namespace not in self.namespaces:
            return False
        if self.skip_terminating and meta.deletion_timestamp:
            return False
        return match_label_selector(self.selector, meta.labels)


def _term_key(term: Term) -> Hashable:
    sel = term.selector
    exprs = tuple((r.key, r.operator, tuple(r.values)) for r in sel.match_expressions)
    return (term.namespaces, tuple(sorted(sel.match_labels.items())), exprs, term.skip_terminating)


class MatchCounts:
    """For every term asked about, the number of matching pods on each node row."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        #: term key -> (term, per-row counts); insertion order is recency (oldest first).
        self._terms: dict[Hashable, tuple[Term, I64]] = {}

    @classmethod
    def of(cls, snapshot: Snapshot) -> MatchCounts:
        for listener in snapshot.listeners:
            if isinstance(listener, cls):
                return listener
        counts = cls(snapshot)
        snapshot.listeners.append(counts)
        return counts

    def per_row(self, term: Term) -> I64:
        """Matching pods per row (only the first ``snapshot.n`` entries mean anything). Do not modify."""
        key = _term_key(term)
        known = self._terms.pop(key, None)
        if known is None:
            if len(self._terms) >= MAX_TERMS:
                del self._terms[next(iter(self._terms))]
            counts = np.zeros(max(8, len(self._snapshot.row_gen)), dtype=np.int64)
            for info in self._snapshot.infos:
                n = sum(1 for p in info.pods.values() if term.matches(p))
                if n:
                    counts[info.row] = n
            known = (term, counts)
        elif len(known[1]) < len(self._snapshot.row_gen):
            known = (term, self._grown(known[1], len(self._snapshot.row_gen)))
        self._terms[key] = known
        return known[1]

    def per_domain(self, term: Term, domains: I32, n_domains: int) -> I64:
        """Matching pods per domain id (of one topology key's column), over every node."""
        n = self._snapshot.n
        counts = self.per_row(term)[:n]
        col = domains[:n]
        has = col >= 0
        out: I64 = np.bincount(col[has], weights=counts[has], minlength=n_domains).astype(np.int64)
        return out

    @staticmethod
    def _grown(counts: I64, size: int) -> I64:
        grown = np.zeros(max(size, 2 * len(counts)), dtype=np.int64)
        grown[: len(counts)] = counts
        return grown

    def _update(self, info: NodeInfo, pod: PodInfo, delta: int) -> None:
        row = info.row
        for key, (term, counts) in self._terms.items():
            if term.matches(pod):
                if row >= len(counts):
                    counts = self._grown(counts, row + 1)
                    self._terms[key] = (term, counts)
                counts[row] += delta

    # --- SnapshotListener ------------------------------------------------------------------

    def on_node_added(self, info: NodeInfo) -> None:
        for _, counts in self._terms.values():
            if info.row < len(counts):
                counts[info.row] = 0

    def on_node_updated(self, info: NodeInfo, old: Node) -> None:
        return None

    def on_node_removed(self, info: NodeInfo, moved: NodeInfo | None) -> None:
        # The snapshot takes the node's pods off before the node (Cache.remove_node), so its row
        # holds 0 here; the moved node's counts follow it to its new row.
        last = self._snapshot.n
        for _, counts in self._terms.values():
            if moved is not None and last < len(counts):
                counts[moved.row] = counts[last]
                counts[last] = 0
            elif info.row < len(counts):
                counts[info.row] = 0

    def on_pod_added(self, info: NodeInfo, pod: PodInfo) -> None:
        if self._terms:
            self._update(info, pod, 1)

    def on_pod_removed(self, info: NodeInfo, pod: PodInfo) -> None:
        if self._terms:
            self._update(info, pod, -1)
