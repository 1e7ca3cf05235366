"""ScarceResourceAvoidance: exact scores from the spec's formula (section 4.8), args and config loading."""

from __future__ import annotations

import textwrap
from typing import Any

import numpy as np
import pytest

from koordsched.config import ConfigError, load_config
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import Snapshot
from koordsched.plugins.registry import in_tree_registry
from koordsched.plugins.scarceresourceavoidance import ScarceResourceAvoidance, ScarceResourceAvoidanceArgs
from koordsched.plugins.scarceresourceavoidance import offers as offers_module
from koordsched.plugins.scarceresourceavoidance.offers import NodeOffers
from tests.builders import make_node, make_pod, pod_info
from tests.fakes import FakeHandle
from tests.plugins.conftest import add_node, all_rows, place

MI = 1024**2
GPU = "nvidia.com/gpu"
RDMA = "koordinator.sh/rdma"

#: name -> allocatable ("pods" is never a resource name).
NODES: dict[str, dict[str, int]] = {
    "gpu": {"cpu": 8000, "memory": 1000 * MI, GPU: 8, "pods": 110},
    "cpu": {"cpu": 8000, "memory": 1000 * MI, "pods": 110},
    "gpu-rdma": {"cpu": 8000, "memory": 1000 * MI, GPU: 8, RDMA: 1, "pods": 110},
    # What kubelets report: ephemeral-storage too, which a pod rarely requests.
    "gpu-disk": {"cpu": 8000, "memory": 1000 * MI, "ephemeral-storage": 100 * MI, GPU: 8, "pods": 110},
    "bare": {"pods": 110},
}


def plugin_of(handle: FakeHandle, resources: list[str]) -> ScarceResourceAvoidance:
    return ScarceResourceAvoidance(ScarceResourceAvoidanceArgs(resources=resources), handle)


def scores(
    plugin: ScarceResourceAvoidance, pod: Any, snap: Snapshot, *, pre_score: bool = True
) -> dict[str, int]:
    state = CycleState()
    rows = all_rows(snap)
    if pre_score:
        assert plugin.pre_score(state, pod, rows).ok
    out = plugin.score_batch(state, pod, rows)
    assert out.dtype == np.int64 and out.shape == (len(rows),)
    return {info.name: int(s) for info, s in zip(snap.infos, out.tolist(), strict=True)}


@pytest.fixture
def cluster(snap: Snapshot) -> Snapshot:
    for name, alloc in NODES.items():
        add_node(snap, make_node(name), alloc)
    return snap


@pytest.mark.parametrize(
    ("scarce", "requests", "expected"),
    [
        # A CPU pod. gpu: diff {gpu}, scarce {gpu}: (1-1)*100/1 = 0. cpu: diff empty: 100.
        # gpu-rdma: diff {gpu, rdma}, scarce {gpu}: 1*100/2 = 50. gpu-disk: diff {ephemeral-storage, gpu}: 50.
        # bare: nothing allocatable, diff empty: 100.
        (
            [GPU],
            {"cpu": "1", "memory": "1Gi"},
            {"gpu": 0, "cpu": 100, "gpu-rdma": 50, "gpu-disk": 50, "bare": 100},
        ),
        # A GPU pod: the GPU is not in diff, so scarce is empty everywhere: 100.
        ([GPU], {"cpu": "1", "memory": "1Gi", GPU: "1"}, dict.fromkeys(NODES, 100)),
        # Both scarce. gpu-rdma: diff {gpu, rdma}, both scarce: 0.
        (
            [GPU, RDMA],
            {"cpu": "1", "memory": "1Gi"},
            {"gpu": 0, "cpu": 100, "gpu-rdma": 0, "gpu-disk": 50, "bare": 100},
        ),
        # The GPU pod on gpu-rdma: diff {rdma}, scarce {rdma}: 0.
        (
            [GPU, RDMA],
            {"cpu": "1", "memory": "1Gi", GPU: "1"},
            {"gpu": 100, "cpu": 100, "gpu-rdma": 0, "gpu-disk": 100, "bare": 100},
        ),
        # Only cpu requested: memory joins diff. gpu: diff {memory, gpu}: 50; gpu-rdma: diff {memory,
        # gpu, rdma}, scarce 2: 1*100/3 = 33; gpu-disk: diff {memory, ephemeral-storage, gpu}: 2*100/3 = 66.
        (
            [GPU, RDMA],
            {"cpu": "1"},
            {"gpu": 50, "cpu": 100, "gpu-rdma": 33, "gpu-disk": 66, "bare": 100},
        ),
        # A pod requesting nothing: gpu: diff {cpu, memory, gpu}: 2*100/3 = 66; gpu-disk: 3*100/4 = 75.
        ([GPU], {}, {"gpu": 66, "cpu": 100, "gpu-rdma": 75, "gpu-disk": 75, "bare": 100}),
        # No scarce resources configured: 100 everywhere.
        ([], {"cpu": "1"}, dict.fromkeys(NODES, 100)),
        # A scarce name no node offers: 100 everywhere.
        (["example.com/none"], {"cpu": "1"}, dict.fromkeys(NODES, 100)),
    ],
)
def test_scores(
    cluster: Snapshot,
    handle: FakeHandle,
    scarce: list[str],
    requests: dict[str, str],
    expected: dict[str, int],
) -> None:
    plugin = plugin_of(handle, scarce)
    assert scores(plugin, pod_info(make_pod("p", requests)), cluster) == expected
    assert scores(plugin, pod_info(make_pod("q", requests)), cluster, pre_score=False) == expected


