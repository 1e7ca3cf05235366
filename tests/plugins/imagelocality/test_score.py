"""ImageLocality's scores, table-driven from kube-scheduler's documented semantics.

Per node: the sum over the pod's containers (init containers included) of each image's size
the node holds, scaled by (nodes holding the image / all nodes); clamped to [23 MiB,
1000 MiB x containers] and mapped onto 0..100 with integer division. Pod image names are
normalized (no tag: ``:latest``); node names are compared as reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordsched.api.core import Node, Pod
from koordsched.api.resources import pod_requests
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.status import Code
from koordsched.framework.types import PodInfo
from koordsched.plugins.imagelocality import ImageLocality, ImageStates, normalized_image_name
from koordsched.plugins.imagelocality.plugin import calculate_priority
from tests import builders
from tests.builders import container, make_pod
from tests.fakes import FakeHandle

MB = 1024 * 1024
ALLOC = {"cpu": 8000, "memory": 32 * 1024**3, "pods": 110}


def node(name: str, images: Mapping[str, int] | Sequence[tuple[Sequence[str], int]] = ()) -> Node:
    """A node reporting ``images``: name -> size in bytes, or (names, size) entries."""
    entries = images.items() if isinstance(images, Mapping) else images
    listed = [{"names": [n] if isinstance(n, str) else list(n), "sizeBytes": size} for n, size in entries]
    return builders.node(name, None, None, None, hostname=False, images=listed)


def pod(*images: str, init: Sequence[str] = ()) -> Pod:
    return make_pod(
        "p",
        uid="u",
        containers=[container(f"c{i}", image=image) for i, image in enumerate(images)],
        initContainers=[container(f"i{i}", image=image) for i, image in enumerate(init)],
    )


def cluster(*nodes: Node) -> FakeHandle:
    """A snapshot holding ``nodes``, the image index attached first (as the plugin does when the
    scheduler builds it, before any node arrives)."""
    h = FakeHandle(Snapshot())
    ImageStates.of(h.snapshot)
    for n in nodes:
        h.snapshot.add_node(n, dict(ALLOC))
    return h


def scores(h: FakeHandle, p: Pod, *, pre_score: bool = True) -> dict[str, int] | None:
    """Every node's score; None when PreScore skips (every node would score 0)."""
    pl = ImageLocality(None, h)
    snap = h.snapshot
    rows = np.arange(snap.n, dtype=np.int64)
    state = CycleState()
    pi = PodInfo(p, pod_requests(p))
    if pre_score:
        status = pl.pre_score(state, pi, rows)
        if status.code is Code.SKIP:
            return None
        assert status.ok, status
    out = pl.score_batch(state, pi, rows)
    assert out.dtype == np.int64
    return {i.name: int(s) for i, s in zip(snap.infos, out.tolist(), strict=True)}


# --- the formula ---------------------------------------------------------------------------------

