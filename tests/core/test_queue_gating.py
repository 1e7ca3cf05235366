"""Gated pods leave the gate when it may have opened: on an event their gating plugin registered
(as kube-scheduler moves gated pods on their PreEnqueue plugin's events) or when activated."""

from __future__ import annotations

from koordsched.framework.interface import ClusterEventWithHint
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import NODE_ADD, ActionType, ClusterEvent, PodInfo
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.queue import ACTIVE, GATED, SchedulingQueue
from tests.builders import pod

GROUP_ADD = ClusterEvent("PodGroup", ActionType.ADD, "PodGroupAdd")


class Gate:
    def __init__(self) -> None:
        self.open: set[str] = set()
        self.calls = 0

    def __call__(self, p: PodInfo) -> Status:
        self.calls += 1
        if p.key in self.open:
            return SUCCESS
        return Status.unresolvable(f"gang of {p.key} not ready", plugin="Coscheduling")


def make(gate: Gate) -> SchedulingQueue:
    return SchedulingQueue(
        sort_key=lambda p: (-p.priority, p.timestamp),
        pre_enqueue=gate,
        clock=VirtualClock(),
        events={"Coscheduling": [ClusterEventWithHint(GROUP_ADD)], "NodeResourcesFit": None},
    )


def info(name: str) -> PodInfo:
    return PodInfo(pod(name), {"cpu": 100})


def test_gated_pod_keeps_its_plugins_message() -> None:
    gate = Gate()
    q = make(gate)
    a = info("a")
    q.add(a)
    assert q.where(a.uid) == GATED
    assert (a.gating_plugin, a.gating_message) == ("Coscheduling", "gang of default/a not ready")


def test_event_of_the_gating_plugin_reruns_pre_enqueue() -> None:
    gate = Gate()
    q = make(gate)
    a = info("a")
    q.add(a)
    gate.open.add("default/a")
    calls = gate.calls
    # Coscheduling did not register NodeAdd: the gate is not asked again.
    q.on_cluster_event(NODE_ADD)
    assert (q.where(a.uid), gate.calls) == (GATED, calls)
    assert q.on_cluster_event(GROUP_ADD) == 1
    assert q.where(a.uid) == ACTIVE and a.gating_message == ""
    assert q.counts()[GATED] == 0


def test_event_leaves_a_still_closed_gate_gated() -> None:
    gate = Gate()
    q = make(gate)
    a = info("a")
    q.add(a)
    assert q.on_cluster_event(GROUP_ADD) == 0
    assert q.where(a.uid) == GATED and q.counts()[GATED] == 1


def test_activation_asks_the_gate_again() -> None:
    gate = Gate()
    q = make(gate)
    a, b = info("a"), info("b")
    q.add(a)
    q.add(b)
    gate.open.add("default/a")
    q.activate([a, b])
    assert (q.where(a.uid), q.where(b.uid)) == (ACTIVE, GATED)
    assert q.pop() is a
