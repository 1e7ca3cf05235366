"""GPUBalance through ``koordsched deschedule``: small and shared GPU pods leave partly used GPU
nodes so whole nodes are free, measured by the fragmentation report's stranded GPUs."""

from __future__ import annotations

import json
from pathlib import Path

from koordsched.backends.sim.deschedule import deschedule
from koordsched.backends.sim.fragmentation import Fragmentation
from tests.scenario.helpers import WriteYaml
from tests.scenario.test_fragmentation import _device, _docs, _koord_allocatable, _node, counts

ROOT = Path(__file__).resolve().parents[2]
ALLOCATED = "scheduling.koordinator.sh/device-allocated"
SHARE = {"koordinator.sh/gpu-core": 50, "koordinator.sh/gpu-memory-ratio": 50}
WHOLE = {"koordinator.sh/gpu-core": 100, "koordinator.sh/gpu-memory-ratio": 100}

CONFIG = """
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: koord-descheduler
  plugins:
    balance:
      enabled: [{{name: GPUBalance}}]
  pluginConfig:
  - name: GPUBalance
    args: {{{args}}}
  - name: MigrationController
    args: {{skipCheckExpectedReplicas: true{mc}}}
"""


def _bound(name: str, node: str, gpus: list[tuple[int, dict[str, int]]], owner: str = "rs") -> str:
    requests: dict[str, str] = {"cpu": "1", "memory": "1Gi"}
    for _, res in gpus:
        for k, v in res.items():
            requests[k] = str(int(requests.get(k, "0")) + v)
    allocated = json.dumps({"gpu": [{"minor": m, "resources": r} for m, r in gpus]})
    return f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  uid: uid-{name}
  annotations: {{{ALLOCATED}: {json.dumps(allocated)}}}
  ownerReferences:
  - {{apiVersion: apps/v1, kind: ReplicaSet, name: {owner}, uid: uid-{owner}, controller: true}}
spec:
  schedulerName: koord-scheduler
  nodeName: {node}
  containers: [{{name: c, resources: {{requests: {json.dumps(requests)}}}}}]
status: {{phase: Running}}
"""


def _cluster() -> list[str]:
    """g1: one GPU half shared (3 idle); g2: GPU 0 whole, GPU 1 half shared (2 idle); g3 idle.
    Each pod is its workload's only replica here, so the configs skip the expected-replicas rule."""
    docs = []
    for n in ("g1", "g2", "g3"):
        docs += [
            _node(n, {"nvidia.com/gpu": "4", **_koord_allocatable(4)}),
            _device(n, [(m, True) for m in range(4)]),
        ]
    docs += [
        _bound("s1", "g1", [(0, SHARE)], owner="svc-a"),
        _bound("w2", "g2", [(0, WHOLE)], owner="svc-b"),
        _bound("s2", "g2", [(1, SHARE)], owner="svc-c"),
    ]
    return docs


def test_a_shared_gpu_pod_leaves_its_node_whole(write_yaml: WriteYaml) -> None:
    cluster = write_yaml(_docs(*_cluster()))
    cfg = write_yaml(CONFIG.format(args="", mc=""), name="d.yaml")
    result = deschedule([cluster], config_path=cfg)
    (m,) = result.migrations
    assert (m.pod, m.node, m.target, m.phase, m.plugin) == (
        "default/s1",
        "g1",
        "g2",
        "Succeeded",
        "GPUBalance",
    )
    # ReservationFirst: the Reservation (restricted to the planned node) held the GPU share on g2
    # until the replacement took it.
    assert m.reservation is not None and (m.reservation.phase, m.reservation.node) == ("Succeeded", "g2")
    assert (
        m.reason
        == "GPU node g1 strands 3 idle GPU(s): moving its 1 GPU pod(s) onto partly used nodes frees it whole"
    )
    before, after = result.fragmentation.before, result.fragmentation.after
    assert (before.whole_free_nodes, before.partly_used_nodes, before.stranded_gpus) == (1, 2, 5)
    # g1 whole free again. The plan counted on g2's half-used GPU 1, and the default profile's
    # GPUFragmentation, which picks the GPU of a shared-GPU pod, put the share there: g2 keeps its
    # 2 idle GPUs whole. (DeviceShare alone, spec quirk 2, would take an idle one: see
    # test_a_shared_gpu_pod_takes_an_idle_gpu_without_gpufragmentation.)
    assert counts(after) == Fragmentation(
        gpu_nodes=3,
        gpus=12,
        idle_gpus=10,
        whole_free_nodes=2,
        partly_used_nodes=1,
        stranded_gpus=2,
        partly_used_gpus=0,
    )
    assert after.gpus == before.gpus == 12


