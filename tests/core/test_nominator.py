"""The nominator: nominated pods counted when lower-or-equal-priority pods are filtered, kept and
cleared as upstream's, and the dry run's hypothetical changes undone exactly."""

from __future__ import annotations

import msgspec
import numpy as np

from koordsched.api.core import Pod
from koordsched.api.resources import checked_pod_requests
from koordsched.framework.types import PodInfo
from koordsched.scheduler.cache import Cache
from koordsched.scheduler.nominator import Nominator
from tests.builders import node
from tests.plugins.defaultpreemption.helpers import attempt, pending, running, world


def info(p: Pod, priority: int = 0) -> PodInfo:
    return PodInfo(p, checked_pod_requests(p), priority)


def with_nomination(p: Pod, node_name: str) -> Pod:
    return msgspec.structs.replace(p, status=msgspec.structs.replace(p.status, nominated_node_name=node_name))


def test_add_delete_and_lower_priority() -> None:
    n = Nominator(Cache())
    hi, lo = info(pending("hi"), 1000), info(pending("lo"), 10)
    n.add(hi, "n1")
    n.add(lo, "n1")
    assert n.any_nominated() and set(n.nominated_nodes()) == {"n1"}
    assert [p.key for p in n.lower_priority_on("n1", 500)] == ["default/lo"]
    n.add(lo, "n2")  # a new nomination moves the pod
    assert [p.key for p in n.nominated_on("n1")] == ["default/hi"]
    assert n.delete(hi.uid) and not n.delete(hi.uid)
    assert set(n.nominated_nodes()) == {"n2"}
    n.add(lo, "")  # an empty node clears it
    assert not n.any_nominated() and len(n) == 0


def test_update_follows_the_status_or_keeps_our_own_nomination() -> None:
    n = Nominator(Cache())
    p = pending("p")
    n.add(info(p), "n1")
    # An update without nominatedNodeName on either side (our status patch not back yet): kept.
    n.update(p, info(p))
    assert n.node_of(info(p).uid) == "n1"
    # The status names another node: that one.
    n.update(p, info(with_nomination(p, "n2")))
    assert n.node_of(info(p).uid) == "n2"
    # The status had it and no longer does: cleared.
    n.update(with_nomination(p, "n2"), info(p))
    assert n.node_of(info(p).uid) is None


def test_a_lower_priority_pod_does_not_take_a_nominees_room() -> None:
    sched, port = world([node("n1", cpu="2")], [])
    sched.nominator.add(info(pending("nominee", "2", 1000), 1000), "n1")
    attempt(sched, pending("lower", "1", 10))
    assert port.failures["lower"].startswith("0/1 nodes are available: 1 Insufficient cpu.")


def test_an_equal_or_higher_priority_pod_is_not_held_back_by_a_lower_nominee() -> None:
    sched, _ = world([node("n1", cpu="2")], [])
    sched.nominator.add(info(pending("nominee", "2", 10), 10), "n1")
    sched.on_pod_add(pending("higher", "1", 1000))
    popped = sched.queue.pop()
    assert popped is not None
    result = sched.schedule_one(popped)
    assert result is not None and result.node == "n1"
    # Scheduling it cleared nothing else, and the nominee's own entry is untouched.
    assert sched.nominator.node_of("uid-nominee") == "n1"


def test_the_nominated_pod_itself_is_not_counted_against_itself() -> None:
    sched, _ = world([node("n1", cpu="2"), node("n2", cpu="1")], [])
    p = pending("p", "2", 1000)
    sched.nominator.add(info(p, 1000), "n1")
    sched.on_pod_add(p)
    popped = sched.queue.pop()
    assert popped is not None
    result = sched.schedule_one(popped)
    assert result is not None and result.node == "n1"
    assert sched.nominator.node_of("uid-p") is None  # assumed: no longer nominated


def test_binding_or_deleting_a_nominee_ends_its_nomination() -> None:
    sched, _ = world([node("n1", cpu="4")], [])
    a, b = pending("a", "1", 1000), pending("b", "1", 1000)
    for p in (a, b):
        sched.on_pod_add(with_nomination(p, "n1"))
    assert set(sched.nominator.nominated_nodes()) == {"n1"} and len(sched.nominator) == 2
    bound = msgspec.structs.replace(a, spec=msgspec.structs.replace(a.spec, node_name="n1"))
    sched.on_pod_update(a, bound)
    sched.on_pod_delete(b)
    assert len(sched.nominator) == 0


def test_the_dry_run_leaves_the_cluster_as_it_found_it() -> None:
    nodes = [node(f"n{i}", cpu="4") for i in range(4)]
    pods = [
        running(f"v{i}-{j}", f"n{i}", "1", 10 * j, labels={"app": f"a{j}"})
        for i in range(4)
        for j in range(4)
    ]
    sched, port = world(nodes, pods)
    snap = sched.cache.snapshot
    before_used = snap.used[: snap.n].copy()
    before_count = snap.pod_count[: snap.n].copy()
    before_pods = {i.name: set(i.pods) for i in snap.infos}
    sched.nominator.add(info(pending("nominee", "1", 5000), 5000), "n2")
    attempt(sched, pending("p", "3", 25))
    assert port.preempted  # a preemption was chosen (the port records it, nothing is deleted)
    assert np.array_equal(snap.used[: snap.n], before_used)
    assert np.array_equal(snap.pod_count[: snap.n], before_count)
    assert {i.name: set(i.pods) for i in snap.infos} == before_pods
