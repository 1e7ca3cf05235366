"""Scheduling queue: ordering, backoff, unschedulable handling, gating (kube-scheduler semantics)."""

from __future__ import annotations

import pytest

from koordsched.framework.interface import ClusterEventWithHint
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import ASSIGNED_POD_DELETE, NODE_ADD, PodInfo
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.queue import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE, SchedulingQueue
from tests.builders import pod


def info(name: str, priority: int = 0, gated: bool = False) -> PodInfo:
    p = pod(name, schedulingGates=[{"name": "g"}] if gated else [])
    return PodInfo(p, {"cpu": 100}, priority)


def make_queue(clock: VirtualClock, **kw: object) -> SchedulingQueue:
    def pre_enqueue(p: PodInfo) -> Status:
        if p.pod.spec.scheduling_gates:
            return Status.unresolvable("gated", plugin="SchedulingGates")
        return SUCCESS

    return SchedulingQueue(
        sort_key=lambda p: (-p.priority, p.timestamp),
        pre_enqueue=pre_enqueue,
        clock=clock,
        **kw,  # type: ignore[arg-type]
    )


def test_pops_by_priority_then_arrival() -> None:
    clock = VirtualClock()
    q = make_queue(clock)
    for name, prio in [("a", 0), ("b", 10), ("c", 0), ("d", 10)]:
        q.add(info(name, prio))
        clock.advance(1)
    order = [q.pop().key for _ in range(4)]  # type: ignore[union-attr]
    assert order == ["default/b", "default/d", "default/a", "default/c"]
    assert q.pop() is None