# (images per node, pod, expected score per node)
CASES: list[tuple[str, list[Node], Pod, dict[str, int]]] = [
    (
        "each image on one node of two: halved, the small one under the threshold",
        [
            node("n1", {"gcr.io/40:latest": 40 * MB, "gcr.io/300:latest": 300 * MB}),
            node("n2", {"gcr.io/250:latest": 250 * MB}),
        ],
        pod("gcr.io/40", "gcr.io/250"),
        # n1: 40 MiB / 2 = 20 MiB < 23 MiB -> 0; n2: 250 / 2 = 125 MiB of 2 x 1000 MiB
        {"n1": 0, "n2": 100 * (125 - 23) // (2000 - 23)},
    ),
    (
        "an image on every node counts in full",
        [node(f"n{i}", {"app:v1": 500 * MB}) for i in range(3)],
        pod("app:v1"),
        {f"n{i}": 100 * (500 - 23) // (1000 - 23) for i in range(3)},
    ),
    (
        "above 1000 MiB per container the score is 100",
        [node("n1", {"big:1": 3000 * MB}), node("n2", {"big:1": 3000 * MB})],
        pod("big:1"),
        {"n1": 100, "n2": 100},
    ),
    (
        "the maximum grows with the containers: init containers count",
        [node("n1", {"big:1": 1500 * MB}), node("n2", {"big:1": 1500 * MB})],
        pod("big:1", init=["other:1"]),
        {"n1": 100 * (1500 - 23) // (2000 - 23), "n2": 100 * (1500 - 23) // (2000 - 23)},
    ),
    (
        "an init container's image scores like a container's",
        [node("n1", {"init:1": 600 * MB}), node("n2", {"init:1": 600 * MB})],
        pod("app:1", init=["init:1"]),
        {"n1": 100 * (600 - 23) // (2000 - 23), "n2": 100 * (600 - 23) // (2000 - 23)},
    ),
    (
        "an image used by two containers counts twice",
        [node("n1", {"app:1": 300 * MB}), node("n2", {})],
        pod("app:1", "app:1"),
        # 300 MiB / 2 nodes, twice: 300 MiB of 2000 MiB
        {"n1": 100 * (300 - 23) // (2000 - 23), "n2": 0},
    ),
    (
        "an untagged pod image is :latest; the node's names are taken as reported",
        [node("n1", {"nginx:latest": 800 * MB}), node("n2", {"nginx": 800 * MB})],
        pod("nginx"),
        {"n1": 100 * (400 - 23) // (1000 - 23), "n2": 0},
    ),
    (
        "a registry port is no tag",
        [node("n1", {"registry:5000/app:latest": 800 * MB}), node("n2", {"registry:5000/app": 800 * MB})],
        pod("registry:5000/app"),
        {"n1": 100 * (400 - 23) // (1000 - 23), "n2": 0},
    ),
    (
        "a digest matches the node's digest name",
        [node("n1", [(("app:1", "app@sha256:abc"), 800 * MB)]), node("n2", {})],
        pod("app@sha256:abc"),
        {"n1": 100 * (400 - 23) // (1000 - 23), "n2": 0},
    ),
    (
        "another tag is another image",
        [node("n1", {"app:1": 800 * MB}), node("n2", {"app:2": 800 * MB})],
        pod("app:2"),
        {"n1": 0, "n2": 100 * (400 - 23) // (1000 - 23)},
    ),
    (
        "a name's size is the first node's to report it",
        [node("n1", {"app:1": 100 * MB}), node("n2", {"app:1": 900 * MB})],
        pod("app:1"),
        {"n1": 100 * (100 - 23) // (1000 - 23), "n2": 100 * (100 - 23) // (1000 - 23)},
    ),
    (
        "the scaled size is truncated: 3 nodes, one with 100 MiB",
        [node("n1", {"app:1": 100 * MB}), node("n2"), node("n3")],
        pod("app:1"),
        {"n1": 100 * (int(100 * MB * (1 / 3)) - 23 * MB) // (977 * MB), "n2": 0, "n3": 0},
    ),
]


@pytest.mark.parametrize(("nodes", "p", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_scores(nodes: list[Node], p: Pod, want: dict[str, int]) -> None:
    h = cluster(*nodes)
    assert scores(h, p) == want
    # Without PreScore (a direct Score call) the same.
    assert scores(h, p, pre_score=False) == want


def test_calculate_priority() -> None:
    assert calculate_priority(0, 1) == 0
    assert calculate_priority(23 * MB, 1) == 0
    assert calculate_priority(1000 * MB, 1) == 100
    assert calculate_priority(5000 * MB, 1) == 100
    assert calculate_priority(511 * MB, 1) == 100 * (511 - 23) // 977
    assert calculate_priority(1000 * MB, 2) == 100 * 977 // 1977


@pytest.mark.parametrize(
    ("name", "normalized"),
    [
        ("nginx", "nginx:latest"),
        ("nginx:1.25", "nginx:1.25"),
        ("docker.io/library/nginx", "docker.io/library/nginx:latest"),
        ("localhost:5000/app", "localhost:5000/app:latest"),
        ("localhost:5000/app:v2", "localhost:5000/app:v2"),
        ("app@sha256:0123", "app@sha256:0123"),
        ("", ":latest"),
    ],
)
def test_normalized_image_name(name: str, normalized: str) -> None:
    assert normalized_image_name(name) == normalized


# --- when it costs nothing ----------------------------------------------------------------------


def test_skips_when_no_node_reports_images() -> None:
    assert scores(cluster(node("n1"), node("n2")), pod("app:1")) is None


def test_skips_when_no_node_holds_the_pods_images() -> None:
    assert scores(cluster(node("n1", {"other:1": 900 * MB})), pod("app:1")) is None


def test_skips_when_no_node_can_pass_the_threshold() -> None:
    # 40 MiB on one node of two: 20 MiB at most anywhere.
    h = cluster(node("n1", {"app:1": 40 * MB}), node("n2"))
    assert scores(h, pod("app:1")) is None


def test_skips_a_pod_without_containers() -> None:
    assert scores(cluster(node("n1", {"app:1": 900 * MB})), pod()) is None


# --- the image index follows the nodes ----------------------------------------------------------


def test_index_follows_node_updates_and_removals() -> None:
    h = cluster(node("n1", {"app:1": 100 * MB}), node("n2", {"app:1": 900 * MB}), node("n3"))
    snap = h.snapshot
    # n1 leaves: n2 still holds app:1, whose size stays the first reporter's (100 MiB); n3 moves
    # into n1's row.
    snap.remove_node("n1")
    assert scores(h, pod("app:1")) == {"n3": 0, "n2": 100 * (50 - 23) // 977}
    # n3 pulls the image (a status update): 100 MiB on both of 2 nodes.
    snap.update_node(node("n3", {"app:1": 700 * MB}), dict(ALLOC))
    assert scores(h, pod("app:1")) == {"n3": 100 * 77 // 977, "n2": 100 * 77 // 977}
    # Both drop it; the next node to report it sets the size anew.
    snap.update_node(node("n3"), dict(ALLOC))
    snap.update_node(node("n2"), dict(ALLOC))
    assert ImageStates.of(snap).size("app:1") is None
    snap.update_node(node("n2", {"app:1": 700 * MB}), dict(ALLOC))
    assert scores(h, pod("app:1")) == {"n3": 0, "n2": 100 * (350 - 23) // 977}


def test_a_heartbeat_keeps_the_cached_rows() -> None:
    h = cluster(node("n1", {"app:1": 600 * MB}), node("n2"))
    index = ImageStates.of(h.snapshot)
    rows = index.rows("app:1")
    version = index.version
    h.snapshot.update_node(node("n1", {"app:1": 600 * MB}), dict(ALLOC))
    assert index.version == version and index.rows("app:1") is rows


# --- against a reference, on random clusters ----------------------------------------------------

IMAGES = ["a", "a:latest", "b:1", "b:2", "reg:5000/c", "reg:5000/c:latest", "d@sha256:1"]


def reference(events: list[tuple[str, str, dict[str, int]]], p: Pod) -> dict[str, int]:
    """Upstream's cache and Score, straightforwardly: replay node events, then score each node."""
    nodes: dict[str, dict[str, int]] = {}
    states: dict[str, tuple[int, set[str]]] = {}
    for op, name, images in events:
        old = nodes.pop(name, None)
        if old is not None:
            for image in old:
                size, holders = states[image]
                holders.discard(name)
                if not holders:
                    del states[image]
        if op == "remove":
            continue
        nodes[name] = images
        for image, size in images.items():
            if image not in states:
                states[image] = (size, set())
            states[image][1].add(name)
    containers = [*p.spec.init_containers, *p.spec.containers]
    out = {}
    for name, images in nodes.items():
        total = 0
        for c in containers:
            image = normalized_image_name(c.image)
            if image in images:
                size, holders = states[image]
                total += int(float(size) * (float(len(holders)) / float(len(nodes))))
        out[name] = calculate_priority(total, len(containers))
    return out


node_images = st.dictionaries(st.sampled_from(IMAGES), st.integers(0, 1500).map(lambda m: m * MB), max_size=4)
event = st.tuples(
    st.sampled_from(["set", "set", "remove"]), st.sampled_from(["n0", "n1", "n2", "n3", "n4"]), node_images
)


@settings(max_examples=150, deadline=None)
@given(
    events=st.lists(event, min_size=1, max_size=14),
    images=st.lists(st.sampled_from(["a", "b:1", "b:2", "reg:5000/c", "d@sha256:1", "e"]), max_size=3),
    init=st.lists(st.sampled_from(["a", "b:2"]), max_size=1),
)
def test_agrees_with_reference(
    events: list[tuple[str, str, dict[str, int]]], images: list[str], init: list[str]
) -> None:
    h = FakeHandle(Snapshot())
    snap = h.snapshot
    ImageStates.of(snap)  # attached first, then follows every event
    for op, name, imgs in events:
        if op == "remove":
            if name in snap.by_name:
                snap.remove_node(name)
            continue
        n = node(name, imgs)
        if name in snap.by_name:
            snap.update_node(n, dict(ALLOC))
        else:
            snap.add_node(n, dict(ALLOC))
    p = pod(*images, init=init)
    want = reference(events, p)
    got = scores(h, p)
    if got is None:
        assert all(v == 0 for v in want.values())
    else:
        assert got == want
