"""GPUFragmentation through ``simulate``: the default profile keeps whole GPUs and the cores large
GPU pods need, where Koordinator's chart profile (no GPUFragmentation) spreads and strands them.

Pods are created in the order they are listed (creationTimestamp), so the queue takes them so.
"""

from __future__ import annotations

import json
from pathlib import Path

from koordsched.backends.sim.runner import SCHEDULED, SimResult, simulate
from tests.scenario.helpers import WriteYaml
from tests.scenario.test_fragmentation import (
    _device,
    _docs,
    _koord_allocatable,
    _node,
    _npu_allocatable,
    _npu_device,
)

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "examples" / "profiles" / "koordinator-chart.yaml"
SHARE = {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"}


def _pending(index: int, name: str, requests: dict[str, str]) -> str:
    reqs = {"memory": "1Gi", **requests}
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, creationTimestamp: "2026-01-01T00:00:{index:02d}Z"}}
spec:
  schedulerName: koord-scheduler
  containers: [{{name: c, image: busybox, resources: {{requests: {json.dumps(reqs)}}}}}]
"""


def _gpu_nodes(n: int, gpus: int, cpu: str) -> list[str]:
    docs = []
    for i in range(n):
        name = f"gpu-{i}"
        docs += [
            _node(name, {"nvidia.com/gpu": str(gpus), **_koord_allocatable(gpus)}, cpu=cpu, memory="512Gi"),
            _device(name, [(m, True) for m in range(gpus)]),
        ]
    return docs


def _run(write_yaml: WriteYaml, docs: list[str], config: Path | None = None) -> SimResult:
    return simulate([write_yaml(_docs(*docs))], config_path=config)


def _nodes(result: SimResult) -> dict[str, str | None]:
    return {p.name: (p.node if p.status == SCHEDULED else None) for p in result.pods}


def test_shared_pods_fill_one_gpu_and_the_four_gpu_pod_finds_a_whole_node(write_yaml: WriteYaml) -> None:
    docs = [
        *_gpu_nodes(2, 4, "32"),
        _pending(1, "share-1", {"cpu": "1", **SHARE}),
        _pending(2, "share-2", {"cpu": "1", **SHARE}),
        _pending(3, "train-4", {"cpu": "8", "nvidia.com/gpu": "4"}),
    ]
    ours = _nodes(_run(write_yaml, docs))
    assert ours["share-1"] == ours["share-2"]
    assert ours["train-4"] is not None and ours["train-4"] != ours["share-1"]
    result = _run(write_yaml, docs)
    shared = [p for p in result.pods if p.name.startswith("share-")]
    allocated = [json.loads(p.annotations["scheduling.koordinator.sh/device-allocated"]) for p in shared]
    gpus = {a["gpu"][0]["minor"] for a in allocated}
    assert len(gpus) == 1  # both halves on one GPU
    # Koordinator's chart profile spreads the halves over both nodes: the 4-GPU pod fits nowhere.
    chart = _nodes(_run(write_yaml, docs, CHART))
    assert chart["share-1"] != chart["share-2"]
    assert chart["train-4"] is None


def test_ascend_npus_full_npu_pods_share_a_node_and_the_two_npu_pod_finds_a_whole_one(
    write_yaml: WriteYaml,
) -> None:
    """NPUs count in the measure (AI cores as a card's share): two 1-NPU pods go to one node, so
    the 2-NPU pod (npu-core 40 + ratio 200) has the other; the chart profile spreads them."""
    docs: list[str] = []
    for i in range(2):
        docs += [_node(f"ascend-{i}", _npu_allocatable(2), cpu="32"), _npu_device(f"ascend-{i}", 2)]
    one = {"huawei.com/npu-core": "20", "koordinator.sh/gpu-memory-ratio": "100"}
    docs += [
        _pending(1, "npu-1", {"cpu": "1", **one}),
        _pending(2, "npu-2", {"cpu": "1", **one}),
        _pending(
            3, "train-2", {"cpu": "8", "huawei.com/npu-core": "40", "koordinator.sh/gpu-memory-ratio": "200"}
        ),
    ]
    ours = _nodes(_run(write_yaml, docs))
    assert ours["npu-1"] == ours["npu-2"] is not None
    assert ours["train-2"] is not None and ours["train-2"] != ours["npu-1"]
    chart = _nodes(_run(write_yaml, docs, CHART))
    assert chart["npu-1"] != chart["npu-2"]
    assert chart["train-2"] is None


def test_small_cpu_pods_leave_the_cores_of_an_eight_gpu_pod(write_yaml: WriteYaml) -> None:
    """Two 8-GPU nodes of 64 cores; six 2-core pods, then an 8-GPU pod asking for 60 cores. The
    measure lets the small pods go anywhere while both nodes keep 60 cores, never past that on
    both: one node keeps the cores the 8-GPU pod needs."""
    docs = [*_gpu_nodes(2, 8, "64")]
    docs += [_pending(i, f"web-{i}", {"cpu": "2"}) for i in range(1, 7)]
    docs.append(_pending(7, "train-8", {"cpu": "60", "nvidia.com/gpu": "8"}))
    ours = _nodes(_run(write_yaml, docs))
    assert ours["train-8"] is not None
    assert sum(ours[f"web-{i}"] == ours["train-8"] for i in range(1, 7)) <= 2
    chart = _nodes(_run(write_yaml, docs, CHART))
    assert len({chart[f"web-{i}"] for i in range(1, 7)}) == 2
    assert chart["train-8"] is None


def test_the_fragmentation_report_and_explain(write_yaml: WriteYaml) -> None:
    docs = [
        *_gpu_nodes(2, 4, "32"),
        _pending(1, "share-1", {"cpu": "1", **SHARE}),
        _pending(2, "train-4", {"cpu": "8", "nvidia.com/gpu": "4"}),
    ]
    result = simulate([write_yaml(_docs(*docs))], explain=True)
    frag = result.summary.fragmentation
    # Before: 8 idle GPUs; the mix (half a GPU, 4 GPUs) can use all of them: nothing fragmented
    # for the 4-GPU shape, and 8 GPUs for nothing... the measure over the two shapes, halves.
    assert frag.before.expected_fragmented_gpus == 0.0
    # After: gpu-0 (say) holds the half and 3.5 free GPUs no 4-GPU pod can use; gpu-1 is full.
    assert frag.after.expected_fragmented_gpus == 3.5 / 2
    (top, *_) = result.pod("default/share-1").explain
    entry = top["scores"]["GPUFragmentation"]
    assert set(entry) == {
        "raw",
        "normalized",
        "weight",
        "weighted",
        "fragmentationBefore",
        "fragmentationAfter",
    }
    assert entry["fragmentationBefore"] == 0.0
    assert entry["fragmentationAfter"] == 1.75


FIXED = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  plugins:
    preScore:
      enabled: [{name: GPUFragmentation}]
    score:
      enabled: [{name: GPUFragmentation, weight: 10}]
  pluginConfig:
  - name: GPUFragmentation
    args:
      workloadMix:
      - {requests: {cpu: "8", nvidia.com/gpu: "4"}, weight: 1}
"""


def test_a_fixed_mix_from_the_profile(write_yaml: WriteYaml) -> None:
    """A pod of one 4-GPU shape (in the fixed mix) with pending 1-GPU pods not in it: the 1-GPU
    pods all go to one node, so the other stays whole for the 4-GPU shape."""
    docs = [*_gpu_nodes(2, 4, "32")]
    docs += [_pending(i, f"one-{i}", {"cpu": "1", "nvidia.com/gpu": "1"}) for i in range(1, 4)]
    config = write_yaml(FIXED, name="fixed.yaml")
    ours = _nodes(_run(write_yaml, docs, config))
    assert len({ours[f"one-{i}"] for i in range(1, 4)}) == 1
