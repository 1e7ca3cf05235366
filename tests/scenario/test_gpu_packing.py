"""GPU packing with NodeResourcesFitPlus and ScarceResourceAvoidance, through ``simulate``.

Koordinator's chart profile (examples/profiles/koordinator-chart.yaml) scores cpu and memory
LeastAllocated, so GPU pods spread onto the idle GPU node and CPU pods go to the big, empty GPU
nodes. koordsched's default profile adds the two Koordinator plugins (GPUs MostAllocated, GPU
nodes scarce): GPU pods pack onto the GPU node already in use and CPU pods stay on the CPU
node, leaving a whole GPU node free.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from koordsched.backends.sim.runner import SCHEDULED, simulate
from tests.builders import pod_manifest, yaml_docs
from tests.scenario.helpers import WriteYaml

GPU_NODE = """
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{kubernetes.io/hostname: {name}}}
status:
  allocatable: {{cpu: "64", memory: 256Gi, pods: "110", nvidia.com/gpu: "8"}}
"""

CPU_NODE = """
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{kubernetes.io/hostname: {name}}}
status:
  allocatable: {{cpu: "8", memory: 32Gi, pods: "110"}}
"""


def _pod(name: str, cpu: str, memory: str, *, gpu: int = 0, node: str = "") -> dict[str, Any]:
    gpus = {"nvidia.com/gpu": gpu} if gpu else None
    return pod_manifest(name, cpu, memory, uid="", node_name=node, image="busybox", requests=gpus)


def _docs(*docs: dict[str, Any] | str) -> str:
    return yaml_docs(*(d if isinstance(d, dict) else d.strip("\n") for d in docs))


CLUSTER = _docs(
    GPU_NODE.format(name="gpu-busy"),
    GPU_NODE.format(name="gpu-idle"),
    CPU_NODE.format(name="cpu-1"),
    # Already running: half of gpu-busy's GPUs.
    _pod("running", "8", "32Gi", gpu=4, node="gpu-busy"),
    _pod("train-1", "4", "16Gi", gpu=2),
    _pod("train-2", "4", "16Gi", gpu=2),
    _pod("web-1", "2", "4Gi"),
    _pod("web-2", "2", "4Gi"),
)

PENDING = ("train-1", "train-2", "web-1", "web-2")


CHART_PROFILE = Path(__file__).resolve().parents[2] / "examples" / "profiles" / "koordinator-chart.yaml"


def _placements(result: Any) -> dict[str, str | None]:
    out = {}
    for name in PENDING:
        placed = result.pod(f"default/{name}")
        assert placed.status == SCHEDULED, (name, placed.message)
        out[name] = placed.node
    return out


def test_default_profile_packs_gpu_pods_and_keeps_cpu_pods_off_gpu_nodes(write_yaml: WriteYaml) -> None:
    path = write_yaml(CLUSTER)
    result = simulate([path])
    # train-1 on gpu-busy: FitPlus (81 + 81 + 4*75) / 6 = 77 against gpu-idle's (93 + 93 + 4*25) / 6 = 47.
    # web-1: ScarceResourceAvoidance gives the GPU nodes 0 (diff {nvidia.com/gpu}, all scarce), cpu-1 100.
    assert _placements(result) == {
        "train-1": "gpu-busy",
        "train-2": "gpu-busy",
        "web-1": "cpu-1",
        "web-2": "cpu-1",
    }


def test_chart_profile_spreads(write_yaml: WriteYaml) -> None:
    path = write_yaml(CLUSTER)
    placements = _placements(simulate([path], config_path=CHART_PROFILE))
    # LeastAllocated cpu/memory: the idle GPU node scores higher for both GPU pods, and the
    # large GPU nodes beat the small CPU node for the CPU pods.
    assert placements["train-1"] == "gpu-idle"
    assert placements["train-2"] == "gpu-idle"
    assert placements["web-1"] in ("gpu-busy", "gpu-idle")
    assert placements["web-2"] in ("gpu-busy", "gpu-idle")


FRAGMENTATION_EXAMPLE = CHART_PROFILE.parents[1] / "gpu-fragmentation.yaml"


def test_fragmentation_example_shows_the_difference() -> None:
    packed = simulate([FRAGMENTATION_EXAMPLE]).summary
    spread = simulate([FRAGMENTATION_EXAMPLE], config_path=CHART_PROFILE).summary
    # 28 GPUs of small pods, then three 8-GPU pods; 48 GPUs in all, so at most two of those fit.
    assert (packed.scheduled, packed.pods) == (31, 32)
    assert (spread.scheduled, spread.pods) == (29, 32)
    assert packed.fragmentation.before.whole_free_nodes == spread.fragmentation.before.whole_free_nodes == 6
    assert packed.fragmentation.after.stranded_gpus == 4
    assert spread.fragmentation.after.stranded_gpus == 20
    assert spread.fragmentation.after.partly_used_nodes == 6
