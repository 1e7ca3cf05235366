"""GPU packing with NodeResourcesFitPlus and ScarceResourceAvoidance, through ``simulate``.

The default profile scores cpu and memory LeastAllocated, so GPU pods spread onto the idle
GPU node and CPU pods go to the big, empty GPU nodes. Adding the two Koordinator plugins
(GPUs MostAllocated, GPU nodes scarce) packs GPU pods onto the GPU node already in use and
keeps CPU pods on the CPU node, leaving a whole GPU node free.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from koordsched.backends.sim.runner import SCHEDULED, simulate
from koordsched.profiles import default_profile_path
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


def _pod(name: str, cpu: str, memory: str, *, gpu: int = 0, node: str = "") -> str:
    gpus = f", nvidia.com/gpu: {gpu}" if gpu else ""
    node_name = f"\n  nodeName: {node}" if node else ""
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  schedulerName: koord-scheduler{node_name}
  containers:
  - name: c
    image: busybox
    resources: {{requests: {{cpu: "{cpu}", memory: {memory}{gpus}}}}}
"""


def _docs(*docs: str) -> str:
    return "\n---\n".join(d.strip("\n") for d in docs) + "\n"


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


def packing_profile(path: Path) -> Path:
    """The default profile plus the two plugins, as Koordinator's docs configure them."""
    config: dict[str, Any] = yaml.safe_load(default_profile_path().read_text())
    profile = config["profiles"][0]
    profile.setdefault("pluginConfig", []).extend(
        [
            {
                "name": "NodeResourcesFitPlus",
                "args": {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "NodeResourcesFitPlusArgs",
                    "resources": {
                        "nvidia.com/gpu": {"type": "MostAllocated", "weight": 2},
                        "cpu": {"type": "LeastAllocated", "weight": 1},
                        "memory": {"type": "LeastAllocated", "weight": 1},
                    },
                },
            },
            {
                "name": "ScarceResourceAvoidance",
                "args": {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "ScarceResourceAvoidanceArgs",
                    "resources": ["nvidia.com/gpu"],
                },
            },
        ]
    )
    plugins = profile.setdefault("plugins", {})
    plugins.setdefault("preScore", {}).setdefault("enabled", []).extend(
        [{"name": "NodeResourcesFitPlus"}, {"name": "ScarceResourceAvoidance"}]
    )
    plugins.setdefault("score", {}).setdefault("enabled", []).extend(
        [{"name": "NodeResourcesFitPlus", "weight": 2}, {"name": "ScarceResourceAvoidance", "weight": 2}]
    )
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _placements(result: Any) -> dict[str, str | None]:
    out = {}
    for name in PENDING:
        placed = result.pod(f"default/{name}")
        assert placed.status == SCHEDULED, (name, placed.message)
        out[name] = placed.node
    return out


def test_plugins_pack_gpu_pods_and_keep_cpu_pods_off_gpu_nodes(write_yaml: WriteYaml, tmp_path: Path) -> None:
    path = write_yaml(CLUSTER)
    result = simulate([path], config_path=packing_profile(tmp_path / "profile.yaml"))
    # train-1 on gpu-busy: FitPlus (81 + 81 + 2*75) / 4 = 78 against gpu-idle's (93 + 93 + 2*25) / 4 = 59.
    # web-1: ScarceResourceAvoidance gives the GPU nodes 0 (diff {nvidia.com/gpu}, all scarce), cpu-1 100.
    assert _placements(result) == {
        "train-1": "gpu-busy",
        "train-2": "gpu-busy",
        "web-1": "cpu-1",
        "web-2": "cpu-1",
    }


def test_default_profile_spreads(write_yaml: WriteYaml) -> None:
    path = write_yaml(CLUSTER)
    placements = _placements(simulate([path]))
    # LeastAllocated cpu/memory: the idle GPU node scores higher for both GPU pods, and the
    # large GPU nodes beat the small CPU node for the CPU pods.
    assert placements["train-1"] == "gpu-idle"
    assert placements["train-2"] == "gpu-idle"
    assert placements["web-1"] in ("gpu-busy", "gpu-idle")
    assert placements["web-2"] in ("gpu-busy", "gpu-idle")
