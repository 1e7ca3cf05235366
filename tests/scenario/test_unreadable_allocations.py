"""Allocations that cannot be read, through `simulate` with the default profile, as users run it.

A bound pod whose device-allocated or resource-status cannot be read is never counted as holding
nothing: its node offers none of the devices (CPUs) it may hold, and says why, naming the pod.
"""

from __future__ import annotations

import json

from koordsched.backends.sim.runner import simulate
from tests.builders import pod_manifest
from tests.plugins.numa.helpers import cpu_infos
from tests.scenario.helpers import WriteYaml

GPU = "{type: gpu, minor: %d, health: true, resources: %s}"
GPU_RESOURCES = (
    '{koordinator.sh/gpu-core: "100", '
    'koordinator.sh/gpu-memory-ratio: "100", '
    "koordinator.sh/gpu-memory: 80Gi}"
)
GPU_NODE = f"""
apiVersion: v1
kind: Node
metadata: {{name: n1}}
status:
  allocatable: {{cpu: "32", memory: 64Gi, pods: "110", nvidia.com/gpu: "2"}}
---
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Device
metadata: {{name: n1}}
spec:
  devices:
  - {GPU % (0, GPU_RESOURCES)}
  - {GPU % (1, GPU_RESOURCES)}
"""


def gpu_pod(name: str, node: str = "", allocated: str | None = None) -> str:
    """A one-GPU pod document; ``allocated`` is its device-allocated annotation, as it is."""
    annotations = {"scheduling.koordinator.sh/device-allocated": allocated} if allocated else None
    gpu = {"nvidia.com/gpu": "1"}
    pod = pod_manifest(
        name, None, None, uid="", annotations=annotations, node_name=node, requests=gpu, limits=gpu
    )
    return "\n" + json.dumps(pod) + "\n"


def test_a_truncated_device_allocation_is_not_handed_out_again(write_yaml: WriteYaml) -> None:
    # Before: p1 was given GPU 0, the very GPU the bound pod holds.
    truncated = '{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"100"'
    path = write_yaml("---".join([GPU_NODE, gpu_pod("bound", "n1", truncated), gpu_pod("p1"), gpu_pod("p2")]))
    result = simulate([path])
    reason = (
        "0/1 nodes are available: 1 node(s) device allocation of pod default/bound unreadable "
        "(scheduling.koordinator.sh/device-allocated): Input data was truncated."
    )
    for name in ("p1", "p2"):
        pod = result.pod(f"default/{name}")
        assert pod.node is None
        assert pod.message.startswith(reason), pod.message


def test_a_readable_device_allocation_still_counts_exactly(write_yaml: WriteYaml) -> None:
    held = json.dumps(
        {
            "gpu": [
                {
                    "minor": 0,
                    "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"},
                }
            ]
        }
    )
    path = write_yaml("---".join([GPU_NODE, gpu_pod("bound", "n1", held), gpu_pod("p1"), gpu_pod("p2")]))
    result = simulate([path])
    p1 = json.loads(result.pod("default/p1").annotations["scheduling.koordinator.sh/device-allocated"])
    assert [g["minor"] for g in p1["gpu"]] == [1]
    assert result.pod("default/p2").node is None


def numa_cluster(status: str) -> str:
    nrt = {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {
            "name": "n1",
            "annotations": {
                "node.koordinator.sh/cpu-topology": json.dumps({"detail": cpu_infos(2, 1, 4, 2)})
            },
        },
        "topologyPolicies": ["None"],
        "zones": [
            {
                "name": f"node-{i}",
                "type": "Node",
                "resources": [
                    {"name": "cpu", "capacity": "8", "allocatable": "8"},
                    {"name": "memory", "capacity": "64Gi", "allocatable": "64Gi"},
                ],
            }
            for i in range(2)
        ],
    }
    docs: list[dict[str, object]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "16", "memory": "128Gi", "pods": "110"}},
        },
        nrt,
    ]

    def pod(name: str, node: str = "", annotations: dict[str, str] | None = None) -> dict[str, object]:
        res = {"cpu": "4", "memory": "2Gi"}
        spec: dict[str, object] = {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": res, "limits": res}}],
        }
        if node:
            spec["nodeName"] = node
        meta = {"name": name, "labels": {"koordinator.sh/qosClass": "LSR"}, "annotations": annotations or {}}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}

    docs.append(pod("bound", "n1", {"scheduling.koordinator.sh/resource-status": status}))
    docs += [pod(f"lsr-{i}") for i in range(2)]
    return "\n---\n".join(json.dumps(d) for d in docs)


def test_a_truncated_cpu_allocation_is_not_handed_out_again(write_yaml: WriteYaml) -> None:
    # Before: lsr-0 was given CPUs 0-3, the very CPUs the bound pod holds.
    path = write_yaml(numa_cluster('{"cpuset":"0-3"'))
    result = simulate([path])
    for name in ("lsr-0", "lsr-1"):
        pod = result.pod(f"default/{name}")
        assert pod.node is None
        assert pod.message.startswith(
            "0/1 nodes are available: 1 node(s) resource allocation of pod default/bound unreadable "
            "(scheduling.koordinator.sh/resource-status): Input data was truncated."
        ), pod.message


def test_a_readable_cpu_allocation_still_counts_exactly(write_yaml: WriteYaml) -> None:
    path = write_yaml(numa_cluster('{"cpuset":"0-3"}'))
    result = simulate([path])
    taken = {0, 1, 2, 3}
    for name in ("lsr-0", "lsr-1"):
        status = json.loads(
            result.pod(f"default/{name}").annotations["scheduling.koordinator.sh/resource-status"]
        )
        first, last = (int(x) for x in status["cpuset"].split("-"))
        cpus = set(range(first, last + 1))
        assert len(cpus) == 4 and not cpus & taken
        taken |= cpus
