"""Non-zero cpu/memory (NodeInfo.NonZeroRequested): per-pod amounts and the per-row tracker."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from koordsched.api.resources import pod_requests
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.types import PodInfo
from koordsched.plugins.noderesources.nonzero import NonZeroRequested, compute_nonzero, pod_nonzero
from tests.builders import container, make_node, make_pod
from tests.fakes import FakeHandle
from tests.plugins.conftest import add_node, place

MI = 1024**2
D_CPU, D_MEM = 100, 200 * MI


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"containers": []}, (0, 0, 0, 0)),
        ({"containers": [container()]}, (D_CPU, D_MEM, D_CPU, D_MEM)),
        ({"containers": [container(requests={"cpu": "0"})]}, (0, D_MEM, 0, D_MEM)),
        ({"containers": [container(requests={"cpu": "250m", "memory": "1Mi"})]}, (250, MI, 250, MI)),
        ({"containers": [container("a"), container("b", {"cpu": "1"})]}, (1100, 2 * D_MEM, 1100, 2 * D_MEM)),
        # Init containers: the larger of the steady state and each init step.
        (
            {
                "containers": [container(requests={"cpu": "100m", "memory": "1Mi"})],
                "initContainers": [container("i", {"cpu": "2", "memory": "1Mi"})],
            },
            (2000, MI, 2000, MI),
        ),
        (
            {"containers": [container(requests={"cpu": "1"})], "initContainers": [container("i")]},
            (1000, D_MEM, 1000, D_MEM),
        ),
        # Overhead adds to both.
        (
            {"containers": [container()], "overhead": {"cpu": "50m", "memory": "1Mi"}},
            (150, D_MEM + MI, 150, D_MEM + MI),
        ),
        # A sidecar: the pod side adds it to the containers; the node side (1.28's calculateResource)
        # treats it as an init step only.
        (
            {
                "containers": [container(requests={"cpu": "1", "memory": "1Mi"})],
                "initContainers": [container("s", {"cpu": "500m", "memory": "1Mi"}, restart_policy="Always")],
            },
            (1000, MI, 1500, 2 * MI),
        ),
        # A sidecar without requests gets the defaults on both sides; on the node side only as an
        # init step, which then outweighs the 1Mi of the regular container.
        (
            {
                "containers": [container(requests={"cpu": "1", "memory": "1Mi"})],
                "initContainers": [container("s", restart_policy="Always")],
            },
            (1000, D_MEM, 1000 + D_CPU, MI + D_MEM),
        ),
        # Limits stand in for missing requests (API defaulting), so they are not "missing".
        ({"containers": [{"name": "c", "resources": {"limits": {"cpu": "300m"}}}]}, (300, D_MEM, 300, D_MEM)),
    ],
)
def test_compute_nonzero(spec: dict[str, Any], expected: tuple[int, int, int, int]) -> None:
    assert compute_nonzero(make_pod("p", **spec)) == expected
    # The cached per-PodInfo value (with its single-container shortcut) agrees.
    pod = make_pod("p", **spec)
    assert pod_nonzero(PodInfo(pod, pod_requests(pod))) == expected


def test_tracker_follows_pods_and_row_moves(snap: Snapshot, rng: random.Random) -> None:
    """After adds, removals and node deletions (which move the last row), rows hold the right sums."""
    handle = FakeHandle(snap)
    tracker = NonZeroRequested.of(handle.snapshot)
    assert NonZeroRequested.of(snap) is tracker  # one per snapshot
    alloc = {"cpu": 64000, "memory": 256 * 1024 * MI, "pods": 500}
    live: dict[str, list[Any]] = {}
    for step in range(400):
        action = rng.random()
        if action < 0.15 or not live:
            name = f"n{step}"
            add_node(snap, make_node(name), alloc)
            live[name] = []
        elif action < 0.25 and len(live) > 1:
            name = rng.choice(sorted(live))
            snap.remove_node(name)
            del live[name]
        elif action < 0.4:
            name = rng.choice(sorted(live))
            if live[name]:
                p = live[name].pop(rng.randrange(len(live[name])))
                snap.remove_pod(snap.by_name[name], p)
        else:
            name = rng.choice(sorted(live))
            requests = {} if rng.random() < 0.5 else {"cpu": f"{rng.randrange(1000)}m"}
            live[name].append(place(snap, name, make_pod(f"p{step}", requests)))
    assert len(tracker.values) >= snap.n
    for info in snap.infos:
        want = np.zeros(2, dtype=np.int64)
        for p in info.pods.values():
            want += compute_nonzero(p.pod)[:2]
        assert tracker.values[info.row].tolist() == want.tolist(), info
    # A tracker attached late starts from the pods already there.
    late = NonZeroRequested(snap)
    assert late.values[: snap.n].tolist() == tracker.values[: snap.n].tolist()
