"""The queue's shortcut for cluster events nobody waits for (every bind raises one).

A pod whose rejecting plugins all registered events, none of this kind, stays where it is
without its plugins being walked; an event kind that found every unschedulable pod so is
answered from memory until another pod becomes unschedulable. The outcome is the per-pod
walk's (``test_queue.py``).
"""

from __future__ import annotations

from typing import Any

from koordsched.framework.interface import ClusterEventWithHint
from koordsched.framework.types import ASSIGNED_POD_ADD, ASSIGNED_POD_DELETE, NODE_ADD, PodInfo
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.queue import BACKOFF, UNSCHEDULABLE, SchedulingQueue
from tests.core.test_queue import info, make_queue

EVENTS: dict[str, list[ClusterEventWithHint] | None] = {
    "Fit": [ClusterEventWithHint(ASSIGNED_POD_DELETE), ClusterEventWithHint(NODE_ADD)],
    "Devices": [ClusterEventWithHint(ASSIGNED_POD_DELETE)],
    "Hinted": [ClusterEventWithHint(ASSIGNED_POD_ADD, hint=lambda pod, old, new: new == "useful")],
    "Anything": None,
}


def rejected(q: SchedulingQueue, name: str, *plugins: str) -> PodInfo:
    q.add(info(name))
    p = q.pop()
    assert p is not None
    p.unschedulable_plugins = set(plugins)
    assert q.requeue_failed(p) == UNSCHEDULABLE
    return p


def where(q: SchedulingQueue, *pods: PodInfo) -> list[Any]:
    return [q.where(p.uid) for p in pods]


def test_pods_deaf_to_an_event_stay_and_a_new_pod_is_still_heard() -> None:
    q = make_queue(VirtualClock(), events=EVENTS)
    fit = rejected(q, "fit", "Fit")
    devices = rejected(q, "devices", "Devices", "Fit")
    for _ in range(3):  # the second and third answers come from memory
        assert q.on_cluster_event(ASSIGNED_POD_ADD) == 0
    assert where(q, fit, devices) == [UNSCHEDULABLE, UNSCHEDULABLE]
    # A pod rejected by a plugin that registered no events hears every event, memory or not.
    anything = rejected(q, "anything", "Anything")
    assert q.on_cluster_event(ASSIGNED_POD_ADD) == 1
    assert where(q, fit, devices, anything) == [UNSCHEDULABLE, UNSCHEDULABLE, BACKOFF]
    assert q.on_cluster_event(ASSIGNED_POD_ADD) == 0


def test_one_interested_plugin_is_enough() -> None:
    q = make_queue(VirtualClock(), events=EVENTS)
    devices = rejected(q, "devices", "Devices")
    both = rejected(q, "both", "Devices", "Fit")
    assert q.on_cluster_event(NODE_ADD) == 1  # Fit registered NodeAdd, Devices did not
    assert where(q, devices, both) == [UNSCHEDULABLE, BACKOFF]


def test_a_declining_hint_is_asked_again_on_the_next_event() -> None:
    q = make_queue(VirtualClock(), events=EVENTS)
    hinted = rejected(q, "hinted", "Hinted")
    assert q.on_cluster_event(ASSIGNED_POD_ADD, None, "useless") == 0
    assert q.on_cluster_event(ASSIGNED_POD_ADD, None, "useless") == 0
    assert q.on_cluster_event(ASSIGNED_POD_ADD, None, "useful") == 1
    assert where(q, hinted) == [BACKOFF]


def test_a_plugin_unknown_to_the_queue_hears_everything() -> None:
    q = make_queue(VirtualClock(), events=EVENTS)
    assert q.on_cluster_event(ASSIGNED_POD_ADD) == 0  # nothing unschedulable yet
    fit = rejected(q, "fit", "Fit")
    assert q.on_cluster_event(ASSIGNED_POD_ADD) == 0
    unknown = rejected(q, "unknown", "NotInTheProfile")
    assert q.on_cluster_event(ASSIGNED_POD_ADD) == 1
    assert where(q, fit, unknown) == [UNSCHEDULABLE, BACKOFF]
