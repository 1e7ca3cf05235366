"""Pods that agree on a part hold one copy of it (``api.sharing``), and the loader streams its input.

What must hold: a shared pod equals the pod decoded on its own, field for field; pods that
differ anywhere in a part never share it; the tables stay bounded; and the loader, which now
reads a file document by document, still reads every document and names a bad byte exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordsched.api.core import Pod
from koordsched.api.sharing import PodSharing
from koordsched.backends.sim import loader
from koordsched.backends.sim.loader import InputError, kind_specs, load_cluster
from koordsched.plugins.registry import in_tree_registry


def pod_doc(
    name: str, *, cpu: str = "100m", app: str = "web", node: str = "", owner: str = "rs-1"
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": {"app": app},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": owner}],
        },
        "spec": spec,
    }


def test_pods_of_one_template_share_their_parts_and_stay_equal() -> None:
    sharing = PodSharing()
    a = sharing.pod(msgspec.convert(pod_doc("a"), Pod))
    b = sharing.pod(msgspec.convert(pod_doc("b"), Pod))
    assert a.spec is b.spec and a.status is b.status
    assert a.metadata.labels is b.metadata.labels
    assert a.metadata.owner_references is b.metadata.owner_references
    assert (a.metadata.name, b.metadata.name) == ("a", "b")
    assert a == msgspec.convert(pod_doc("a"), Pod) and b == msgspec.convert(pod_doc("b"), Pod)


def test_pods_that_differ_share_nothing_of_what_differs() -> None:
    sharing = PodSharing()
    a = sharing.pod(msgspec.convert(pod_doc("a"), Pod))
    b = sharing.pod(msgspec.convert(pod_doc("b", cpu="200m", app="db", owner="rs-2"), Pod))
    c = sharing.pod(msgspec.convert(pod_doc("c", node="n1"), Pod))
    assert a.spec is not b.spec and a.spec is not c.spec
    assert a.metadata.labels is not b.metadata.labels
    assert a.metadata.owner_references is not b.metadata.owner_references
    assert b.spec.containers[0].resources.requests == {"cpu": "200m"}
    assert c.spec.node_name == "n1" and a.spec.node_name == ""
    # 1 and "1" and 1.0 are different quantities as written: never one copy for both.
    ints = sharing.pod(msgspec.convert(pod_doc("i", cpu=1), Pod))  # type: ignore[arg-type]
    strs = sharing.pod(msgspec.convert(pod_doc("s", cpu="1"), Pod))
    floats = sharing.pod(msgspec.convert(pod_doc("f", cpu=1.0), Pod))  # type: ignore[arg-type]
    assert len({id(ints.spec), id(strs.spec), id(floats.spec)}) == 3


def test_a_value_with_no_encoding_is_kept_unshared() -> None:
    sharing = PodSharing()
    doc = pod_doc("big")
    doc["spec"]["priority"] = 2**70  # refused later by validation, with its field: kept as written
    a = sharing.pod(msgspec.convert(doc, Pod))
    b = sharing.pod(msgspec.convert(doc, Pod))
    assert a.spec.priority == b.spec.priority == 2**70 and a.spec is not b.spec


def test_tables_are_bounded() -> None:
    sharing = PodSharing(limit=8)
    pods = [sharing.pod(msgspec.convert(pod_doc(f"p{i}", cpu=f"{i + 1}m"), Pod)) for i in range(50)]
    assert all(n <= 8 for n in sharing.sizes().values())
    assert [p.spec.containers[0].resources.requests["cpu"] for p in pods] == [f"{i + 1}m" for i in range(50)]


def test_bound_pods_of_one_template_share_its_parts_and_one_spec_per_node() -> None:
    sharing = PodSharing()
    pending = sharing.pod(msgspec.convert(pod_doc("p"), Pod))
    # Listed in name order, the bound pods of one template alternate between many nodes.
    bound = [sharing.pod(msgspec.convert(pod_doc(f"b{i}", node=f"n{i % 3}"), Pod)) for i in range(9)]
    assert [p.spec.node_name for p in bound[:3]] == ["n0", "n1", "n2"]
    assert len({id(p.spec) for p in bound}) == 3  # one spec per node
    assert bound[0].spec is bound[3].spec is bound[6].spec
    for p in bound:  # the node's spec holds the template's parts
        assert p.spec.containers is pending.spec.containers
        assert p.spec.tolerations is pending.spec.tolerations
    assert pending.spec.node_name == ""
    # Absent annotations decode as an empty map per pod: one for all of them.
    assert (
        bound[0].metadata.annotations == {} and bound[0].metadata.annotations is pending.metadata.annotations
    )
    for i, p in enumerate(bound):
        assert p == msgspec.convert(pod_doc(f"b{i}", node=f"n{i % 3}"), Pod)
    # Created in the same second by one ReplicaSet: one string each for the time and the prefix.
    docs = [pod_doc(f"r{i}") for i in range(2)]
    for doc in docs:
        doc["metadata"] |= {"creationTimestamp": "2026-12-01T19:00:00Z", "generateName": "web-7d9f-"}
    r0, r1 = (sharing.pod(msgspec.json.decode(msgspec.json.encode(d), type=Pod)) for d in docs)
    assert r0.metadata.creation_timestamp is r1.metadata.creation_timestamp == "2026-12-01T19:00:00Z"
    assert r0.metadata.generate_name is r1.metadata.generate_name == "web-7d9f-"
    other = sharing.pod(msgspec.convert(pod_doc("o", cpu="200m", node="n0"), Pod))
    assert other.spec is not bound[0].spec and other.spec.containers is not pending.spec.containers
    assert other.spec.containers[0].resources.requests == {"cpu": "200m"}


def test_the_bound_table_is_bounded() -> None:
    sharing = PodSharing(bound_limit=4)
    pods = [sharing.pod(msgspec.convert(pod_doc(f"b{i}", node=f"n{i}"), Pod)) for i in range(20)]
    assert sharing.sizes()["bound"] <= 4
    assert [p.spec.node_name for p in pods] == [f"n{i}" for i in range(20)]
    assert len({id(p.spec.containers) for p in pods}) == 1


_cpu = st.sampled_from(["100m", "200m", "1", "1Gi"])
_app = st.sampled_from(["web", "db", ""])
_node = st.sampled_from(["", "n1", "n2"])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(_cpu, _app, _node), min_size=1, max_size=12))
def test_shared_pods_equal_pods_decoded_alone(shapes: list[tuple[str, str, str]]) -> None:
    sharing = PodSharing(limit=4)
    docs = [pod_doc(f"p{i}", cpu=cpu, app=app, node=node) for i, (cpu, app, node) in enumerate(shapes)]
    for i, doc in enumerate(docs):
        if not doc["metadata"]["labels"]["app"]:
            del doc["metadata"]["labels"]
        shared = sharing.pod(msgspec.convert(doc, Pod))
        assert shared == msgspec.convert(doc, Pod), i


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_loaded_pods_share_their_template(tmp_path: Path) -> None:
    docs = "".join(
        f"""---
