"""Cache: a reserve pod holds what its owners have not taken; lending it for one cycle; nothing twice.

Invariant checked throughout: a node's used = the other pods + the owners + each reserve pod's
remainder (its allocatable less what its owners took, never below 0).
"""

from __future__ import annotations

import random

import msgspec
import pytest

from koordsched.framework.types import PodInfo
from koordsched.scheduler.cache import Cache
from tests.builders import node, pod

ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"


def reserve(uid: str = "r1", cpu: int = 3000) -> PodInfo:
    p = pod(uid, node_name="n1")
    meta = msgspec.structs.replace(
        p.metadata,
        uid=uid,
        annotations={
            "scheduling.koordinator.sh/reserve-pod": "true",
            "scheduling.koordinator.sh/reservation-name": uid,
        },
    )
    return PodInfo(msgspec.structs.replace(p, metadata=meta), {"cpu": cpu})


def owner(name: str, cpu: int, holder: str | None = None, node_name: str = "n1") -> PodInfo:
    p = pod(name, node_name=node_name)
    ann = {ALLOCATED: f'{{"name": "{holder}", "uid": "{holder}"}}'} if holder else {}
    meta = msgspec.structs.replace(p.metadata, uid=name, annotations=ann)
    return PodInfo(msgspec.structs.replace(p, metadata=meta), {"cpu": cpu})


def cpu_used(c: Cache) -> int:
    info = c.node("n1")
    assert info is not None
    return info.requested("cpu")


@pytest.fixture
def cache() -> Cache:
    c = Cache()
    c.add_node(node("n1", cpu="8"))
    return c


def test_owner_bound_from_a_reservation_is_not_counted_twice(cache: Cache) -> None:
    cache.add_pod(reserve(), "n1")
    assert cpu_used(cache) == 3000
    cache.add_pod(owner("o1", 2000, "r1"), "n1")
    assert cpu_used(cache) == 3000  # owner 2 + remainder 1
    cache.add_pod(owner("o2", 2000, "r1"), "n1")
    assert cpu_used(cache) == 4000  # owners 4, remainder floored at 0
    cache.remove_pod("o1")
    assert cpu_used(cache) == 3000
    cache.remove_pod("r1")  # the reservation ends: its owner keeps what it has
    assert cpu_used(cache) == 2000


def test_owners_seen_before_their_reservation_carve_it_on_arrival(cache: Cache) -> None:
    cache.add_pod(owner("o1", 1000, "r1"), "n1")
    cache.add_pod(reserve(), "n1")
    assert cpu_used(cache) == 3000
    assert set(cache.owners_of("r1")) == {"o1"}


def test_unreadable_allocation_counts_the_pod_in_full(cache: Cache) -> None:
    cache.add_pod(reserve(), "n1")
    p = owner("o1", 1000)
    meta = msgspec.structs.replace(p.pod.metadata, annotations={ALLOCATED: '{"name": '})
    cache.add_pod(PodInfo(msgspec.structs.replace(p.pod, metadata=meta), {"cpu": 1000}), "n1")
    assert cpu_used(cache) == 4000


def test_assumed_owner_lent_reservation_then_forget(cache: Cache) -> None:
    cache.add_pod(reserve(), "n1")
    cache.lend(["r1"])
    assert cpu_used(cache) == 0  # the pod being scheduled may use all of it
    p = owner("o1", 2000)
    cache.assume(p, "n1")
    cache.allocate_from("o1", "r1")
    cache.end_lending()
    assert cpu_used(cache) == 3000
    # The bind confirmed, with the annotation: still counted once.
    cache.add_pod(owner("o1", 2000, "r1"), "n1")
    assert cpu_used(cache) == 3000
    assert not cache.is_assumed("o1")


def test_failed_bind_gives_the_reservation_back(cache: Cache) -> None:
    cache.add_pod(reserve(), "n1")
    cache.assume(owner("o1", 2000), "n1")
    cache.allocate_from("o1", "r1")
    assert cpu_used(cache) == 3000
    cache.forget("o1")
    assert cpu_used(cache) == 3000
    assert dict(cache.owners_of("r1")) == {}
    cache.add_pod(owner("other", 1000), "n1")
    assert cpu_used(cache) == 4000


def test_lending_without_allocation_puts_everything_back(cache: Cache) -> None:
    cache.add_pod(reserve(), "n1")
    cache.lend(["r1", "unknown"])
    cache.end_lending()
    assert cpu_used(cache) == 3000
    info = cache.node("n1")
    assert info is not None and "r1" in info.pods


def test_random_owner_churn_keeps_the_invariant(cache: Cache) -> None:
    rng = random.Random(7)
    cache.add_pod(reserve("r1", 3000), "n1")
    cache.add_pod(reserve("r2", 2000), "n1")
    live: dict[str, tuple[int, str | None]] = {}
    for step in range(300):
        name = f"p{rng.randrange(12)}"
        if name in live and rng.random() < 0.5:
            cache.remove_pod(name)
            del live[name]
        elif name not in live:
            cpu = rng.choice([250, 500, 1000, 2500])
            holder = rng.choice(["r1", "r2", None])
            if rng.random() < 0.5:
                cache.add_pod(owner(name, cpu, holder), "n1")
            else:
                cache.lend([h for h in ("r1", "r2") if h == holder])
                cache.assume(owner(name, cpu), "n1")
                cache.allocate_from(name, holder)
                cache.end_lending()
                cache.add_pod(owner(name, cpu, holder), "n1")
            live[name] = (cpu, holder)
        taken = {"r1": 0, "r2": 0}
        for cpu, holder in live.values():
            if holder is not None:
                taken[holder] += cpu
        expected = (
            sum(cpu for cpu, _ in live.values()) + max(0, 3000 - taken["r1"]) + max(0, 2000 - taken["r2"])
        )
        assert cpu_used(cache) == expected, step
