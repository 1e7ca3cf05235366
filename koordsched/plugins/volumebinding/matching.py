"""Static PVs for a claim on a node: upstream's ``FindMatchingVolume`` on the scheduler path.

A PV matches a claim when it is pre-bound to it (then it is the answer, or none is if its node
affinity excludes the node), or when it is Available, unclaimed, of the claim's class, at
least as large, of the same volume mode, has every access mode the claim asks for, carries the
labels the claim's selector wants and its node affinity admits the node. Of those, the smallest
wins (the first listed among equals).

Upstream walks every PV of the class for every node. Here the PVs of a class are indexed once
per change of the store (by claim for claimed ones, by hostname for local PVs pinned to
hostnames, the rest by size), so a node looks only at its own local PVs and the others.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from koordsched.api.core import NodeSelector
from koordsched.api.selectors import match_label_selector
from koordsched.api.storage import (
    PersistentVolume,
    PersistentVolumeClaim,
    is_bound_to_claim,
    pv_capacity_bytes,
    pv_class,
    pv_node_affinity_matches,
)

HOSTNAME_LABEL = "kubernetes.io/hostname"
#: Local-PV changes remembered before what was worked out per hostname is redone from scratch.
_MAX_LOG = 50_000


def local_hostnames(required: NodeSelector | None) -> frozenset[str] | None:
    """The hostnames a PV's affinity admits, when it says nothing but ``hostname In (...)``;
    None for any other affinity (checked node by node)."""
    if required is None or not required.node_selector_terms:
        return None
    hosts: set[str] = set()
    for term in required.node_selector_terms:
        if term.match_fields or not term.match_expressions:
            return None
        term_hosts: set[str] | None = None
        for req in term.match_expressions:
            if req.key != HOSTNAME_LABEL or req.operator != "In" or not req.values:
                return None
            term_hosts = set(req.values) if term_hosts is None else term_hosts & set(req.values)
        hosts |= term_hosts or set()
    return frozenset(hosts)


@dataclass(frozen=True, eq=False)
class _Entry:
    size: int
    order: int
    pv: PersistentVolume
    #: Hostnames the PV is pinned to, None when its affinity needs a full check.
    hosts: frozenset[str] | None


@dataclass
class ClassIndex:
    """The PVs of one class."""

    #: (claim namespace, claim name) -> PVs whose claimRef names it, in list order.
    claimed: dict[tuple[str, str], list[_Entry]] = field(default_factory=dict)
    #: hostname -> unclaimed PVs pinned to it, by (size, order).
    local: dict[str, list[_Entry]] = field(default_factory=dict)
    #: Other unclaimed PVs, by (size, order).
    other: list[_Entry] = field(default_factory=list)


class PVIndex:
    """Every PV by class, kept in step with the store by :meth:`sync` (only changed PVs are redone)."""

    def __init__(self) -> None:
        self.classes: dict[str, ClassIndex] = {}
        #: key -> (the PV object indexed, its class, its entry)
        self._seen: dict[str, tuple[PersistentVolume, str, _Entry]] = {}
        self._order = 0
        #: (class, hostname) of every change to a class's local PVs since ``log_base``, so what was
        #: worked out per hostname can be brought up to date by redoing just those hostnames.
        self.log: list[tuple[str, str]] = []
        self.log_base = 0

    @property
    def seq(self) -> int:
        return self.log_base + len(self.log)

    def _logged(self, cls: str, hosts: frozenset[str]) -> None:
        if len(self.log) > _MAX_LOG:
            self.log_base += len(self.log)
            self.log.clear()
        self.log.extend((cls, h) for h in hosts)

    def sync(
        self, pvs: Iterable[tuple[str, PersistentVolume]], present: Callable[[str], bool], size: int
    ) -> None:
        """Bring the index in step with ``pvs`` (every PV the store holds: ``size`` of them,
        ``present`` tells whether a key is among them)."""
        for key, pv in pvs:
            known = self._seen.get(key)
            if known is not None:
                if known[0] is pv:
                    continue
                self._remove(key)
            self._add(key, pv)
        if len(self._seen) > size:
            for key in [k for k in self._seen if not present(k)]:
                self._remove(key)

    def resync(self, key: str, pv: PersistentVolume | None) -> None:
        """Bring one PV in step (None: it is gone)."""
        known = self._seen.get(key)
        if known is not None:
            if known[0] is pv:
                return
            self._remove(key)
        if pv is not None:
            self._add(key, pv)

    def _add(self, key: str, pv: PersistentVolume) -> None:
        self._order += 1
        na = pv.spec.node_affinity
        entry = _Entry(
            pv_capacity_bytes(pv), self._order, pv, local_hostnames(na.required if na is not None else None)
        )
        cls = pv_class(pv)
        self._seen[key] = (pv, cls, entry)
        idx = self.classes.get(cls)
        if idx is None:
            idx = self.classes[cls] = ClassIndex()
        ref = pv.spec.claim_ref
        if ref is not None:
            idx.claimed.setdefault((ref.namespace, ref.name), []).append(entry)
        elif entry.hosts is not None:
            for h in entry.hosts:
                insort(idx.local.setdefault(h, []), entry, key=_rank)
            self._logged(cls, entry.hosts)
        else:
            insort(idx.other, entry, key=_rank)

    def _remove(self, key: str) -> None:
        pv, cls, entry = self._seen.pop(key)
        idx = self.classes[cls]
        ref = pv.spec.claim_ref
        if ref is not None:
            entries = idx.claimed[(ref.namespace, ref.name)]
            entries.remove(entry)
            if not entries:
                del idx.claimed[(ref.namespace, ref.name)]
        elif entry.hosts is not None:
            for h in entry.hosts:
                entries = idx.local[h]
                entries.remove(entry)
                if not entries:
                    del idx.local[h]
            self._logged(cls, entry.hosts)
        else:
            idx.other.remove(entry)

    def __len__(self) -> int:
        return len(self._seen)


def _rank(e: _Entry) -> tuple[int, int]:
    return (e.size, e.order)


def _mode(pvc: PersistentVolumeClaim) -> str:
    return pvc.spec.volume_mode or "Filesystem"


def _affinity_ok(e: _Entry, labels: dict[str, str]) -> bool:
    if e.hosts is not None:
        return labels.get(HOSTNAME_LABEL) in e.hosts
    return pv_node_affinity_matches(e.pv, labels)


def _usable(e: _Entry, request: int, mode: str, excluded: set[str]) -> bool:
    pv = e.pv
    return (
        pv.metadata.name not in excluded
        and e.size >= request
        and (pv.spec.volume_mode or "Filesystem") == mode
        and pv.metadata.deletion_timestamp is None
    )


def find_matching(
    idx: ClassIndex | None,
    pvc: PersistentVolumeClaim,
    request: int,
    labels: dict[str, str],
    excluded: set[str],
) -> PersistentVolume | None:
    """The PV ``pvc`` (asking ``request`` bytes) would get on a node with ``labels``, None when none fits."""
    if idx is None:
        return None
    mode = _mode(pvc)
    for e in idx.claimed.get((pvc.metadata.namespace, pvc.metadata.name), ()):
        if is_bound_to_claim(e.pv, pvc) and _usable(e, request, mode, excluded):
            # Pre-bound (by a person, or by an earlier decision): this one or none.
            return e.pv if _affinity_ok(e, labels) else None
    best: _Entry | None = None
    host = labels.get(HOSTNAME_LABEL)
    for entries in (idx.local.get(host, []) if host is not None else [], idx.other):
        start = bisect_left(entries, request, key=lambda e: e.size)
        for e in entries[start:]:
            if best is not None and (e.size, e.order) >= (best.size, best.order):
                break
            if _fits(e, pvc, request, mode, labels, excluded):
                best = e
                break
    return best.pv if best is not None else None


def _fits(
    e: _Entry, pvc: PersistentVolumeClaim, request: int, mode: str, labels: dict[str, str], excluded: set[str]
) -> bool:
    return _fits_anywhere(e, pvc, request, mode, excluded) and _affinity_ok(e, labels)


def only_local_pvs_serve(idx: ClassIndex | None, pvc: PersistentVolumeClaim, request: int) -> bool:
    """No PV is pre-bound to the claim and no PV that is not pinned to hostnames could serve it:
    whether a node has a PV for it then depends on the node's hostname alone."""
    if idx is None:
        return True
    if (pvc.metadata.namespace, pvc.metadata.name) in idx.claimed:
        return False
    mode = _mode(pvc)
    start = bisect_left(idx.other, request, key=lambda e: e.size)
    return not any(_fits_anywhere(e, pvc, request, mode, set()) for e in idx.other[start:])


def host_has_pv(idx: ClassIndex | None, pvc: PersistentVolumeClaim, request: int, host: str) -> bool:
    """Some local PV pinned to ``host`` could serve the claim (what find_matching would find there
    when :func:`only_local_pvs_serve`)."""
    entries = idx.local.get(host) if idx is not None else None
    if not entries:
        return False
    mode = _mode(pvc)
    return any(_fits_anywhere(e, pvc, request, mode, set()) for e in entries)


def _fits_anywhere(
    e: _Entry, pvc: PersistentVolumeClaim, request: int, mode: str, excluded: set[str]
) -> bool:
    """:func:`_fits` without the node affinity."""
    pv = e.pv
    if not _usable(e, request, mode, excluded) or pv.status.phase != "Available":
        return False
    sel = pvc.spec.selector
    if sel is not None and not match_label_selector(sel, pv.metadata.labels):
        return False
    return all(m in pv.spec.access_modes for m in pvc.spec.access_modes)