@pytest.mark.parametrize(
    ("attempts", "expected"),
    [(0, 0.0), (1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (9, 10.0)],
)
def test_backoff_doubles_and_caps(attempts: int, expected: float) -> None:
    q = make_queue(VirtualClock(), initial_backoff=1.0, max_backoff=10.0)
    p = info("a")
    p.attempts = attempts
    assert q.backoff_duration(p) == expected


def test_unschedulable_pod_waits_for_an_interesting_event() -> None:
    clock = VirtualClock()
    events = {"NodeResourcesFit": [ClusterEventWithHint(ASSIGNED_POD_DELETE)]}
    q = make_queue(clock, events=events)
    q.add(info("a"))
    p = q.pop()
    assert p is not None
    p.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.requeue_failed(p) == UNSCHEDULABLE
    # A node being added is not something NodeResourcesFit registered for here.
    assert q.on_cluster_event(NODE_ADD) == 0
    assert q.where(p.uid) == UNSCHEDULABLE
    assert q.on_cluster_event(ASSIGNED_POD_DELETE) == 1
    # Still inside its 1 s backoff: goes to backoffQ, then to activeQ once it expires.
    assert q.where(p.uid) == BACKOFF
    assert q.pop() is None
    clock.advance(1.0)
    assert q.flush_backoff_completed() == 1
    assert q.where(p.uid) == ACTIVE


def test_hint_can_decline_the_requeue() -> None:
    clock = VirtualClock()
    events = {"P": [ClusterEventWithHint(NODE_ADD, hint=lambda pod, old, new: new == "useful")]}
    q = make_queue(clock, events=events)
    q.add(info("a"))
    p = q.pop()
    assert p is not None
    p.unschedulable_plugins = {"P"}
    q.requeue_failed(p)
    assert q.on_cluster_event(NODE_ADD, None, "useless") == 0
    assert q.on_cluster_event(NODE_ADD, None, "useful") == 1


def test_plugin_without_registered_events_is_moved_by_any_event() -> None:
    q = make_queue(VirtualClock(), events={"P": None})
    q.add(info("a"))
    p = q.pop()
    assert p is not None
    p.unschedulable_plugins = {"P"}
    q.requeue_failed(p)
    assert q.on_cluster_event(NODE_ADD) == 1


def test_event_during_cycle_sends_failed_pod_to_backoff() -> None:
    q = make_queue(VirtualClock())
    q.add(info("a"))
    p = q.pop()
    assert p is not None
    q.on_cluster_event(NODE_ADD)  # arrives while "a" is being scheduled
    p.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.requeue_failed(p) == BACKOFF


def test_error_goes_to_backoff() -> None:
    q = make_queue(VirtualClock())
    q.add(info("a"))
    p = q.pop()
    assert p is not None
    assert q.requeue_failed(p, error=True) == BACKOFF


def test_unschedulable_leftovers_flushed_after_five_minutes() -> None:
    clock = VirtualClock()
    q = make_queue(clock)
    q.add(info("a"))
    p = q.pop()
    assert p is not None
    p.unschedulable_plugins = {"X"}
    q.requeue_failed(p)
    clock.advance(299)
    assert q.flush_unschedulable_leftover() == 0
    clock.advance(2)
    assert q.flush_unschedulable_leftover() == 1
    assert q.where(p.uid) == ACTIVE


def test_gated_pod_stays_out_until_gates_are_removed() -> None:
    q = make_queue(VirtualClock())
    gated = info("a", gated=True)
    q.add(gated)
    assert q.where(gated.uid) == GATED
    assert gated.gating_plugin == "SchedulingGates"
    assert q.pop() is None
    q.update(info("a"))
    assert q.where(gated.uid) == ACTIVE
    assert q.counts() == {ACTIVE: 1, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0}


def test_update_of_queued_pod_keeps_its_attempts_and_place() -> None:
    clock = VirtualClock()
    q = make_queue(clock)
    q.add(info("a"))
    p = q.pop()
    assert p is not None
    p.unschedulable_plugins = {"X"}
    q.requeue_failed(p)
    newer = info("a")
    q.update(newer)
    assert newer.attempts == 1
    assert q.where(newer.uid) == BACKOFF


def test_delete_removes_from_any_queue() -> None:
    q = make_queue(VirtualClock())
    q.add(info("a"))
    q.add(info("b", gated=True))
    assert q.delete("uid-default-a") is not None
    assert q.delete("uid-default-b") is not None
    assert len(q) == 0
    assert q.pop() is None


def test_activate_forces_pods_into_active() -> None:
    q = make_queue(VirtualClock())
    q.add(info("a"))
    p = q.pop()
    assert p is not None
    p.unschedulable_plugins = {"X"}
    q.requeue_failed(p)
    q.activate([p])
    assert q.where(p.uid) == ACTIVE


async def test_wait_returns_when_a_pod_arrives() -> None:
    import asyncio

    q = make_queue(VirtualClock())
    waiter = asyncio.create_task(q.wait(5.0))
    await asyncio.sleep(0)
    q.add(info("a"))
    await asyncio.wait_for(waiter, 5.0)
    assert q.pop() is not None


def test_pending_pods_gauge_is_read_at_scrape_time() -> None:
    from koordsched.observability.metrics import SchedulerMetrics

    metrics = SchedulerMetrics()
    q = make_queue(VirtualClock(), metrics=metrics)
    q.add(info("a"))
    q.add(info("b", gated=True))

    def sample(queue: str) -> float | None:
        return metrics.registry.get_sample_value("scheduler_pending_pods", {"queue": queue})

    assert (sample("active"), sample("gated"), sample("backoff")) == (1.0, 1.0, 0.0)
    p = q.pop()
    assert p is not None
    q.requeue_failed(p, error=True)
    assert (sample("active"), sample("backoff")) == (0.0, 1.0)
    assert (
        metrics.registry.get_sample_value(
            "scheduler_queue_incoming_pods_total", {"queue": "backoff", "event": "ScheduleAttemptFailure"}
        )
        == 1.0
    )


def test_a_pod_deleted_during_its_attempt_is_not_requeued() -> None:
    q = make_queue(VirtualClock())
    q.add(info("a"))
    p = q.pop()
    assert p is not None
    q.delete(p.uid)  # deleted (or bound by someone else) while its binding was in flight
    assert q.requeue_failed(p, error=True) is None
    assert len(q) == 0 and q.where(p.uid) is None
