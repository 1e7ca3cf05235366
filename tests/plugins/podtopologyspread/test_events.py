"""EventsToRegister with upstream's queueing hints, and the PreFilter AddPod/RemovePod extensions."""

from __future__ import annotations

from typing import Any

import numpy as np

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import ClusterEventWithHint
from koordsched.framework.status import Code
from koordsched.framework.types import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    ASSIGNED_POD_UPDATE,
    NODE_ADD,
    NODE_DELETE,
    NODE_UPDATE,
    ClusterEvent,
)
from tests.builders import make_node
from tests.plugins.podtopologyspread.helpers import (
    FOO,
    TAINT,
    cluster,
    filter_codes,
    info,
    labelled,
    node,
    plugin,
    pod,
    spread,
)

TARGET = info(
    pod("p", spread(1, "zone", selector=FOO), spread(1, "node", selector=FOO), labels=labelled("foo"))
)


def hint(event: ClusterEvent) -> Any:
    h = cluster([])
    registered = {e.event: e for e in plugin(h).events_to_register()}
    found: ClusterEventWithHint = registered[event]
    assert found.hint is not None
    return found.hint


def test_registers_pod_and_node_events() -> None:
    events = {e.event for e in plugin(cluster([])).events_to_register()}
    assert events == {
        ASSIGNED_POD_ADD,
        ASSIGNED_POD_UPDATE,
        ASSIGNED_POD_DELETE,
        NODE_ADD,
        NODE_UPDATE,
        NODE_DELETE,
    }


def test_pod_add_and_delete_hints() -> None:
    bound_foo = pod("q", labels=labelled("foo"), node_name="n1")
    bound_bar = pod("r", labels=labelled("bar"), node_name="n1")
    elsewhere = pod("s", labels=labelled("foo"), namespace="other", node_name="n1")
    for event, arg in ((ASSIGNED_POD_ADD, 1), (ASSIGNED_POD_DELETE, 0)):
        fn = hint(event)

        def call(other: Any, fn: Any = fn, arg: int = arg) -> bool:
            return bool(fn(TARGET, *((None, other) if arg else (other, None))))

        assert call(bound_foo)  # a matching pod of the namespace came or went
        assert not call(bound_bar)  # selected by no constraint
        assert not call(elsewhere)  # another namespace
        assert call(None)  # nothing to judge by: retry


def test_pod_update_hint() -> None:
    fn = hint(ASSIGNED_POD_UPDATE)
    old = pod("q", labels=labelled("bar"), node_name="n1")
    assert fn(TARGET, old, pod("q", labels=labelled("foo"), node_name="n1"))  # now matches
    assert not fn(TARGET, old, pod("q", labels=labelled("bar", "baz"), node_name="n1"))  # still does not
    assert not fn(TARGET, old, old)  # labels unchanged


def test_node_hints() -> None:
    add, update, delete = hint(NODE_ADD), hint(NODE_UPDATE), hint(NODE_DELETE)
    full = make_node("n", labels={"zone": "z1", "node": "n"})
    partial = make_node("n", labels={"zone": "z1"})
    assert add(TARGET, None, full) and not add(TARGET, None, partial)
    assert update(TARGET, partial, full)  # gained the keys
    assert update(TARGET, full, partial)  # lost one
    assert update(TARGET, full, make_node("n", labels={"zone": "z2", "node": "n"}))  # a key's value moved
    assert update(
        TARGET, full, make_node("n", labels={"zone": "z1", "node": "n"}, taints=[TAINT])
    )  # taints changed
    assert not update(
        TARGET, full, make_node("n", labels={"zone": "z1", "node": "n", "other": "x"})
    )  # unrelated label
    assert not update(TARGET, partial, make_node("n", labels={"zone": "z2"}))  # still lacks a key
    assert update(TARGET, None, full)  # no old object: judged as an add
    assert delete(TARGET, None, None)  # the event carries no node: retry


def test_add_and_remove_pod_update_the_prefilter_state() -> None:
    """Preemption's what-if: removing pods from a node (or adding them) changes the verdicts, on a
    clone of the cycle state only."""
    h = cluster(
        [node("a", zone="z1"), node("b", zone="z2")],
        [pod("w1", labels=labelled("foo"), node_name="a"), pod("w2", labels=labelled("foo"), node_name="a")],
    )
    pl = plugin(h)
    p = info(pod("p", spread(1, "zone", selector=FOO), labels=labelled("foo")))
    state = CycleState()
    assert pl.pre_filter(state, p)[1].ok
    rows = np.arange(2, dtype=np.int64)
    assert pl.filter_batch(state, p, rows).tolist() == [2, 0]  # z1 holds 2 against 0
    snap = h.snapshot
    a = snap.by_name["a"]
    victims = list(a.pods.values())
    what_if = state.clone()
    for v in victims:
        assert pl.remove_pod(what_if, p, v, a).ok
    assert pl.filter_batch(what_if, p, rows).tolist() == [0, 0]
    assert pl.filter_batch(state, p, rows).tolist() == [2, 0]  # the original is untouched
    assert pl.add_pod(what_if, p, victims[0], a).ok
    assert pl.add_pod(what_if, p, victims[1], a).ok
    assert pl.filter_batch(what_if, p, rows).tolist() == [2, 0]
    # A pod of another namespace or not selected changes nothing.
    other = info(pod("x", labels=labelled("foo"), namespace="other"))
    unrelated = info(pod("y", labels=labelled("bar")))
    for extra in (other, unrelated):
        for _ in range(3):
            assert pl.add_pod(what_if, p, extra, snap.by_name["b"]).ok
    assert pl.filter_batch(what_if, p, rows).tolist() == [2, 0]


def test_add_pod_without_prefilter_state_is_an_error() -> None:
    h = cluster([node("a", zone="z1")])
    pl = plugin(h)
    p = info(pod("p", spread(1, "zone", selector=FOO), labels=labelled("foo")))
    status = pl.add_pod(CycleState(), p, info(pod("q")), h.snapshot.by_name["a"])
    assert status.code is Code.ERROR
    assert status.message() == 'reading "PreFilterPodTopologySpread" from cycleState: not found'


def test_filter_without_prefilter_computes_the_state() -> None:
    """--explain and direct calls may run Filter without PreFilter: same verdicts."""
    h = cluster(
        [node("a", zone="z1"), node("b", zone="z2")], [pod("w1", labels=labelled("foo"), node_name="a")]
    )
    pl = plugin(h)
    p = pod("p", spread(1, "zone", selector=FOO), labels=labelled("foo"))
    rows = np.arange(2, dtype=np.int64)
    assert pl.filter_batch(CycleState(), info(p), rows).tolist() == [2, 0]
    assert filter_codes(pl, h, p) == {"a": Code.UNSCHEDULABLE, "b": Code.SUCCESS}
