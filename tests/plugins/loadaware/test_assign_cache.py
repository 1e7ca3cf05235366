"""The assign cache: Reserve/Unreserve plus every pod the snapshot adds, each pod counted once.

Scores use cpu only: node usage 4 cpu, metric 30 s old, the incoming pod estimated at 850m.
Every other pod asks 2 cpu (estimate 1700) and koordlet reported 1 cpu for it. A pod
assigned after the metric counts at its estimate instead of its usage: 850 + 1700 + (4000 -
1000) = 5550 -> 4450 * 100 / 10000 = 44. None: 850 + 4000 = 4850 -> 51. Two such pods (or
one counted twice): 850 + 3400 + 2000 = 6250 -> 37.
"""

from __future__ import annotations

from koordsched.framework.cycle_state import CycleState
from koordsched.plugins.loadaware import LoadAwareScheduling
from koordsched.plugins.loadaware.assign_cache import AssignCache, scheduled_time
from tests.plugins.loadaware.helpers import NOW, Cluster, make_metric, make_pod, pod_metric

ALONE, WITH_ONE, WITH_TWO = 51, 44, 37


def cluster() -> Cluster:
    c = Cluster(resourceWeights={"cpu": 1})
    c.add_node("n1")
    reported = [pod_metric(name, cpu="1") for name in ("q", "other", "old", "unknown")]
    c.set_metric(make_metric("n1", age=30, cpu="4", pods=reported))
    return c


def incoming() -> object:
    return make_pod("incoming", {"cpu": "1"})


def test_reserve_and_unreserve() -> None:
    c = cluster()
    state = CycleState()
    q = make_pod("q", {"cpu": "2"})
    assert c.scores(incoming())["n1"] == ALONE
    c.clock.t = NOW - 10  # reserved 10 s ago (after the metric)
    gen = c.snap.row_gen[0]
    assert c.plugin.reserve(state, q, "n1").ok
    assert c.snap.row_gen[0] > gen  # the row is marked changed
    c.clock.t = NOW
    assert c.scores(incoming())["n1"] == WITH_ONE
    # Reserved again (a retry): still once, with its first stamp.
    c.plugin.reserve(state, q, "n1")
    assert c.scores(incoming())["n1"] == WITH_ONE
    c.plugin.unreserve(state, q, "n1")
    assert c.scores(incoming())["n1"] == ALONE
    c.plugin.unreserve(state, q, "n1")  # nothing left to release
    assert c.scores(incoming())["n1"] == ALONE


def test_reserved_before_the_metric_is_not_estimated() -> None:
    c = cluster()
    c.clock.t = NOW - 200  # long before the metric: its usage is in the metric already
    c.plugin.reserve(CycleState(), make_pod("q", {"cpu": "2"}), "n1")
    c.clock.t = NOW
    assert c.scores(incoming())["n1"] == ALONE


def test_assumed_then_reserved_then_confirmed_counts_once() -> None:
    """The scheduler's own pod: assumed into the snapshot, reserved, then its bound object arrives."""
    c = cluster()
    q = make_pod("q", {"cpu": "2"})
    c.clock.t = NOW - 10
    c.place(q, "n1")  # cache.assume
    c.plugin.reserve(CycleState(), q, "n1")
    c.clock.t = NOW
    assert c.scores(incoming())["n1"] == WITH_ONE
    # The bound object replaces the assumed one (the cache removes and re-adds it when its
    # requests changed; here with a PodScheduled time 5 s ago, after the metric).
    c.snap.remove_pod(c.snap.by_name["n1"], q)
    bound = make_pod("q", {"cpu": "2"}, node="n1", scheduled_at=NOW - 5)
    c.place(bound, "n1")
    assert c.scores(incoming())["n1"] == WITH_ONE
    cache = AssignCache.of(c.snap, c.clock.wall)
    (info,) = cache.pods_on("n1").values()
    assert info.pod is bound and info.timestamp == NOW - 5


