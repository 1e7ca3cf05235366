"""NodeResourcesFitPlus: exact scores from the spec's formulas (section 4.7), args and config loading."""

from __future__ import annotations

import textwrap
from typing import Any

import msgspec
import numpy as np
import pytest

from koordsched.config import ConfigError, load_config
from koordsched.config.catalog import ArgsError
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import Snapshot
from koordsched.plugins.noderesourcesfitplus import (
    NodeResourcesFitPlus,
    NodeResourcesFitPlusArgs,
    ResourceTypeWeight,
)
from koordsched.plugins.registry import in_tree_registry
from tests.builders import container, make_node, make_pod, pod_info
from tests.fakes import FakeHandle
from tests.plugins.conftest import add_node, all_rows, place

MI = 1024**2
GPU = "nvidia.com/gpu"
KGPU = "koordinator.sh/gpu"


def most(weight: int) -> dict[str, Any]:
    return {"type": "MostAllocated", "weight": weight}


def least(weight: int) -> dict[str, Any]:
    return {"type": "LeastAllocated", "weight": weight}


#: The packing profile: GPUs MostAllocated (weight 2), cpu and memory LeastAllocated (weight 1).
GPU_PACKING = {GPU: most(2), KGPU: most(2), "cpu": least(1), "memory": least(1)}


def plugin_of(handle: FakeHandle, resources: dict[str, Any]) -> NodeResourcesFitPlus:
    return NodeResourcesFitPlus(msgspec.convert({"resources": resources}, NodeResourcesFitPlusArgs), handle)


def scores(plugin: NodeResourcesFitPlus, pod: Any, snap: Snapshot, *, pre_score: bool = True) -> list[int]:
    state = CycleState()
    rows = all_rows(snap)
    if pre_score:
        assert plugin.pre_score(state, pod, rows).ok
    out = plugin.score_batch(state, pod, rows)
    assert out.dtype == np.int64 and out.shape == (len(rows),)
    return [int(s) for s in out]


def gpu_cluster(snap: Snapshot) -> None:
    """n0: a GPU node with half its GPUs in use; n1: an idle GPU node; n2: a CPU node."""
    add_node(snap, make_node("n0"), {"cpu": 4000, "memory": 10000 * MI, GPU: 8, "pods": 110})
    add_node(snap, make_node("n1"), {"cpu": 4000, "memory": 10000 * MI, GPU: 8, "pods": 110})
    add_node(snap, make_node("n2"), {"cpu": 4000, "memory": 10000 * MI, "pods": 110})
    place(snap, "n0", make_pod("running", {"cpu": "1", "memory": "2000Mi", GPU: "4"}))


