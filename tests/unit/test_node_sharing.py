"""Nodes of one kind hold one copy of what they agree on (``api.sharing.NodeSharing``).

What must hold: a shared node equals the node decoded alone, field for field; nodes that differ
in a part never share it; image entries are shared one by one when the lists differ.
"""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from koordsched.api.core import Node
from koordsched.api.sharing import NodeSharing


def node_doc(
    name: str, *, cpu: str = "32", ready: str = "True", images: tuple[str, ...] = (), taint: str = ""
) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "256Gi", "pods": "110"}
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "capacity": alloc,
            "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady"}],
        },
    }
    if images:
        doc["status"]["images"] = [{"names": [i], "sizeBytes": 1000} for i in images]
    if taint:
        doc["spec"]["taints"] = [{"key": taint, "effect": "NoSchedule"}]
    return doc


def decode(doc: dict[str, Any]) -> Node:
    """As the reflector decodes it: from JSON, every string its own."""
    return msgspec.json.decode(msgspec.json.encode(doc), type=Node)


def test_nodes_of_one_kind_share_their_status_and_taints() -> None:
    sharing = NodeSharing()
    a, b = (sharing.node(decode(node_doc(n, taint="gpu"))) for n in ("a", "b"))
    assert a.status is b.status and a.spec.taints is b.spec.taints
    assert a.metadata.labels is not b.metadata.labels  # the hostname differs
    assert (a, b) == (decode(node_doc("a", taint="gpu")), decode(node_doc("b", taint="gpu")))
    assert a.api_version is b.api_version and a.kind is b.kind


def test_parts_are_shared_when_the_whole_status_differs() -> None:
    sharing = NodeSharing()
    a = sharing.node(decode(node_doc("a", images=("nginx", "redis"))))
    b = sharing.node(decode(node_doc("b", images=("redis", "busybox"))))
    c = sharing.node(decode(node_doc("c", cpu="64", ready="False")))
    assert a.status is not b.status
    assert a.status.allocatable is b.status.allocatable and a.status.conditions is b.status.conditions
    assert a.status.images[1] is b.status.images[0]  # redis, on both
    assert [i.names for i in b.status.images] == [["redis"], ["busybox"]]
    assert c.status.allocatable is not a.status.allocatable and c.status.allocatable["cpu"] == "64"
    assert c.status.conditions is not a.status.conditions and c.status.conditions[0].status == "False"


_cpu = st.sampled_from(["32", "64", 32])
_ready = st.sampled_from(["True", "False"])
_images = st.lists(st.sampled_from(["nginx", "redis", "busybox"]), max_size=3).map(tuple)
_taint = st.sampled_from(["", "gpu"])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(_cpu, _ready, _images, _taint), min_size=1, max_size=10))
def test_shared_nodes_equal_nodes_decoded_alone(shapes: list[tuple[Any, str, tuple[str, ...], str]]) -> None:
    sharing = NodeSharing(limit=3)
    for i, (cpu, ready, images, taint) in enumerate(shapes):
        doc = node_doc(f"n{i}", cpu=cpu, ready=ready, images=images, taint=taint)
        assert sharing.node(decode(doc)) == decode(doc), i
    assert all(n <= 3 for n in sharing.sizes().values())
