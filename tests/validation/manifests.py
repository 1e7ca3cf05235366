"""Small clusters built as plain dicts (so tests and the fuzz suite can mutate them), dumped to YAML."""

from __future__ import annotations

import json
from typing import Any

import yaml

from tests.builders import node_manifest, pod_manifest

Obj = dict[str, Any]
GPU_NODE = "gpu-0"
CPU_NODE = "cpu-0"


def gpu_node(name: str = GPU_NODE, gpus: int = 2) -> Obj:
    alloc = {
        "cpu": "16",
        "memory": "64Gi",
        "pods": "110",
        "nvidia.com/gpu": str(gpus),
        "koordinator.sh/gpu": str(100 * gpus),
        "koordinator.sh/gpu-core": str(100 * gpus),
        "koordinator.sh/gpu-memory-ratio": str(100 * gpus),
        "koordinator.sh/gpu-memory": f"{80 * gpus}Gi",
    }
    return node_manifest(name, allocatable=alloc)


def cpu_node(name: str = CPU_NODE, cpu: str = "8") -> Obj:
    return node_manifest(name, cpu, "32Gi", capacity=False)


def device(node: str = GPU_NODE, gpus: int = 2) -> Obj:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": node},
        "spec": {
            "devices": [
                {
                    "type": "gpu",
                    "id": f"GPU-{node}-{m}",
                    "minor": m,
                    "health": True,
                    "resources": {
                        "koordinator.sh/gpu-core": "100",
                        "koordinator.sh/gpu-memory-ratio": "100",
                        "koordinator.sh/gpu-memory": "80Gi",
                    },
                    "topology": {"socketID": 0, "nodeID": 0, "pcieID": "pci0", "busID": f"0000:{m:02x}:00.0"},
                }
                for m in range(gpus)
            ]
        },
    }


def node_metric(
    node: str, cpu: str = "1", memory: str = "1Gi", update_time: str = "2024-05-01T10:00:00Z"
) -> Obj:
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": node},
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        "status": {
            "updateTime": update_time,
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu, "memory": memory}}},
        },
    }


def pod(
    name: str,
    requests: dict[str, str] | None = None,
    *,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    node: str = "",
    **spec: Any,
) -> Obj:
    return pod_manifest(
        name,
        uid="",
        annotations=annotations,
        labels=labels,
        node_name=node,
        requests=requests or {"cpu": "1", "memory": "1Gi"},
        cpu=None,
        memory=None,
        **spec,
    )


def gpu_pod(name: str, annotations: dict[str, str] | None = None, gpus: int = 1) -> Obj:
    return pod(name, {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}, annotations=annotations)


def js(value: Any) -> str:
    """An annotation value: compact JSON."""
    return json.dumps(value, separators=(",", ":"))


def dump(*objs: Obj) -> str:
    return yaml.safe_dump_all(objs, sort_keys=False)


def nrt(node: str = CPU_NODE, cpus: int = 8, numa: int = 1) -> Obj:
    """A NodeResourceTopology: ``cpus`` CPUs, two threads per core, split evenly over ``numa`` nodes."""
    per = cpus // numa
    detail = [{"id": i, "core": i // 2, "socket": i // per, "node": i // per} for i in range(cpus)]
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {
            "name": node,
            "annotations": {
                "kubelet.koordinator.sh/cpu-manager-policy": js({"policy": "none"}),
                "node.koordinator.sh/cpu-topology": js({"detail": detail}),
            },
        },
        "topologyPolicies": ["None"],
        "zones": [
            {
                "name": f"node-{z}",
                "type": "Node",
                "resources": [
                    {"name": "cpu", "capacity": str(per), "allocatable": str(per), "available": str(per)},
                    {"name": "memory", "capacity": "16Gi", "allocatable": "16Gi", "available": "16Gi"},
                ],
            }
            for z in range(numa)
        ],
    }
