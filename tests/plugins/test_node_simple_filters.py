"""NodeUnschedulable, NodeName and NodePorts: table tests plus batch-vs-per-node properties."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.status import Code
from koordsched.framework.types import ASSIGNED_POD_DELETE, NODE_ADD, NODE_UPDATE
from koordsched.plugins.nodename import NodeName
from koordsched.plugins.nodeports import NodePorts
from koordsched.plugins.nodeunschedulable import NodeUnschedulable
from tests.builders import container, make_node, make_pod, pod_info
from tests.fakes import FakeHandle
from tests.plugins.conftest import add_node, all_rows, place, run_filter, statuses

ALLOC = {"cpu": 4000, "memory": 8 * 1024**3, "pods": 110}

# --- NodeUnschedulable -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("unschedulable", "tolerations", "fits"),
    [
        (False, [], True),
        (True, [], False),
        (
            True,
            [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}],
            True,
        ),
        (True, [{"operator": "Exists"}], True),
        (
            True,
            [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}],
            False,
        ),
        (True, [{"key": "node.kubernetes.io/unschedulable", "value": "x", "effect": "NoSchedule"}], False),
    ],
)
def test_node_unschedulable(
    snap: Snapshot, handle: FakeHandle, unschedulable: bool, tolerations: list[dict[str, str]], fits: bool
) -> None:
    add_node(snap, make_node("ok"), ALLOC)
    add_node(snap, make_node("n", unschedulable=unschedulable), ALLOC)
    plugin = NodeUnschedulable(None, handle)
    got = statuses(plugin, pod_info(make_pod(tolerations=tolerations)), snap)
    assert got["ok"] is None
    if fits:
        assert got["n"] is None
    else:
        status = got["n"]
        assert status is not None
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == ("node(s) were unschedulable",)


def test_node_unschedulable_batch_matches_per_node(
    snap: Snapshot, handle: FakeHandle, rng: random.Random
) -> None:
    for i in range(60):
        add_node(snap, make_node(f"n{i}", unschedulable=rng.random() < 0.3), ALLOC)
    plugin = NodeUnschedulable(None, handle)
    options: list[list[dict[str, str]]] = [
        [],
        [{"operator": "Exists"}],
        [{"key": "other", "operator": "Exists"}],
    ]
    for tolerations in options:
        pod = pod_info(make_pod(tolerations=tolerations))
        rows = np.asarray(rng.sample(range(snap.n), 25), dtype=np.int64)
        codes = plugin.filter_batch(CycleState(), pod, rows)
        tolerated = bool(tolerations) and tolerations[0].get("key") is None
        expected = [int(snap.infos[r].node.spec.unschedulable and not tolerated) for r in rows.tolist()]
        assert codes.tolist() == expected


def test_node_unschedulable_events(handle: FakeHandle) -> None:
    assert [e.event for e in NodeUnschedulable(None, handle).events_to_register()] == [NODE_ADD, NODE_UPDATE]


# --- NodeName --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("node_name", "expected"),
    [
        ("", {"a": True, "b": True, "c": True}),
        ("b", {"a": False, "b": True, "c": False}),
        ("missing", {"a": False, "b": False, "c": False}),
    ],
)
def test_node_name(snap: Snapshot, handle: FakeHandle, node_name: str, expected: dict[str, bool]) -> None:
    for name in "abc":
        add_node(snap, make_node(name), ALLOC)
    got = statuses(NodeName(None, handle), pod_info(make_pod(nodeName=node_name)), snap)
    for name, fits in expected.items():
        status = got[name]
        if fits:
            assert status is None
        else:
            assert status is not None
            assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            assert status.reasons == ("node(s) didn't match the requested node name",)


def test_node_name_batch_on_a_subset(snap: Snapshot, handle: FakeHandle) -> None:
    for i in range(10):
        add_node(snap, make_node(f"n{i}"), ALLOC)
    plugin = NodeName(None, handle)
    rows = np.asarray([7, 3, 5], dtype=np.int64)
    assert plugin.filter_batch(CycleState(), pod_info(make_pod(nodeName="n3")), rows).tolist() == [1, 0, 1]
    assert plugin.filter_batch(CycleState(), pod_info(make_pod(nodeName="n4")), rows).tolist() == [1, 1, 1]


# --- NodePorts -------------------------------------------------------------------------------------


def port(
    host_port: int, protocol: str = "TCP", host_ip: str = "", container_port: int = 80
) -> dict[str, Any]:
    out: dict[str, Any] = {"containerPort": container_port, "hostPort": host_port, "protocol": protocol}
    if host_ip:
        out["hostIP"] = host_ip
    return out


def ports_pod(name: str, *ports: dict[str, Any]) -> Any:
    return make_pod(name, containers=[container(ports=list(ports))])


@pytest.mark.parametrize(
    ("existing", "wanted", "fits"),
    [
        ([], [port(8080)], True),
        ([port(8080)], [port(8080)], False),
        ([port(8080)], [port(8081)], True),
        ([port(8080, "TCP")], [port(8080, "UDP")], True),
        ([port(8080, host_ip="10.0.0.1")], [port(8080, host_ip="10.0.0.2")], True),
        ([port(8080, host_ip="10.0.0.1")], [port(8080, host_ip="10.0.0.1")], False),
        ([port(8080)], [port(8080, host_ip="10.0.0.1")], False),
        ([port(8080, host_ip="10.0.0.1")], [port(8080)], False),
        ([port(8080, host_ip="0.0.0.0")], [port(8080, host_ip="127.0.0.1")], False),
        ([port(8080)], [port(0, container_port=8080)], True),
        ([port(1), port(2)], [port(3), port(2, "TCP")], False),
    ],
)
def test_node_ports(
    snap: Snapshot,
    handle: FakeHandle,
    existing: list[dict[str, Any]],
    wanted: list[dict[str, Any]],
    fits: bool,
) -> None:
    add_node(snap, make_node("n"), ALLOC)
    if existing:
        place(snap, "n", ports_pod("existing", *existing))
    status = statuses(NodePorts(None, handle), pod_info(ports_pod("new", *wanted)), snap)["n"]
    if fits:
        assert status is None
    else:
        assert status is not None
        assert status.code is Code.UNSCHEDULABLE
        assert status.reasons == ("node(s) didn't have free ports for the requested pod ports",)


def test_node_ports_pre_filter_skips_only_without_container_ports(handle: FakeHandle) -> None:
    plugin = NodePorts(None, handle)
    _, status = plugin.pre_filter(CycleState(), pod_info(make_pod(requests={"cpu": "1"})))
    assert status.code is Code.SKIP
    # A container port without a hostPort is not a Skip upstream, though it never conflicts.
    _, status = plugin.pre_filter(CycleState(), pod_info(ports_pod("p", port(0))))
    assert status.ok
    assert plugin.pre_filter_extensions() is None


def test_node_ports_freed_when_pod_removed(snap: Snapshot, handle: FakeHandle) -> None:
    add_node(snap, make_node("n"), ALLOC)
    existing = place(snap, "n", ports_pod("old", port(9000)))
    plugin = NodePorts(None, handle)
    pod = pod_info(ports_pod("new", port(9000)))
    assert run_filter(plugin, pod, snap).tolist() == [1]
    snap.remove_pod(snap.by_name["n"], existing)
    assert run_filter(plugin, pod, snap).tolist() == [0]


def test_node_ports_batch_matches_per_node(snap: Snapshot, handle: FakeHandle, rng: random.Random) -> None:
    ips = ["", "10.0.0.1", "10.0.0.2", "0.0.0.0"]
    for i in range(40):
        add_node(snap, make_node(f"n{i}"), ALLOC)
        for j in range(rng.randrange(3)):
            wanted = port(rng.choice([80, 443, 8080]), rng.choice(["TCP", "UDP"]), rng.choice(ips))
            place(snap, f"n{i}", ports_pod(f"p{i}-{j}", wanted))
    plugin = NodePorts(None, handle)
    for k in range(20):
        wanted_ports = [
            port(rng.choice([80, 443, 8080]), rng.choice(["TCP", "UDP"]), rng.choice(ips))
            for _ in range(rng.randrange(1, 3))
        ]
        pod = pod_info(ports_pod(f"new{k}", *wanted_ports))
        codes = run_filter(plugin, pod, snap).tolist()
        for info, code in zip(snap.infos, codes, strict=True):
            conflict = False
            for wp in wanted_ports:
                wip = wp.get("hostIP", "0.0.0.0")
                for uip, uproto, uport in info.used_ports:
                    if uport == wp["hostPort"] and uproto == wp["protocol"]:
                        conflict = conflict or wip == uip or "0.0.0.0" in (wip, uip)
            assert code == int(conflict), (info.name, wanted_ports, info.used_ports)


def test_node_ports_events(handle: FakeHandle) -> None:
    events = [e.event for e in NodePorts(None, handle).events_to_register()]
    assert events == [ASSIGNED_POD_DELETE, NODE_ADD, NODE_UPDATE]


def test_filters_accept_any_row_order(snap: Snapshot, handle: FakeHandle) -> None:
    for i in range(5):
        add_node(snap, make_node(f"n{i}", unschedulable=i % 2 == 1), ALLOC)
    rows = all_rows(snap)[::-1].copy()
    codes = NodeUnschedulable(None, handle).filter_batch(CycleState(), pod_info(make_pod()), rows)
    assert codes.tolist() == [0, 1, 0, 1, 0]