@pytest.mark.parametrize(
    ("requests", "resources", "expected"),
    [
        # n0: cpu (4000-2000)*100/4000 = 50, memory (10000-3000)*100/10000 = 70, gpu 6*100/8 = 75:
        #     (50 + 70 + 2*75) / 4 = 67.
        # n1: cpu 75, memory 90, gpu 2*100/8 = 25: (75 + 90 + 50) / 4 = 53.
        # n2: no GPU, so cap 0 scores 0 but keeps its weight: (75 + 90 + 0) / 4 = 41.
        ({"cpu": "1", "memory": "1000Mi", GPU: "2"}, GPU_PACKING, [67, 53, 41]),
        # A CPU-only pod: gpu is not requested, so only cpu and memory count.
        # n0: (50 + 70) / 2 = 60; n1 and n2: (75 + 90) / 2 = 82.
        ({"cpu": "1", "memory": "1000Mi"}, GPU_PACKING, [60, 82, 82]),
        # A requested resource that is not configured is left out: example.com/foo.
        ({"cpu": "1", "memory": "1000Mi", "example.com/foo": "1"}, GPU_PACKING, [60, 82, 82]),
        # Nothing requested is configured: weightSum 0 scores 100 everywhere.
        ({"cpu": "1", "memory": "1000Mi"}, {GPU: most(2)}, [100, 100, 100]),
        # Configured with weight 0 only: weightSum 0 as well.
        ({"cpu": "1", GPU: "1"}, {"cpu": least(0), GPU: most(0)}, [100, 100, 100]),
        # GPU alone, MostAllocated: n0 (4+2)*100/8 = 75, n1 25, n2 0 (cap 0).
        ({"cpu": "1", GPU: "2"}, {GPU: most(3)}, [75, 25, 0]),
        # GPU LeastAllocated: n0 (8-6)*100/8 = 25, n1 75, n2 0 (cap 0 scores 0, not 100).
        ({"cpu": "1", GPU: "2"}, {GPU: least(1)}, [25, 75, 0]),
        # More requested than allocatable: LeastAllocated 0, MostAllocated capped at 100.
        # cpu 1000 + 5000 > 4000 on n0 (and 5000 > 4000 elsewhere); memory 2000Mi + 1000Mi.
        ({"cpu": "5", "memory": "1000Mi"}, {"cpu": least(1), "memory": least(1)}, [35, 45, 45]),
        ({"cpu": "5", "memory": "1000Mi"}, {"cpu": most(1), "memory": most(1)}, [65, 55, 55]),
        # Integer division per resource, then on the weighted sum. n0: cpu (4000-2333)*100/4000 = 41
        # (41.675), memory 70: (4*41 + 70) / 5 = 46 (47 without the per-resource truncation).
        # n1 and n2: cpu 66 (66.675), memory 90: (4*66 + 90) / 5 = 70 (71 untruncated).
        ({"cpu": "1333m", "memory": "1000Mi"}, {"cpu": least(4), "memory": least(1)}, [46, 70, 70]),
    ],
)
def test_scores(
    snap: Snapshot,
    handle: FakeHandle,
    requests: dict[str, str],
    resources: dict[str, Any],
    expected: list[int],
) -> None:
    gpu_cluster(snap)
    plugin = plugin_of(handle, resources)
    pod = pod_info(make_pod("p", requests))
    assert scores(plugin, pod, snap) == expected
    # Without PreScore (a profile that enables it only at score) the result is the same.
    assert scores(plugin, pod_info(make_pod("q", requests)), snap, pre_score=False) == expected


def test_koordinator_gpu_most_allocated(snap: Snapshot, handle: FakeHandle) -> None:
    # koordinator.sh/gpu counts 100 per GPU; scalar resources read the node's plain requested sum.
    add_node(snap, make_node("a"), {"cpu": 8000, "memory": 1000 * MI, KGPU: 200, "pods": 110})
    add_node(snap, make_node("b"), {"cpu": 8000, "memory": 1000 * MI, KGPU: 400, "pods": 110})
    place(snap, "a", make_pod("running", {"cpu": "1", "memory": "100Mi", KGPU: "100"}))
    plugin = plugin_of(handle, {KGPU: most(2)})
    # a: (100 + 50) * 100 / 200 = 75; b: 50 * 100 / 400 = 12 (12.5).
    assert scores(plugin, pod_info(make_pod("p", {"cpu": "1", KGPU: "50"})), snap) == [75, 12]


