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

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field

from koordsched.api.core import NodeSelector
from koordsched.api.selectors import match_label_selector
from koordsched.api.storage import (
    PersistentVolume,
    PersistentVolumeClaim,
    claim_request_bytes,
    is_bound_to_claim,
    pv_capacity_bytes,
    pv_class,
    pv_node_affinity_matches,
)

HOSTNAME_LABEL = "kubernetes.io/hostname"


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


@dataclass(frozen=True)
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


def build_indexes(
    pvs: Iterable[PersistentVolume], sizes: dict[str, tuple[PersistentVolume, int]]
) -> dict[str, ClassIndex]:
    """Index every PV by class. ``sizes`` remembers each PV's parsed capacity by object."""
    out: dict[str, ClassIndex] = {}
    for order, pv in enumerate(pvs):
        name = pv.metadata.name
        known = sizes.get(name)
        if known is not None and known[0] is pv:
            size = known[1]
        else:
            size = pv_capacity_bytes(pv)
            sizes[name] = (pv, size)
        na = pv.spec.node_affinity
        entry = _Entry(size, order, pv, local_hostnames(na.required if na is not None else None))
        idx = out.get(pv_class(pv))
        if idx is None:
            idx = out[pv_class(pv)] = ClassIndex()
        ref = pv.spec.claim_ref
        if ref is not None:
            idx.claimed.setdefault((ref.namespace, ref.name), []).append(entry)
        elif entry.hosts is not None:
            for h in entry.hosts:
                idx.local.setdefault(h, []).append(entry)
        else:
            idx.other.append(entry)
    for idx in out.values():
        for entries in idx.local.values():
            entries.sort(key=lambda e: (e.size, e.order))
        idx.other.sort(key=lambda e: (e.size, e.order))
    return out


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
    idx: ClassIndex | None, pvc: PersistentVolumeClaim, labels: dict[str, str], excluded: set[str]
) -> PersistentVolume | None:
    """The PV ``pvc`` would get on a node with ``labels``, None when none fits."""
    if idx is None:
        return None
    request = claim_request_bytes(pvc)
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
    pv = e.pv
    if not _usable(e, request, mode, excluded) or pv.status.phase != "Available":
        return False
    sel = pvc.spec.selector
    if sel is not None and not match_label_selector(sel, pv.metadata.labels):
        return False
    if not all(m in pv.spec.access_modes for m in pvc.spec.access_modes):
        return False
    return _affinity_ok(e, labels)
