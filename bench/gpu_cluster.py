"""The GPU shape of the decision benchmark: 8-GPU nodes with Device CRs and NUMA topology.

Every node is a copy of ``gpu-h800-0`` from ``examples/gpu-numa-cluster.yaml`` (2 NUMA nodes,
4 PCIe switches with 2 GPUs and one RDMA NIC with VFs each, a NodeResourceTopology), renamed,
with its pods left out. The pending pods are a fixed mix, in a repeating order:

* 35 % one whole GPU (``koordinator.sh/gpu: 100``);
* 15 % several whole GPUs (2, 4 or 8; ``nvidia.com/gpu``), a third of them with a Restricted
  NUMA policy;
* 30 % a shared GPU (``gpu-core``/``gpu-memory-ratio`` 25 or 50 with ``gpu.shared: 1``);
* 20 % GPUDirect RDMA: one GPU and one RDMA VF on the same PCIe switch (joint allocation).

Each pod also asks for some CPU and memory. Sized so that everything fits.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import msgspec
import yaml

from koordsched.api.core import Node, Pod
from koordsched.api.koordinator import Device, NodeResourceTopology
from koordsched.backends.sim.loader import Cluster, LoadedObject

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gpu-numa-cluster.yaml"
TEMPLATE_NODE = "gpu-h800-0"

JOINT = '{"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"}'
VF_HINT = '{"rdma": {"vfSelector": {}}}'
RESTRICTED = '{"numaTopologyPolicy": "Restricted"}'


def _templates() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for doc in yaml.safe_load_all(EXAMPLE.read_text()):
        if (
            doc
            and doc.get("metadata", {}).get("name") == TEMPLATE_NODE
            and doc["kind"]
            in (
                "Node",
                "Device",
                "NodeResourceTopology",
            )
        ):
            out[doc["kind"]] = doc
    return out


def _pod(i: int) -> dict[str, Any]:
    kind = i % 20
    annotations: dict[str, str] = {}
    requests: dict[str, Any] = {"cpu": "2", "memory": "8Gi"}
    if kind < 7:
        requests["koordinator.sh/gpu"] = 100
    elif kind < 10:
        requests["nvidia.com/gpu"] = (2, 4, 8)[kind - 7]
        requests["cpu"] = str(8 * requests["nvidia.com/gpu"])
        if kind == 8:
            annotations["scheduling.koordinator.sh/numa-topology-spec"] = RESTRICTED
    elif kind < 16:
        share = 25 if kind % 2 else 50
        requests.update(
            {
                "koordinator.sh/gpu.shared": 1,
                "koordinator.sh/gpu-core": share,
                "koordinator.sh/gpu-memory-ratio": share,
            }
        )
    else:
        requests.update({"koordinator.sh/gpu": 100, "koordinator.sh/rdma": 100})
        annotations["scheduling.koordinator.sh/device-joint-allocate"] = JOINT
        annotations["scheduling.koordinator.sh/device-allocate-hint"] = VF_HINT
    return {
        "metadata": {
            "name": f"gpu-pod-{i}",
            "namespace": "bench",
            "uid": f"gpu-uid-{i}",
            "annotations": annotations,
        },
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": requests, "limits": requests}}],
        },
    }


def gpu_cluster(nodes: int, pods: int) -> Cluster:
    templates = _templates()
    cluster = Cluster()
    for i in range(nodes):
        name = f"gpu-node-{i}"
        for kind, type_ in (("Device", Device), ("NodeResourceTopology", NodeResourceTopology)):
            doc = copy.deepcopy(templates[kind])
            doc["metadata"]["name"] = name
            obj = msgspec.convert(doc, type_)
            cluster.objects.append(LoadedObject(kind, name, obj, "object", "bench"))
        doc = copy.deepcopy(templates["Node"])
        doc["metadata"]["name"] = name
        doc["metadata"]["labels"]["kubernetes.io/hostname"] = name
        cluster.objects.append(LoadedObject("Node", name, msgspec.convert(doc, Node), "node", "bench"))
    for i in range(pods):
        pod = msgspec.convert(_pod(i), Pod)
        cluster.objects.append(LoadedObject("Pod", f"bench/gpu-pod-{i}", pod, "pod", "bench"))
    return cluster
