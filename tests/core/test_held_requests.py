"""Bound pods never free capacity; pending pods the columns cannot hold are refused at PodInfo creation.

Requests of a bound pod: negative amounts count as 0 (per quantity, not per total), amounts that
are malformed or beyond int64 count as INT64_MAX (the node is full for that resource); a column
whose sum passes INT64_MAX saturates and comes back exactly when the pods leave.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from koordsched.api.core import Pod
from koordsched.api.quantity import QuantityError
from koordsched.api.resources import INT64_MAX, HeldRequests, checked_pod_requests
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.types import PodInfo
from koordsched.plugins.noderesources.nonzero import NonZeroRequested
from koordsched.scheduler.cache import Cache
from koordsched.scheduler.podinfo import InvalidPodError, PriorityClasses, new_pod_info
from tests import builders
from tests.builders import node


def make_pod(containers: list[dict[str, Any]], node_name: str = "", **spec: Any) -> Pod:
    """Pod ``ns/p`` with these containers."""
    return builders.make_pod(
        "p", namespace="ns", uid="u-p", containers=containers, node_name=node_name, **spec
    )


def c(name: str, **requests: Any) -> dict[str, Any]:
    return builders.container(name, requests)


# --- pending pods ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("containers", "message"),
    [
        (
            [c("a", cpu="-4")],
            "container 'a': resource 'cpu': invalid quantity '-4': must be greater than or equal to 0",
        ),
        (
            [c("a", cpu="1"), c("b", memory="9Ei")],
            "container 'b': resource 'memory': quantity '9Ei' is too large: 10376293541461622784 is above "
            "the int64 maximum 9223372036854775807",
        ),
        (
            # Each container fits in int64, their sum does not.
            [c("a", memory="7Ei"), c("b", memory="7Ei")],
            "resource 'memory': the pod's total request of 16140901064495857664 is above the "
            "int64 maximum 9223372036854775807",
        ),
    ],
)
def test_pending_pod_requests_the_columns_cannot_hold_are_refused(
    containers: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(QuantityError) as err:
        checked_pod_requests(make_pod(containers))
    assert str(err.value) == message
    with pytest.raises(InvalidPodError) as refused:
        new_pod_info(make_pod(containers), PriorityClasses())
    assert str(refused.value) == "invalid resource quantity: " + message


def test_pending_pod_with_an_overhead_beyond_int64_is_refused() -> None:
    with pytest.raises(InvalidPodError, match="overhead: resource 'cpu'"):
        new_pod_info(make_pod([c("a", cpu="1")], overhead={"cpu": "1e17"}), PriorityClasses())


# --- bound pods --------------------------------------------------------------------------------


def test_bound_pod_negative_request_counts_as_zero_per_quantity() -> None:
    held = HeldRequests(make_pod([c("a", cpu="4"), c("b", cpu="-4")], "n1"))
    # Not 0: the -4 of one container must not cancel the 4 the other one holds.
    assert held.requests == {"cpu": 4000}
    assert held.problems == ["container 'b': resource 'cpu': negative quantity '-4' counted as 0"]


@pytest.mark.parametrize("value", ["1e18", "abc", "99999999999999999999"])
def test_bound_pod_unreadable_or_overflowing_request_fills_the_node(value: str) -> None:
    info = new_pod_info(make_pod([c("a", cpu=value, memory="1Gi")], "n1"), PriorityClasses())
    assert info.requests == {"cpu": INT64_MAX, "memory": 1 << 30}


def test_bound_pod_total_beyond_int64_is_held_at_the_maximum() -> None:
    held = HeldRequests(make_pod([c("a", memory="7Ei"), c("b", memory="7Ei")], "n1"))
    assert held.requests == {"memory": INT64_MAX}


def test_bound_pod_whose_priority_class_is_unknown_still_counts() -> None:
    # Before: InvalidPodError, and the cache never saw the pod: its cpu went to the next pod.
    pod = make_pod([c("a", cpu="3")], "n1", priorityClassName="gone")
    cache = Cache()
    cache.add_node(node("n1", cpu="4"))
    cache.add_pod(new_pod_info(pod, PriorityClasses()), "n1")
    info = cache.node("n1")
    assert info is not None and info.requested("cpu") == 3000


def test_cache_counts_a_bound_pod_with_a_malformed_request_as_taking_the_node() -> None:
    cache = Cache()
    cache.add_node(node("n1", cpu="4"))
    cache.add_pod(new_pod_info(make_pod([c("a", cpu="4 cores")], "n1"), PriorityClasses()), "n1")
    info = cache.node("n1")
    assert info is not None and info.requested("cpu") >= info.allocatable("cpu")


# --- the columns -------------------------------------------------------------------------------


def held_pod(name: str, **requests: int) -> PodInfo:
    pod = msgspec.convert(
        {"metadata": {"name": name, "namespace": "ns", "uid": name}, "spec": {"nodeName": "n1"}}, Pod
    )
    return PodInfo(pod, dict(requests))


def test_a_saturated_column_stays_full_and_comes_back_exactly() -> None:
    snap = Snapshot()
    info = snap.add_node(node("n1"), {"cpu": 4000, "memory": 8 << 30, "pods": 110})
    small, big1, big2 = (
        held_pod("small", cpu=1500),
        held_pod("big1", cpu=INT64_MAX),
        held_pod("big2", cpu=INT64_MAX),
    )
    for p in (small, big1, big2):
        snap.add_pod(info, p)
    assert info.requested("cpu") == INT64_MAX  # not wrapped to a negative number
    snap.remove_pod(info, big1)
    assert info.requested("cpu") == INT64_MAX
    snap.remove_pod(info, big2)
    assert info.requested("cpu") == 1500
    assert info.saturated is None


def test_requests_outside_the_columns_range_never_free_capacity() -> None:
    # A PodInfo made without new_pod_info: held to 0..INT64_MAX on addition and removal alike.
    snap = Snapshot()
    info = snap.add_node(node("n1"), {"cpu": 4000, "memory": 8 << 30, "pods": 110})
    snap.add_pod(info, held_pod("a", cpu=1000))
    odd = held_pod("odd", cpu=-3000, memory=1 << 70)
    snap.add_pod(info, odd)
    assert info.requested("cpu") == 1000 and info.requested("memory") == INT64_MAX
    snap.remove_pod(info, odd)
    assert info.requested("cpu") == 1000 and info.requested("memory") == 0


def test_non_zero_requests_of_a_bound_multi_container_pod_beyond_int64() -> None:
    # Before: OverflowError in NonZeroRequested.on_pod_added (it reads the containers again).
    snap = Snapshot()
    tracker = NonZeroRequested.of(snap)
    info = snap.add_node(node("n1"), {"cpu": 4000, "memory": 8 << 30, "pods": 110})
    pod = make_pod([c("a", cpu="1e18", memory="-1Gi"), c("b", cpu="1e18")], "n1")
    snap.add_pod(info, new_pod_info(pod, PriorityClasses()))
    cpu, memory = tracker.values[info.row].tolist()
    assert cpu > 4000 and memory >= 0