def test_columns_only_pods_asked_for_are_not_node_resources(cluster: Snapshot, handle: FakeHandle) -> None:
    """A pod that asked for a resource creates a column with allocatable 0 on every node."""
    place(cluster, "cpu", make_pod("odd", {"cpu": "1", "example.com/foo": "1"}))
    assert cluster.resources.get("example.com/foo") is not None
    plugin = plugin_of(handle, [GPU, "example.com/foo"])
    got = scores(plugin, pod_info(make_pod("p", {"cpu": "1", "memory": "1Gi"})), cluster)
    assert got == {"gpu": 0, "cpu": 100, "gpu-rdma": 50, "gpu-disk": 50, "bare": 100}


def test_untracked_names_do_not_count(snap: Snapshot, handle: FakeHandle) -> None:
    """Only cpu, memory, ephemeral-storage and scalar resources are node resource names: "foo"
    (native, unprefixed) is not, "kubernetes.io/batch-cpu" (prefixed native) is."""
    add_node(snap, make_node("a"), {"cpu": 1000, "memory": 1000, "foo": 1, "pods": 110})
    add_node(snap, make_node("b"), {"cpu": 1000, "memory": 1000, "kubernetes.io/batch-cpu": 1, "pods": 110})
    plugin = plugin_of(handle, ["foo", "kubernetes.io/batch-cpu"])
    assert scores(plugin, pod_info(make_pod("p", {"cpu": "1", "memory": "1"})), snap) == {"a": 100, "b": 0}


def test_scarce_resource_arriving_later(snap: Snapshot, handle: FakeHandle) -> None:
    """The plugin is built before any node offers the scarce resource (no column yet)."""
    add_node(snap, make_node("cpu"), NODES["cpu"])
    plugin = plugin_of(handle, [GPU])
    pod = {"cpu": "1", "memory": "1Gi"}
    assert snap.resources.get(GPU) is None
    for i in range(3):
        assert scores(plugin, pod_info(make_pod(f"p{i}", pod)), snap) == {"cpu": 100}
    add_node(snap, make_node("gpu"), NODES["gpu"])
    for i in range(3):
        assert scores(plugin, pod_info(make_pod(f"q{i}", pod)), snap) == {"cpu": 100, "gpu": 0}
    # The node changes: its GPUs go away, and the remembered score with them.
    snap.update_node(make_node("gpu"), NODES["cpu"])
    assert scores(plugin, pod_info(make_pod("r", pod)), snap) == {"cpu": 100, "gpu": 100}


def test_rows_subset_in_given_order(cluster: Snapshot, handle: FakeHandle) -> None:
    plugin = plugin_of(handle, [GPU])
    pod = pod_info(make_pod("p", {"cpu": "1", "memory": "1Gi"}))
    got = plugin.score_batch(CycleState(), pod, np.array([2, 0, 1], dtype=np.int64))
    assert got.tolist() == [50, 0, 100]


def test_node_removal_moves_the_last_row(cluster: Snapshot, handle: FakeHandle) -> None:
    """Removing row 0 moves the last node (bare) there: its offers move with it."""
    plugin = plugin_of(handle, [GPU])
    pod = {"cpu": "1", "memory": "1Gi"}
    assert scores(plugin, pod_info(make_pod("p", pod)), cluster)["gpu"] == 0
    cluster.remove_node("gpu")
    assert [i.name for i in cluster.infos] == ["bare", "cpu", "gpu-rdma", "gpu-disk"]
    got = scores(plugin, pod_info(make_pod("q", pod)), cluster)
    assert got == {"bare": 100, "cpu": 100, "gpu-rdma": 50, "gpu-disk": 50}


def test_all_nodes_alike(snap: Snapshot, handle: FakeHandle) -> None:
    """Every node offers the same: one score for all (0 for a CPU pod, 100 for a GPU pod)."""
    for i in range(3):
        add_node(snap, make_node(f"g{i}"), NODES["gpu"])
    plugin = plugin_of(handle, [GPU])
    assert set(scores(plugin, pod_info(make_pod("p", {"cpu": "1", "memory": "1Gi"})), snap).values()) == {0}
    gpu_pod = pod_info(make_pod("q", {"cpu": "1", "memory": "1Gi", GPU: "1"}))
    assert set(scores(plugin, gpu_pod, snap).values()) == {100}


