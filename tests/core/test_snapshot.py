"""Snapshot columns follow node and pod changes exactly, including row moves on removal."""

from __future__ import annotations

import numpy as np

from koordsched.framework.snapshot import Snapshot
from koordsched.framework.types import PodInfo
from tests.builders import node, pod


def alloc(cpu: int, mem: int, pods: int = 110, **extra: int) -> dict[str, int]:
    return {"cpu": cpu, "memory": mem, "pods": pods, **extra}


def test_columns_and_extended_resources() -> None:
    s = Snapshot(capacity=1)
    s.add_node(node("a"), alloc(4000, 8 << 30))
    s.add_node(node("b"), alloc(8000, 16 << 30, **{"nvidia.com/gpu": 8}))
    gpu = s.resources.get("nvidia.com/gpu")
    assert gpu is not None
    assert s.alloc_view()[:, gpu].tolist() == [0, 8]
    assert s.max_pods[: s.n].tolist() == [110, 110]
    assert s.alloc.flags.c_contiguous


def test_pod_accounting_and_ports() -> None:
    s = Snapshot()
    info = s.add_node(node("a"), alloc(4000, 8 << 30))
    p = PodInfo(
        pod("web", containers=[{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]),
        {"cpu": 250, "memory": 1 << 20},
    )
    s.add_pod(info, p)
    assert info.requested("cpu") == 250
    assert s.pod_count[0] == 1
    assert info.port_conflicts([("0.0.0.0", "TCP", 8080)])
    assert not info.port_conflicts([("0.0.0.0", "UDP", 8080)])
    s.remove_pod(info, p)
    assert info.requested("cpu") == 0
    assert not info.used_ports


def test_remove_node_moves_last_row() -> None:
    s = Snapshot()
    for i, cpu in enumerate([1000, 2000, 3000]):
        s.add_node(node(f"n{i}"), alloc(cpu, 1 << 30))
    gen = s.generation
    s.remove_node("n0")
    assert s.n == 2
    assert [i.name for i in s.infos] == ["n2", "n1"]
    assert s.by_name["n2"].row == 0
    assert s.alloc_view()[:, 0].tolist() == [3000, 2000]
    assert s.generation > gen


def test_taint_classes_are_shared() -> None:
    s = Snapshot()
    t = [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    s.add_node(node("a", taints=t), alloc(1, 1))
    s.add_node(node("b", taints=t), alloc(1, 1))
    s.add_node(node("c"), alloc(1, 1))
    classes = s.taint_class[: s.n].tolist()
    assert classes[0] == classes[1] != classes[2] == 0
    assert len(s.taint_sets) == 2


def test_label_columns_follow_label_changes() -> None:
    s = Snapshot()
    s.add_node(node("a", labels={"zone": "z1"}), alloc(1, 1))
    s.add_node(node("b", labels={"zone": "z2"}), alloc(1, 1))
    assert s.label_column("zone", "z1").tolist() == [True, False]
    assert s.label_column("zone", None).tolist() == [True, True]
    s.update_node(node("b", labels={"zone": "z1"}), alloc(1, 1))
    assert s.label_column("zone", "z1").tolist() == [True, True]
    assert np.array_equal(s.label_column("missing", None), np.zeros(2, dtype=bool))


def test_pod_naming_a_new_resource_grows_the_columns() -> None:
    s = Snapshot()
    info = s.add_node(node("a"), alloc(1000, 1 << 30))
    s.add_pod(info, PodInfo(pod("gpu"), {"cpu": 100, "example.com/widget": 2}))
    assert info.requested("example.com/widget") == 2
    assert info.allocatable("example.com/widget") == 0
