"""Topology domains and matching-pod counts stay equal to a recount through random cluster changes."""

from __future__ import annotations

import random

import numpy as np

from koordsched.api.core import LabelSelector
from koordsched.framework.pod_topology import MatchCounts, Term, TopologyDomains
from koordsched.framework.types import PodInfo
from koordsched.scheduler.cache import Cache
from tests.builders import node, pod

ZONE = "topology.kubernetes.io/zone"


def _pod(name: str, ns: str, app: str, *, terminating: bool = False) -> PodInfo:
    deleted = "2026-12-01T00:00:00Z" if terminating else None
    return PodInfo(pod(name, namespace=ns, labels={"app": app}, deletion_timestamp=deleted), {"cpu": 100})


def _recount(cache: Cache, term: Term) -> list[int]:
    snap = cache.snapshot
    return [sum(1 for p in info.pods.values() if term.matches(p)) for info in snap.infos]


def test_counts_and_domains_follow_random_changes() -> None:
    rng = random.Random(11)
    cache = Cache()
    snap = cache.snapshot
    counts = MatchCounts.of(snap)
    domains = TopologyDomains.of(snap)
    assert MatchCounts.of(snap) is counts and TopologyDomains.of(snap) is domains
    terms = [
        Term(None, LabelSelector(match_labels={"app": "web"})),
        Term(frozenset({"a"}), LabelSelector(match_labels={"app": "web"})),
        Term(frozenset({"a", "b"}), LabelSelector(), skip_terminating=True),
    ]
    names = 0
    pods: dict[str, tuple[PodInfo, str]] = {}
    for step in range(400):
        action = rng.random()
        live = [i.name for i in snap.infos]
        if action < 0.15 or not live:
            names += 1
            zone = rng.choice(["z1", "z2", "z3", None])
            cache.add_node(node(f"n{names}", labels={ZONE: zone} if zone else {}))
        elif action < 0.2 and len(live) > 1:
            gone = rng.choice(live)
            cache.remove_node(gone)
            for uid in [u for u, (_, n) in pods.items() if n == gone]:
                pods.pop(uid)
                cache.remove_pod(uid)
        elif action < 0.25:
            target = rng.choice(live)
            cache.update_node(node(target, labels={ZONE: rng.choice(["z1", "z4"])}))
        elif action < 0.7:
            p = _pod(
                f"p{step}",
                rng.choice(["a", "b", "c"]),
                rng.choice(["web", "db"]),
                terminating=rng.random() < 0.2,
            )
            target = rng.choice(live)
            cache.add_pod(p, target)
            pods[p.uid] = (p, target)
        elif pods:
            uid = rng.choice(sorted(pods))
            pods.pop(uid)
            cache.remove_pod(uid)
        if step % 7 == 0:
            for term in terms:
                assert counts.per_row(term)[: snap.n].tolist() == _recount(cache, term), step
            col = domains.column(ZONE)
            for info in snap.infos:
                value = info.node.metadata.labels.get(ZONE)
                assert col[info.row] == (-1 if value is None else domains.id_of(ZONE, value))
            # Per-domain counts are the sum of the rows in each domain.
            term = terms[0]
            by_domain = counts.per_domain(term, col, domains.count(ZONE))
            expect = np.zeros(domains.count(ZONE), dtype=np.int64)
            for info, n in zip(snap.infos, _recount(cache, term), strict=True):
                if col[info.row] >= 0:
                    expect[col[info.row]] += n
            assert by_domain.tolist() == expect.tolist()


def test_terminating_pods_count_only_where_the_term_says() -> None:
    cache = Cache()
    cache.add_node(node("n1"))
    counts = MatchCounts.of(cache.snapshot)
    cache.add_pod(_pod("old", "a", "web", terminating=True), "n1")
    cache.add_pod(_pod("new", "a", "web"), "n1")
    sel = LabelSelector(match_labels={"app": "web"})
    assert counts.per_row(Term(None, sel))[0] == 2
    assert counts.per_row(Term(None, sel, skip_terminating=True))[0] == 1
    # A nil-like empty namespace set selects no pod; an empty selector selects every pod.
    assert counts.per_row(Term(frozenset(), LabelSelector()))[0] == 0
    assert counts.per_row(Term(None, LabelSelector()))[0] == 2


def test_confirming_an_assumed_pod_with_other_labels_recounts_it() -> None:
    """The bind's confirmation may carry labels changed since the pod was assumed: the counts
    follow the pod as it is now, and removing it later leaves nothing behind."""
    cache = Cache()
    cache.add_node(node("n1"))
    counts = MatchCounts.of(cache.snapshot)
    web = Term(None, LabelSelector(match_labels={"app": "web"}))
    db = Term(None, LabelSelector(match_labels={"app": "db"}))
    assert counts.per_row(web)[0] == 0 and counts.per_row(db)[0] == 0
    assumed = _pod("p", "a", "web")
    cache.assume(assumed, "n1")
    assert counts.per_row(web)[0] == 1
    relabelled = _pod("p", "a", "db")
    cache.add_pod(relabelled, "n1")
    assert (counts.per_row(web)[0], counts.per_row(db)[0]) == (0, 1)
    cache.remove_pod(relabelled.uid)
    assert (counts.per_row(web)[0], counts.per_row(db)[0]) == (0, 0)