def test_non_zero_defaults_on_node_and_pod(snap: Snapshot, handle: FakeHandle) -> None:
    add_node(snap, make_node("n"), {"cpu": 4000, "memory": 1000 * MI, "pods": 110})
    # A running pod without requests counts as 100m cpu and 200Mi memory on the node side.
    place(snap, "n", make_pod("running", {}))
    plugin = plugin_of(handle, {"cpu": least(1), "memory": least(1)})
    # cpu is requested (500m in one container) so it is scored, and the request-less second
    # container adds its 100m default: 100 + 600 = 700, (4000-700)*100/4000 = 82 (82.5).
    # memory is not requested at all (plain requests 0), so it is not scored despite the default.
    pod = pod_info(make_pod("p", containers=[container("a", {"cpu": "500m"}), container("b", {})]))
    assert scores(plugin, pod, snap) == [82]
    # Memory named explicitly: 200Mi (running) + 100Mi + 200Mi (default for container b) = 500Mi → 50.
    pod = pod_info(
        make_pod("q", containers=[container("a", {"cpu": "500m", "memory": "100Mi"}), container("b", {})])
    )
    assert scores(plugin, pod, snap) == [(82 + 50) // 2]
    # A pod requesting nothing scores 100: no requested resource is configured.
    assert scores(plugin, pod_info(make_pod("r", {})), snap) == [100]


def test_init_containers_and_sidecars_take_the_max(snap: Snapshot, handle: FakeHandle) -> None:
    add_node(snap, make_node("n"), {"cpu": 4000, "memory": 1000 * MI, "pods": 110})
    plugin = plugin_of(handle, {"cpu": least(1), "memory": least(1)})
    pod = pod_info(
        make_pod(
            "p",
            containers=[container("c", {"cpu": "500m", "memory": "100Mi"})],
            initContainers=[container("init", {"cpu": "2"})],
        )
    )
    # cpu: max(500, 2000) = 2000 → 50. memory: the init container names no memory, so it counts
    # as 200Mi, larger than the 100Mi of the containers: (1000-200)*100/1000 = 80. (50+80)/2 = 65.
    assert scores(plugin, pod, snap) == [65]
    # A restartable (sidecar) init container is max'd too, not added: cpu max(1000, 500) = 1000 → 75.
    sidecar = pod_info(
        make_pod(
            "s",
            containers=[container("c", {"cpu": "1"})],
            initContainers=[container("side", {"cpu": "500m"}, restart_policy="Always")],
        )
    )
    assert scores(plugin_of(handle, {"cpu": least(1)}), sidecar, snap) == [75]


def test_overhead_is_added_in_each_resource_unit(snap: Snapshot, handle: FakeHandle) -> None:
    add_node(snap, make_node("n"), {"cpu": 4000, "memory": 1000 * MI, "pods": 110})
    pod = pod_info(
        make_pod("p", {"cpu": "1", "memory": "100Mi"}, overhead={"cpu": "250m", "memory": "100Mi"})
    )
    # Memory: 100Mi + 100Mi overhead = 200Mi → 80.
    assert scores(plugin_of(handle, {"memory": least(1)}), pod, snap) == [80]
    # cpu overhead counts in millicores (Koordinator's Value() would add 1 for "250m", giving 74):
    # (4000 - 1250) * 100 / 4000 = 68.
    assert scores(plugin_of(handle, {"cpu": least(1)}), pod, snap) == [68]


def test_ephemeral_storage_uses_plain_requests(snap: Snapshot, handle: FakeHandle) -> None:
    add_node(snap, make_node("n"), {"cpu": 4000, "memory": 1000 * MI, "ephemeral-storage": 1000, "pods": 110})
    place(snap, "n", make_pod("running", {"ephemeral-storage": "200"}))
    plugin = plugin_of(handle, {"ephemeral-storage": most(1)})
    # (200 + 300) * 100 / 1000 = 50.
    assert scores(plugin, pod_info(make_pod("p", {"ephemeral-storage": "300"})), snap) == [50]
    # LeastAllocated: (1000 - 500) * 100 / 1000 = 50; with 600 more: (1000-800)*100/1000 = 20.
    assert scores(
        plugin_of(handle, {"ephemeral-storage": least(1)}),
        pod_info(make_pod("q", {"ephemeral-storage": "600"})),
        snap,
    ) == [20]


def test_scalar_no_node_has_yet(snap: Snapshot, handle: FakeHandle) -> None:
    """A requested resource with no snapshot column: cap 0 everywhere, its weight still counts."""
    add_node(snap, make_node("n"), {"cpu": 4000, "memory": 1000 * MI, "pods": 110})
    plugin = plugin_of(handle, {"cpu": least(1), "example.com/new": most(1)})
    pod = pod_info(make_pod("p", {"cpu": "1", "example.com/new": "1"}))
    assert snap.resources.get("example.com/new") is None
    # cpu 75, new 0: 75 / 2 = 37.
    assert scores(plugin, pod, snap) == [37]
    # A node offering it arrives: its column is created and read.
    add_node(snap, make_node("m"), {"cpu": 4000, "memory": 1000 * MI, "example.com/new": 4, "pods": 110})
    assert scores(plugin, pod, snap) == [37, (75 + 25) // 2]


def test_unchanged_rows_are_remembered_changed_ones_recomputed(snap: Snapshot, handle: FakeHandle) -> None:
    gpu_cluster(snap)
    plugin = plugin_of(handle, GPU_PACKING)
    for i in range(3):
        assert scores(
            plugin, pod_info(make_pod(f"p{i}", {"cpu": "1", "memory": "1000Mi", GPU: "2"})), snap
        ) == [
            67,
            53,
            41,
        ]
    # Another GPU pod lands on n1: cpu 2000 used → 50, memory 2000Mi → 80, gpu 4/8 → 50: (50+80+100)/4 = 57.
    place(snap, "n1", make_pod("more", {"cpu": "1", "memory": "1000Mi", GPU: "2"}))
    assert scores(plugin, pod_info(make_pod("p9", {"cpu": "1", "memory": "1000Mi", GPU: "2"})), snap) == [
        67,
        57,
        41,
    ]
    # Rows are scored in the order given, a subset included.
    state = CycleState()
    pod = pod_info(make_pod("sub", {"cpu": "1", "memory": "1000Mi", GPU: "2"}))
    assert plugin.score_batch(state, pod, np.array([2, 0], dtype=np.int64)).tolist() == [41, 67]


def test_requests_shared_by_equal_amounts_and_columns_follow_the_snapshot(
    snap: Snapshot, handle: FakeHandle
) -> None:
    add_node(snap, make_node("n"), {"cpu": 4000, "memory": 1000 * MI, "pods": 110})
    plugin = plugin_of(handle, {"cpu": least(1), "example.com/new": most(1)})
    a = plugin.request(pod_info(make_pod("a", {"cpu": "1", "example.com/new": "1"})))
    b = plugin.request(pod_info(make_pod("b", {"cpu": "1", "example.com/new": "1"})))
    c = plugin.request(pod_info(make_pod("c", {"cpu": "2", "example.com/new": "1"})))
    assert a is b
    assert c is not a and c.pod_req.tolist() == [2000, 1] and a.pod_req.tolist() == [1000, 1]
    # No column for the new resource yet, then the one a node brings.
    assert a.cols(snap).tolist() == [0, -1]
    add_node(snap, make_node("m"), {"cpu": 4000, "example.com/new": 4, "pods": 110})
    assert a.cols(snap).tolist() == [0, snap.resources.get("example.com/new")]


def test_amounts_remembered_per_resources_as_written(snap: Snapshot, handle: FakeHandle) -> None:
    """Pods differing only in overhead or in an init container are not answered from one another."""
    add_node(snap, make_node("n"), {"cpu": 4000, "memory": 1000 * MI, "pods": 110})
    plugin = plugin_of(handle, {"memory": least(1)})
    plain = {"cpu": "1", "memory": "100Mi"}
    # (1000 - 100) * 100 / 1000 = 90; with 100Mi overhead 80; with a 300Mi init container 70.
    assert scores(plugin, pod_info(make_pod("a", plain)), snap) == [90]
    assert scores(plugin, pod_info(make_pod("b", plain, overhead={"memory": "100Mi"})), snap) == [80]
    init = [container("init", {"memory": "300Mi"})]
    assert scores(plugin, pod_info(make_pod("c", plain, initContainers=init)), snap) == [70]
    assert scores(plugin, pod_info(make_pod("d", plain)), snap) == [90]


# --- args --------------------------------------------------------------------------------------


def test_args_decode_field_names() -> None:
    args = msgspec.convert(
        {
            "resources": {
                GPU: {"type": "MostAllocated", "weight": 2},
                "cpu": {"type": "LeastAllocated", "weight": 1},
            }
        },
        NodeResourcesFitPlusArgs,
    )
    assert args.resources == {
        GPU: ResourceTypeWeight(type="MostAllocated", weight=2),
        "cpu": ResourceTypeWeight(type="LeastAllocated", weight=1),
    }
    args.validate()
    # No default: an empty map, which scores 100 everywhere.
    assert NodeResourcesFitPlusArgs().resources == {}


@pytest.mark.parametrize(
    ("resources", "error"),
    [
        (
            {GPU: {"type": "MostRequested", "weight": 1}},
            'resources[nvidia.com/gpu].type: Unsupported value: "MostRequested": '
            'supported values: "MostAllocated", "LeastAllocated"',
        ),
        (
            {"cpu": {"weight": 1}},
            'resources[cpu].type: Unsupported value: "": supported values: "MostAllocated", "LeastAllocated"',
        ),
        (
            {"cpu": {"type": "LeastAllocated", "weight": -1}},
            "resources[cpu].weight: Invalid value: -1: must not be negative",
        ),
        (
            {"cpu": {"type": "LeastAllocated", "weight": 1 << 62}},
            "resources[cpu].weight: Invalid value: 4611686018427387904",
        ),
    ],
)
def test_args_validation(resources: dict[str, Any], error: str) -> None:
    args = msgspec.convert({"resources": resources}, NodeResourcesFitPlusArgs)
    with pytest.raises(ArgsError) as exc:
        args.validate()
    assert str(exc.value).startswith(error)


HEADER = "apiVersion: {version}\nkind: KubeSchedulerConfiguration\n"

PROFILE = """
profiles:
  - schedulerName: koord-scheduler
    plugins:
      preScore:
        enabled:
          - name: NodeResourcesFitPlus
      score:
        enabled:
          - name: NodeResourcesFitPlus
            weight: 2
    pluginConfig:
      - name: NodeResourcesFitPlus
        args:
          apiVersion: {version}
          kind: NodeResourcesFitPlusArgs
          resources:
{resources}
"""

GOOD_RESOURCES = """\
            nvidia.com/gpu: {type: MostAllocated, weight: 2}
            cpu: {type: LeastAllocated, weight: 1}
            memory: {type: LeastAllocated, weight: 1}"""


def load(version: str, resources: str) -> Any:
    text = HEADER.format(version=version) + textwrap.dedent(PROFILE).format(
        version=version, resources=resources
    )
    return load_config(text.encode(), in_tree_registry())


@pytest.mark.parametrize("version", ["kubescheduler.config.k8s.io/v1", "kubescheduler.config.k8s.io/v1beta3"])
def test_config_enables_plugin_with_args(version: str) -> None:
    cfg = load(version, GOOD_RESOURCES)
    profile = cfg.profiles[0]
    assert "NodeResourcesFitPlus" in profile.plugins_at("score")
    assert "NodeResourcesFitPlus" in profile.plugins_at("preScore")
    args = profile.args["NodeResourcesFitPlus"]
    assert isinstance(args, NodeResourcesFitPlusArgs)
    assert args.resources[GPU] == ResourceTypeWeight(type="MostAllocated", weight=2)
    assert args.resources["memory"] == ResourceTypeWeight(type="LeastAllocated", weight=1)


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        ("            nvidia.com/gpu: {type: Most, weight: 2}", "resources[nvidia.com/gpu].type"),
        ("            cpu: {type: LeastAllocated, weigth: 1}", "weigth"),
        ("            cpu: {type: LeastAllocated, weight: high}", "weight"),
    ],
)
def test_config_rejects_bad_args(resources: str, field: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load("kubescheduler.config.k8s.io/v1", resources)
    assert exc.value.where.startswith("profiles[0].pluginConfig[0].args")
    assert field in exc.value.detail