apiVersion: v1
kind: Pod
metadata: {{name: web-{i}, namespace: shop, labels: {{app: web}}}}
spec: {{containers: [{{name: c, resources: {{requests: {{cpu: 100m}}}}}}]}}
"""
        for i in range(3)
    )
    listed = """---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Pod, metadata: {name: db-0, namespace: shop}, spec: {containers: [{name: c}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: db-1, namespace: shop}, spec: {containers: [{name: c}]}}
"""
    cluster = load_cluster([_write(tmp_path / "c.yaml", docs + listed)], kind_specs(in_tree_registry()))
    pods = {o.key: o.obj for o in cluster.objects if o.kind == "Pod"}
    assert list(pods) == ["shop/web-0", "shop/web-1", "shop/web-2", "shop/db-0", "shop/db-1"]
    assert pods["shop/web-0"].spec is pods["shop/web-2"].spec
    assert pods["shop/db-0"].spec is pods["shop/db-1"].spec is not pods["shop/web-0"].spec
    # One string for each kind and apiVersion, however many documents name it.
    loaded = [o for o in cluster.objects if o.kind == "Pod"]
    assert all(o.kind is loaded[0].kind and o.obj.api_version is loaded[0].obj.api_version for o in loaded)
    assert [o.origin.rsplit(": ", 1)[1] for o in cluster.objects if o.kind == "Pod"] == [
        "document 1",
        "document 2",
        "document 3",
        "document 4 item 1",
        "document 4 item 2",
    ]


def test_a_bad_byte_past_the_first_chunk_is_named_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loader, "_CHUNK", 16)
    # "é" (2 bytes) straddles the first chunk boundary; the bad byte 0xff comes after it.
    head = b"# " + b"x" * 13 + "é".encode() + b"abc"
    path = tmp_path / "bad.yaml"
    path.write_bytes(head + b"\xff\n")
    with pytest.raises(InputError) as err:
        load_cluster([path], kind_specs(in_tree_registry()))
    assert str(err.value) == f"{path}: not UTF-8 text (invalid start byte at byte {len(head)})"
    # A sequence cut off at the end of the file is named where it starts.
    path.write_bytes(head + "é".encode()[:1])
    with pytest.raises(InputError) as err:
        load_cluster([path], kind_specs(in_tree_registry()))
    assert str(err.value) == f"{path}: not UTF-8 text (unexpected end of data at byte {len(head)})"


def test_an_alias_past_the_first_chunk_is_still_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loader, "_CHUNK", 8)
    lols = "\n".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 10))
    text = f"apiVersion: v1\nkind: Pod\nmetadata: {{name: bomb}}\nl0: &l0 [x]\n{lols}\n"
    with pytest.raises(InputError, match="YAML refused"):
        load_cluster([_write(tmp_path / "bomb.yaml", text)], kind_specs(in_tree_registry()))


def test_type_strings_are_one_string() -> None:
    """Decoders make a new "v1" and "Pod" per object; shared pods hold one of each."""
    sharing = PodSharing()
    docs = [dict(pod_doc(n), apiVersion="".join(["v", "1"]), kind="".join(["Po", "d"])) for n in ("a", "b")]
    a, b = (sharing.pod(msgspec.convert(d, Pod)) for d in docs)
    assert docs[0]["apiVersion"] is not docs[1]["apiVersion"]
    assert a.api_version is b.api_version and a.kind is b.kind
    assert (a.api_version, a.kind) == ("v1", "Pod")


def test_absent_labels_annotations_and_owners_are_one_empty_part() -> None:
    """A decoder gives each pod its own empty dict and list where a field is absent; shared pods
    hold one of each, and still equal (and encode as) the pod decoded alone."""
    sharing = PodSharing()
    docs = [{"metadata": {"name": n, "namespace": "ns"}, "spec": {"containers": []}} for n in ("a", "b")]
    alone = [msgspec.convert(d, Pod) for d in docs]
    assert alone[0].metadata.annotations is not alone[1].metadata.annotations
    a, b = (sharing.pod(msgspec.convert(d, Pod)) for d in docs)
    assert (a, b) == tuple(alone)
    assert a.metadata.labels is b.metadata.labels is a.metadata.annotations
    assert a.metadata.owner_references is b.metadata.owner_references
    assert (a.metadata.labels, a.metadata.owner_references) == ({}, [])
    assert msgspec.json.encode(a) == msgspec.json.encode(alone[0])
    # A pod with its own labels keeps them; its absent annotations are the shared empty dict.
    c = sharing.pod(msgspec.convert(pod_doc("c"), Pod))
    assert c.metadata.labels == {"app": "web"} and c.metadata.annotations is a.metadata.annotations