def test_a_shared_gpu_pod_takes_an_idle_gpu_without_gpufragmentation(write_yaml: WriteYaml) -> None:
    """The same migration under Koordinator's chart profile (no GPUFragmentation): DeviceShare
    picks the GPU by its own scorer (spec quirk 2) and takes an idle one on g2."""
    cluster = write_yaml(_docs(*_cluster()))
    cfg = write_yaml(CONFIG.format(args="", mc=""), name="d.yaml")
    chart = ROOT / "examples" / "profiles" / "koordinator-chart.yaml"
    result = deschedule([cluster], config_path=cfg, scheduler_config_path=chart)
    (m,) = result.migrations
    assert (m.pod, m.node, m.target, m.phase) == ("default/s1", "g1", "g2", "Succeeded")
    after = result.fragmentation.after
    assert (after.idle_gpus, after.stranded_gpus, after.partly_used_gpus) == (9, 1, 2)


def test_dry_run_and_limits(write_yaml: WriteYaml) -> None:
    cluster = write_yaml(_docs(*_cluster()))
    dry = deschedule(
        [cluster], config_path=write_yaml(CONFIG.format(args="dryRun: true", mc=""), name="d.yaml")
    )
    assert dry.migrations == []
    assert [(d[1], d[2], d[3]) for d in dry.dry_run_decisions] == [("GPUBalance", "default/s1", "g1")]
    assert dry.fragmentation.after == dry.fragmentation.before
    # A pod of a kind the MigrationController refuses (here: its namespace) keeps the node as it is.
    cfg = CONFIG.format(args="", mc=", namespaces: {exclude: [default]}")
    kept = deschedule([cluster], config_path=write_yaml(cfg, name="d2.yaml"))
    assert kept.migrations == [] and kept.dry_run_decisions == []


def test_no_move_that_does_not_lower_stranded_gpus(write_yaml: WriteYaml) -> None:
    """A whole GPU on g1 cannot fit in g2's half-used GPU, and whole free g3 is never a
    destination: nothing moves."""
    docs = []
    for n in ("g1", "g2", "g3"):
        docs += [
            _node(n, {"nvidia.com/gpu": "2", **_koord_allocatable(2)}),
            _device(n, [(0, True), (1, True)]),
        ]
    docs += [
        _bound("w1", "g1", [(0, WHOLE)], owner="a"),
        _bound("w2", "g2", [(0, WHOLE)], owner="b"),
        _bound("s2", "g2", [(1, SHARE)], owner="c"),
    ]
    result = deschedule(
        [write_yaml(_docs(*docs))], config_path=write_yaml(CONFIG.format(args="", mc=""), name="d.yaml")
    )
    assert result.migrations == []


def test_gpu_fragmentation_example_with_the_chart_profile() -> None:
    """The figure in the README: the chart's scoring spreads the small GPU pods over all six GPU
    nodes (20 stranded GPUs, the three 8-GPU pods pending); one GPUBalance round empties two of
    them, and two of the 8-GPU pods then run there."""
    result = deschedule(
        [ROOT / "examples" / "gpu-fragmentation.yaml"],
        config_path=ROOT / "examples" / "profiles" / "gpu-balance-descheduler.yaml",
        scheduler_config_path=ROOT / "examples" / "profiles" / "koordinator-chart.yaml",
    )
    assert counts(result.fragmentation.before) == Fragmentation(
        gpu_nodes=6, gpus=48, idle_gpus=20, partly_used_nodes=6, stranded_gpus=20
    )
    assert result.fragmentation.after.stranded_gpus == 4
    assert sorted(p for p, _ in result.placed_after) == ["training/train-8gpu-0", "training/train-8gpu-1"]
    assert all(m.phase == "Succeeded" and m.target not in ("gpu-1", "gpu-3") for m in result.migrations)
    assert {m.node for m in result.migrations} == {"gpu-1", "gpu-3"}