def test_offer_sets_renumbered_when_many(
    snap: Snapshot, handle: FakeHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the bound on distinct offered sets, ids are worked out afresh from the rows; scores
    remembered per id are then recomputed."""
    monkeypatch.setattr(offers_module, "MAX_SETS", 2)
    plugin = plugin_of(handle, [GPU, RDMA])
    cpu_pod = {"cpu": "1"}
    add_node(snap, make_node("a"), {"cpu": 1000, "pods": 110})
    add_node(snap, make_node("b"), {"cpu": 1000, GPU: 1, "pods": 110})
    # a offers nothing the pod does not request: 100; b offers a GPU: 0.
    assert scores(plugin, pod_info(make_pod("p", cpu_pod)), snap) == {"a": 100, "b": 0}
    offers = NodeOffers.of(snap)
    assert offers.epoch == 0
    # c: {memory, rdma}, one scarce of two: 50.
    add_node(snap, make_node("c"), {"cpu": 1000, "memory": 1000, RDMA: 1, "pods": 110})
    assert offers.epoch == 1
    assert scores(plugin, pod_info(make_pod("q", cpu_pod)), snap) == {"a": 100, "b": 0, "c": 50}
    snap.remove_node("b")
    add_node(snap, make_node("d"), {"cpu": 1000, "memory": 1000, "pods": 110})
    assert scores(plugin, pod_info(make_pod("r", cpu_pod)), snap) == {"a": 100, "c": 50, "d": 100}


# --- args and config -----------------------------------------------------------------------------


def test_default_args_have_no_resources() -> None:
    assert ScarceResourceAvoidanceArgs().resources == []


CONFIG = """
apiVersion: {version}
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: koord-scheduler
    plugins:
      preScore:
        enabled:
          - name: ScarceResourceAvoidance
      score:
        enabled:
          - name: ScarceResourceAvoidance
            weight: 2
    pluginConfig:
      - name: ScarceResourceAvoidance
        args:
          apiVersion: {version}
          kind: ScarceResourceAvoidanceArgs
{args}
"""


def load(version: str, args: str) -> Any:
    text = textwrap.dedent(CONFIG).format(version=version, args=args)
    return load_config(text.encode(), in_tree_registry())


@pytest.mark.parametrize("version", ["kubescheduler.config.k8s.io/v1", "kubescheduler.config.k8s.io/v1beta3"])
def test_config_enables_plugin_with_args(version: str) -> None:
    cfg = load(version, "          resources: [nvidia.com/gpu, koordinator.sh/rdma]")
    profile = cfg.profiles[0]
    assert "ScarceResourceAvoidance" in profile.plugins_at("score")
    assert "ScarceResourceAvoidance" in profile.plugins_at("preScore")
    args = profile.args["ScarceResourceAvoidance"]
    assert isinstance(args, ScarceResourceAvoidanceArgs)
    assert args.resources == [GPU, RDMA]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ("          resource: [nvidia.com/gpu]", "`resource`"),
        ("          resources: nvidia.com/gpu", "$.resources"),
        ("          resources: [{name: nvidia.com/gpu}]", "$.resources[0]"),
    ],
)
def test_config_rejects_bad_args(args: str, field: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load("kubescheduler.config.k8s.io/v1", args)
    assert exc.value.where.startswith("profiles[0].pluginConfig[0].args")
    assert field in exc.value.detail


def test_constant_score_follows_the_nodes(snap: Snapshot, handle: FakeHandle) -> None:
    """constant_score (ConstantScorePlugin) is the score of every node when all score alike, and None
    from the moment one node scores differently (a GPU node joins), and again once it does not."""
    add_node(snap, make_node("cpu"), NODES["cpu"])
    plugin = plugin_of(handle, [GPU])
    cpu_pod = pod_info(make_pod("p", {"cpu": "1", "memory": "1Gi"}))
    gpu_pod = pod_info(make_pod("g", {"cpu": "1", "memory": "1Gi", GPU: "1"}))
    for p in (cpu_pod, gpu_pod):
        assert plugin.constant_score(CycleState(), p) == 100
    add_node(snap, make_node("gpu"), NODES["gpu"])
    assert plugin.constant_score(CycleState(), cpu_pod) is None  # 100 on "cpu", 0 on "gpu"
    assert plugin.constant_score(CycleState(), gpu_pod) == 100
    snap.update_node(make_node("gpu"), NODES["cpu"])
    # Both nodes offer the same now; an offered set seen before keeps its id, so the table still
    # lists the GPU set: None is the safe answer (Score runs), never a wrong constant.
    assert plugin.constant_score(CycleState(), cpu_pod) in (None, 100)
    assert scores(plugin, cpu_pod, snap) == {"cpu": 100, "gpu": 100}


def test_constant_score_agrees_with_score_batch(cluster: Snapshot, handle: FakeHandle) -> None:
    for requests in ({"cpu": "1"}, {"cpu": "1", GPU: "1"}, {"cpu": "1", GPU: "1", RDMA: "1"}):
        plugin = plugin_of(handle, [GPU, RDMA])
        p = pod_info(make_pod("p", requests))
        got = set(scores(plugin, p, cluster).values())
        constant = plugin.constant_score(CycleState(), p)
        assert (constant is not None) == (len(got) == 1)
        if constant is not None:
            assert got == {constant}
