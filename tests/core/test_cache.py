"""Cache: assumed pods, confirmation, forget/rollback, pods on unknown nodes."""

from __future__ import annotations

import msgspec
import pytest

from koordsched.api.core import Node
from koordsched.framework.types import PodInfo
from koordsched.scheduler.cache import Cache, CacheError
from tests.builders import node, pod


def pinfo(name: str, cpu: int = 500, mem: int = 1 << 30) -> PodInfo:
    return PodInfo(pod(name), {"cpu": cpu, "memory": mem})


def used(cache: Cache, node_name: str, resource: str) -> int:
    info = cache.node(node_name)
    assert info is not None
    return info.requested(resource)


def test_assume_then_confirm_counts_once() -> None:
    c = Cache()
    c.add_node(node("n1"))
    p = pinfo("a")
    c.assume(p, "n1")
    assert c.is_assumed(p.uid)
    assert used(c, "n1", "cpu") == 500
    c.add_pod(pinfo("a"), "n1")  # the watch reports the bound pod
    assert not c.is_assumed(p.uid)
    assert used(c, "n1", "cpu") == 500
    assert c.sizes() == {"nodes": 1, "pods": 1, "assumed_pods": 0}


def test_forget_frees_exactly_what_was_assumed() -> None:
    c = Cache()
    c.add_node(node("n1"))
    c.add_pod(pinfo("running", cpu=1000), "n1")
    p = pinfo("a", cpu=700)
    c.assume(p, "n1")
    assert used(c, "n1", "cpu") == 1700
    assert c.forget(p.uid) is p
    assert used(c, "n1", "cpu") == 1000
    assert c.forget(p.uid) is None  # idempotent


def test_double_assume_is_refused() -> None:
    c = Cache()
    c.add_node(node("n1"))
    p = pinfo("a")
    c.assume(p, "n1")
    with pytest.raises(CacheError):
        c.assume(p, "n1")


def test_forget_does_not_touch_confirmed_pods() -> None:
    c = Cache()
    c.add_node(node("n1"))
    c.add_pod(pinfo("a"), "n1")
    assert c.forget("uid-default-a") is None
    assert used(c, "n1", "cpu") == 500


def test_pod_on_unknown_node_counts_when_node_arrives() -> None:
    c = Cache()
    c.add_pod(pinfo("early", cpu=1500), "late-node")
    c.add_node(node("late-node"))
    assert used(c, "late-node", "cpu") == 1500
    c.remove_pod("uid-default-early")
    assert used(c, "late-node", "cpu") == 0


def test_node_removal_and_return_keeps_pods() -> None:
    c = Cache()
    c.add_node(node("n1"))
    c.add_node(node("n2"))
    c.add_pod(pinfo("a", cpu=300), "n1")
    c.remove_node("n1")
    assert c.node("n1") is None
    assert c.node("n2") is not None and c.node("n2").row == 0  # type: ignore[union-attr]
    c.add_node(node("n1"))
    assert used(c, "n1", "cpu") == 300


def test_update_moves_pod_between_nodes() -> None:
    c = Cache()
    c.add_node(node("n1"))
    c.add_node(node("n2"))
    c.add_pod(pinfo("a"), "n1")
    c.update_pod(pinfo("a", cpu=900), "n2")
    assert used(c, "n1", "cpu") == 0
    assert used(c, "n2", "cpu") == 900


def test_bad_node_quantity_is_left_out_with_a_reason() -> None:
    c = Cache()
    bad = msgspec.convert({"metadata": {"name": "bad"}, "status": {"allocatable": {"cpu": "lots"}}}, Node)
    assert c.add_node(bad) is None
    assert c.node("bad") is None
    assert "bad" in c.bad_nodes and "cpu" in c.bad_nodes["bad"]
    c.add_node(node("bad"))
    assert c.node("bad") is not None
    assert "bad" not in c.bad_nodes


def test_confirmation_via_update_keeps_columns_and_takes_the_new_object() -> None:
    c = Cache()
    info = c.add_node(node("n1"))
    assert info is not None
    assumed = pinfo("a")
    c.assume(assumed, "n1")
    confirmed = pinfo("a")
    c.update_pod(confirmed, "n1")
    assert info.pods[confirmed.uid] is confirmed
    assert used(c, "n1", "cpu") == 500
    assert not c.is_assumed(confirmed.uid)