def test_a_known_pod_keeps_its_first_stamp() -> None:
    c = cluster()
    cache = AssignCache.of(c.snap, c.clock.wall)
    first = make_pod("q", {"cpu": "2"})
    assert cache.assign("n1", first, NOW - 10)
    newer = make_pod("q", {"cpu": "2"}, node="n1")
    assert cache.assign("n1", newer, NOW - 500)  # the object is replaced ...
    (info,) = cache.pods_on("n1").values()
    assert info.pod is newer and info.timestamp == NOW - 10  # ... the stamp is not
    assert not cache.assign("n1", newer)  # the same object again changes nothing


def test_pods_bound_elsewhere_or_before_a_restart_count() -> None:
    c = cluster()
    # Bound by another scheduler 10 s ago: its PodScheduled time says so.
    c.place(make_pod("other", {"cpu": "2"}, node="n1", scheduled_at=NOW - 10), "n1")
    # Bound an hour ago: in the metric already.
    c.place(make_pod("old", {"cpu": "2"}, node="n1", scheduled_at=NOW - 3600), "n1")
    assert c.scores(incoming())["n1"] == WITH_ONE
    # Without a PodScheduled condition the pod is stamped when first seen (now: after the metric).
    c.place(make_pod("unknown", {"cpu": "2"}, node="n1"), "n1")
    assert c.scores(incoming())["n1"] == WITH_TWO
    # Deleted: forgotten.
    info = c.snap.by_name["n1"]
    c.snap.remove_pod(info, info.pods["uid-unknown"])
    assert c.scores(incoming())["n1"] == WITH_ONE


def test_pods_already_in_the_snapshot_are_picked_up() -> None:
    first = cluster()
    first.place(make_pod("other", {"cpu": "2"}, node="n1", scheduled_at=NOW - 10), "n1")
    # A plugin built on a snapshot that already holds pods (a second profile) sees them, via the
    # cache it shares with the first plugin.
    second = LoadAwareScheduling(None, first.handle)
    assert AssignCache.of(first.snap, first.clock.wall) is AssignCache.of(first.snap, lambda: 0.0)
    scores = second.score_batch(CycleState(), make_pod("incoming", {"cpu": "1"}), first.rows())
    # Default weights here. cpu: 44 as above. memory: no usage reported; nobody asks memory, so
    # both estimates are 200Mi: 419430400 of 10Gi -> 10317987840 * 100 / 10737418240 = 96.09 -> 96.
    # (44 + 96) / 2 = 70.
    assert int(scores[0]) == 70


def test_a_pod_without_reported_usage_is_always_estimated() -> None:
    c = cluster()
    c.place(make_pod("silent", {"cpu": "2"}, node="n1", scheduled_at=NOW - 3600), "n1")
    # 850 + 1700 + 4000 = 6550 -> 34.
    assert c.scores(incoming())["n1"] == 34


def test_scheduled_time() -> None:
    assert scheduled_time(make_pod("p", scheduled_at=NOW - 7).pod) == NOW - 7
    assert scheduled_time(make_pod("p").pod) is None


def test_reserve_pods_are_not_assigned_pods() -> None:
    """A Reservation standing on its node runs nothing: as in Koordinator (fed by the pod informer),
    it is not estimated, whether it arrives bound, is reserved in a cycle, or is put back."""
    import msgspec

    from koordsched.framework.types import PodInfo

    c = cluster()
    plain = make_pod("q", {"cpu": "2"}, node="n1")
    meta = msgspec.structs.replace(
        plain.pod.metadata, annotations={"scheduling.koordinator.sh/reserve-pod": "true"}
    )
    reserve = PodInfo(msgspec.structs.replace(plain.pod, metadata=meta), plain.requests)
    c.place(reserve, "n1")
    c.plugin.reserve(CycleState(), reserve, "n1")
    assert c.scores(incoming())["n1"] == ALONE
    assert dict(AssignCache.of(c.snap, c.clock.wall).pods_on("n1")) == {}
