"""Records kept one per pod are small (issue 16): what they hold and how they behave is unchanged.

The cache's PodState, ElasticQuota's ledger entry and LoadAware's assign record are structs the
cyclic collector does not track (none refers to anything that leads back to it), and the
virtual clock hands out one float while time stands still (LoadAware keeps one per pod).
"""

from __future__ import annotations

import gc

from koordsched.api.core import Node
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.types import PodInfo
from koordsched.plugins.elasticquota.ledger import Ledger
from koordsched.plugins.loadaware.assign_cache import AssignCache
from koordsched.scheduler.cache import Cache
from koordsched.scheduler.clock import VirtualClock
from tests import builders
from tests.builders import make_pod


def _pod(name: str, node: str = "") -> PodInfo:
    return PodInfo(make_pod(name, namespace="d", uid=f"u-{name}", node_name=node), {"cpu": 100})


def _node(name: str) -> Node:
    return builders.node(name, "4", "4Gi", 10, hostname=False, capacity=False)


def test_virtual_wall_time_is_one_float_while_time_stands_still() -> None:
    clock = VirtualClock(wall_start=1000.0)
    first = clock.wall()
    assert first == 1000.0 and clock.wall() is first
    clock.advance_to(2.5)
    later = clock.wall()
    assert later == 1002.5 and clock.wall() is later
    clock.advance(0.5)
    assert clock.wall() == 1003.0
    clock.wall_start = 2000.0  # moved by hand: the next reading follows
    assert clock.wall() == 2003.0


def test_cache_pod_state_untracked_and_kept_as_before() -> None:
    cache = Cache()
    cache.add_node(_node("n1"))
    a = _pod("a")
    cache.assume(a, "n1")
    state = cache.pod_state(a.uid)
    assert state is not None and (state.pod, state.node_name, state.assumed) == (a, "n1", True)
    assert not gc.is_tracked(state)
    bound = _pod("a", "n1")
    cache.add_pod(bound, "n1")
    state = cache.pod_state(a.uid)
    assert state is not None and (state.pod, state.node_name, state.assumed) == (bound, "n1", False)


def test_ledger_entry_untracked_and_charged_as_before() -> None:
    ledger = Ledger()
    a = _pod("a")
    ledger.upsert(a, "q1", assigned=True)
    (entry,) = ledger
    assert (entry.pod, entry.quota, entry.requests, entry.assigned) == (a, "q1", {"cpu": 100}, True)
    assert not gc.is_tracked(entry)
    assert ledger.used == {"q1": {"cpu": 100}} and ledger.request == {"q1": {"cpu": 100}}
    ledger.assign(a.uid, False)
    assert entry.assigned is False and ledger.used == {"q1": {}}


def test_assign_record_untracked_and_keeps_its_first_stamp() -> None:
    cache = AssignCache(Snapshot(), lambda: 50.0)
    a = _pod("a")
    assert cache.assign("n1", a, 10.0)
    (info,) = cache.pods_on("n1").values()
    assert (info.pod, info.timestamp) == (a, 10.0) and not gc.is_tracked(info)
    again = _pod("a", "n1")
    assert cache.assign("n1", again, 20.0)  # the same pod, a new object: the stamp stays
    assert (info.pod, info.timestamp) == (again, 10.0)
