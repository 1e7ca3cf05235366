"""Builders so tests read like manifests: one place that knows what a test pod or node looks like.

``node_manifest`` / ``pod_manifest`` give the manifest as a dict (for the simulator's YAML, the
e2e API server, or a test's own ``msgspec.convert``); ``node`` / ``pod`` decode it into the typed
objects the scheduler and plugins take; ``make_node`` / ``make_pod`` are the bare variants the
plugin tests call plugins with (no allocatable on the node: the test gives it to the snapshot;
no scheduler name on the pod). ``yaml_docs`` joins manifests into one multi-document YAML text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec

from koordsched.api.config_maps import ConfigMap
from koordsched.api.core import Node, Pod
from koordsched.api.resources import pod_requests
from koordsched.framework.types import PodInfo

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node_manifest(
    name: str,
    cpu: str | None = "4",
    memory: str | None = "8Gi",
    pods: int | str | None = 110,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    unschedulable: bool = False,
    hostname: bool = True,
    capacity: bool | Mapping[str, Any] = True,
    allocatable: Mapping[str, Any] | None = None,
    images: list[dict[str, Any]] | None = None,
    metadata: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A Node: ``cpu``, ``memory``, ``pods`` and ``extra`` are its allocatable (None leaves one
    out; ``allocatable`` replaces them all), also its capacity unless ``capacity`` is false or a
    map of its own; ``hostname`` adds the ``kubernetes.io/hostname`` label the kubelet sets."""
    alloc = {k: v for k, v in {"cpu": cpu, "memory": memory}.items() if v is not None}
    if pods is not None:
        alloc["pods"] = str(pods)
    alloc.update(extra)
    if allocatable is not None:
        alloc = dict(allocatable)
    meta: dict[str, Any] = {
        "name": name,
        "labels": {**({HOSTNAME: name} if hostname else {}), **(labels or {})},
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    meta.update(metadata or {})
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": meta}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    if spec:
        body["spec"] = spec
    status: dict[str, Any] = {}
    if alloc:
        status["allocatable"] = alloc
    if isinstance(capacity, Mapping):
        status["capacity"] = dict(capacity)
    elif capacity and alloc:
        status["capacity"] = dict(alloc)
    if images is not None:
        status["images"] = images
    if status:
        body["status"] = status
    return body


def node(
    name: str, cpu: str | None = "4", memory: str | None = "8Gi", pods: int | str | None = 110, **kw: Any
) -> Node:
    """A schedulable Node (see ``node_manifest``)."""
    return msgspec.convert(node_manifest(name, cpu, memory, pods, **kw), Node)


def make_node(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    unschedulable: bool = False,
) -> Node:
    """A bare Node for calling plugins directly: only the given labels, no allocatable."""
    return node(
        name, None, None, None, labels=labels, taints=taints, unschedulable=unschedulable, hostname=False
    )


def container(
    name: str = "c",
    requests: Mapping[str, Any] | None = None,
    *,
    limits: Mapping[str, Any] | None = None,
    image: str | None = None,
    ports: list[dict[str, Any]] | None = None,
    restart_policy: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name}
    if image is not None:
        body["image"] = image
    body["resources"] = {"requests": dict(requests or {})}
    if limits is not None:
        body["resources"]["limits"] = dict(limits)
    if ports:
        body["ports"] = ports
    if restart_policy:
        body["restartPolicy"] = restart_policy
    return body


def pod_manifest(
    name: str = "pod",
    cpu: str | None = "100m",
    memory: str | None = "128Mi",
    *,
    namespace: str = "default",
    uid: str | None = None,
    scheduler: str | None = "koord-scheduler",
    node_name: str = "",
    priority: int | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, Any] | None = None,
    requests: Mapping[str, Any] | None = None,
    limits: Mapping[str, Any] | None = None,
    image: str | None = None,
    containers: list[dict[str, Any]] | None = None,
    owners: list[dict[str, Any]] | None = None,
    created: str | None = None,
    deletion_timestamp: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Pod with one container ``c`` asking ``cpu``, ``memory`` and ``requests`` (or the given
    ``containers``); ``spec`` holds more camelCase spec fields. ``uid`` defaults to
    ``uid-<namespace>-<name>`` ("" leaves it out); annotation values that are not strings are
    JSON-encoded, as Koordinator's annotations are; ``owners`` are its ownerReferences;
    ``metadata`` holds more camelCase metadata fields."""
    if containers is None:
        asked: dict[str, Any] = {k: v for k, v in {"cpu": cpu, "memory": memory}.items() if v is not None}
        asked.update(requests or {})
        containers = [container(requests=asked, limits=limits, image=image)]
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    uid = f"uid-{namespace}-{name}" if uid is None else uid
    if uid:
        meta["uid"] = uid
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = {k: v if isinstance(v, str) else json.dumps(v) for k, v in annotations.items()}
    if owners:
        meta["ownerReferences"] = owners
    if created is not None:
        meta["creationTimestamp"] = created
    if deletion_timestamp is not None:
        meta["deletionTimestamp"] = deletion_timestamp
    meta.update(metadata or {})
    body_spec: dict[str, Any] = {}
    if scheduler is not None:
        body_spec["schedulerName"] = scheduler
    if node_name:
        body_spec["nodeName"] = node_name
    if priority is not None:
        body_spec["priority"] = priority
    body_spec["containers"] = containers
    body_spec.update(spec)
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body_spec}
    if status is not None:
        body["status"] = dict(status)
    return body


def pod(name: str = "pod", cpu: str | None = "100m", memory: str | None = "128Mi", **kw: Any) -> Pod:
    """A Pod for koord-scheduler (see ``pod_manifest``)."""
    return msgspec.convert(pod_manifest(name, cpu, memory, **kw), Pod)


def make_pod(
    name: str = "pod",
    requests: Mapping[str, Any] | None = None,
    *,
    containers: list[dict[str, Any]] | None = None,
    **kw: Any,
) -> Pod:
    """A bare pod for calling plugins directly: one container asking ``requests`` (none when
    neither is given), uid ``uid-<name>``, no scheduler name unless one is given."""
    if containers is None:
        containers = [container(requests=requests)] if requests is not None else []
    kw.setdefault("uid", f"uid-{name}")
    kw.setdefault("scheduler", None)
    return pod(name, None, None, containers=containers, **kw)


def pod_info(pod: Pod, priority: int = 0) -> PodInfo:
    """The PodInfo the scheduler would queue for ``pod``."""
    return PodInfo(pod, pod_requests(pod), priority)


def yaml_doc(manifest: Mapping[str, Any]) -> str:
    """One manifest as a YAML document led by its ``---``, for tests that concatenate documents."""
    return "\n---\n" + json.dumps(manifest) + "\n"


def yaml_docs(*docs: Mapping[str, Any] | str) -> str:
    """Manifests (dicts, written as JSON, which YAML reads; or YAML text) as one YAML stream."""
    return "\n---\n".join(d if isinstance(d, str) else json.dumps(d) for d in docs) + "\n"


# --- network topology (Koordinator v1.7): the spec's A.10 cluster ---------------------------------

SPINE_LABEL = "network.topology.nvidia.com/spine"
BLOCK_LABEL = "network.topology.nvidia.com/block"
#: A.10's cluster: s1{b1{node-1,node-8}, b2{node-2,node-7}}, s2{b3{node-3,node-6}, b4{node-4,node-5}}.
EIGHT_NODES: dict[str, tuple[str, str]] = {
    "node-1": ("s1", "b1"),
    "node-8": ("s1", "b1"),
    "node-2": ("s1", "b2"),
    "node-7": ("s1", "b2"),
    "node-3": ("s2", "b3"),
    "node-6": ("s2", "b3"),
    "node-4": ("s2", "b4"),
    "node-5": ("s2", "b4"),
}


#: The job-level preemption manual's 12 nodes in 3 spines and 5 blocks (our layout; the manual's
#: outcome): spine-0{block-0{node-0,1,2}, block-1{node-3,4}}, spine-1{block-2{node-5,6},
#: block-3{node-7,8}}, spine-2{block-4{node-9,10,11}}.
MANUAL_TWELVE_NODES: dict[str, tuple[str, str]] = {
    **{f"node-{i}": ("spine-0", "block-0") for i in (0, 1, 2)},
    **{f"node-{i}": ("spine-0", "block-1") for i in (3, 4)},
    **{f"node-{i}": ("spine-1", "block-2") for i in (5, 6)},
    **{f"node-{i}": ("spine-1", "block-3") for i in (7, 8)},
    **{f"node-{i}": ("spine-2", "block-4") for i in (9, 10, 11)},
}


def spine_block_topology() -> dict[str, Any]:
    """``ClusterNetworkTopology/default`` with Spine > Block > Node layers read from the labels above."""
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "ClusterNetworkTopology",
        "metadata": {"name": "default"},
        "spec": {
            "networkTopologySpec": [
                {"topologyLayer": "SpineLayer", "labelKey": [SPINE_LABEL]},
                {
                    "topologyLayer": "BlockLayer",
                    "parentTopologyLayer": "SpineLayer",
                    "labelKey": [BLOCK_LABEL],
                },
                {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"},
            ]
        },
    }


# --- Ascend vNPU templates (Koordinator v1.7, spec C.3) -------------------------------------------

GPU_VENDOR_LABEL = "node.koordinator.sh/gpu-vendor"
GPU_MODEL_LABEL = "node.koordinator.sh/gpu-model"
TEMPLATES_NAMESPACE = "koordinator-system"
TEMPLATES_NAME = "gpu-shared-resource-templates"

#: Part of the W Ascend manual's template table, nested as the scheduler reads it (C.3).
ASCEND_TEMPLATES = """\
huawei-Ascend-310P:
  vir01:
    huawei.com/npu-core: "1"
    huawei.com/npu-cpu: "1"
    huawei.com/npu-dvpp: "12"
    koordinator.sh/gpu-memory: 3Gi
  vir02:
    huawei.com/npu-core: "2"
    huawei.com/npu-cpu: "2"
    huawei.com/npu-dvpp: "25"
    koordinator.sh/gpu-memory: 6Gi
  vir02_1c:
    huawei.com/npu-core: "2"
    huawei.com/npu-cpu: "1"
    huawei.com/npu-dvpp: "25"
    koordinator.sh/gpu-memory: 6Gi
  vir04:
    huawei.com/npu-core: "4"
    huawei.com/npu-cpu: "4"
    huawei.com/npu-dvpp: "50"
    koordinator.sh/gpu-memory: 12Gi
  vir04_3c_ndvpp:
    huawei.com/npu-core: "4"
    huawei.com/npu-cpu: "3"
    koordinator.sh/gpu-memory: 12Gi
huawei-Ascend-910B3:
  vir05_1c_16g:
    huawei.com/npu-core: "5"
    huawei.com/npu-cpu: "1"
    koordinator.sh/gpu-memory: 16Gi
  vir10_3c_32g:
    huawei.com/npu-core: "10"
    huawei.com/npu-cpu: "3"
    koordinator.sh/gpu-memory: 32Gi
huawei-Ascend-910B4:
  vir10_3c_16g_nm:
    huawei.com/npu-core: "10"
    huawei.com/npu-cpu: "3"
    koordinator.sh/gpu-memory: 16Gi
"""


def ascend_labels(model: str = "Ascend-910B3", vendor: str = "huawei") -> dict[str, str]:
    """The Node labels the scheduler reads a GPU's vendor and model from (C.1)."""
    return {GPU_VENDOR_LABEL: vendor, GPU_MODEL_LABEL: model}


def config_map_manifest(
    name: str = TEMPLATES_NAME, namespace: str = TEMPLATES_NAMESPACE, data: Mapping[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": dict(data or {}),
    }


def templates_config_map(
    text: str = ASCEND_TEMPLATES, name: str = TEMPLATES_NAME, namespace: str = TEMPLATES_NAMESPACE
) -> ConfigMap:
    """The vNPU templates' ConfigMap with ``text`` as its ``data.yaml``."""
    return msgspec.convert(config_map_manifest(name, namespace, {"data.yaml": text}), ConfigMap)


def npu_allocatable(cards: int) -> dict[str, str]:
    """What a node of ``cards`` 910B-class NPUs reports (the W manual's node status, per card)."""
    per_card = {"koordinator.sh/gpu.shared": 100, "koordinator.sh/gpu-core": 100}
    per_card |= {"koordinator.sh/gpu-memory-ratio": 100, "huawei.com/npu-core": 20}
    per_card |= {"huawei.com/npu-cpu": 7, "huawei.com/npu-dvpp": 100}
    return {k: str(v * cards) for k, v in per_card.items()} | {"koordinator.sh/gpu-memory": f"{64 * cards}Gi"}


def npu_device_manifest(name: str, cards: int = 2) -> dict[str, Any]:
    """The node's Device CR: ``cards`` Ascend cards as C.1's example entry (20 AI cores, 7 AI CPUs,
    DVPP 100, 64Gi)."""
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": name},
        "spec": {
            "devices": [
                {
                    "type": "gpu",
                    "id": f"{name}-npu-{m}",
                    "minor": m,
                    "health": True,
                    "resources": {
                        "huawei.com/npu-core": "20",
                        "huawei.com/npu-cpu": "7",
                        "huawei.com/npu-dvpp": "100",
                        "koordinator.sh/gpu-memory": "64Gi",
                        "koordinator.sh/gpu-memory-ratio": "100",
                    },
                    "topology": {"socketID": 0, "nodeID": 0, "pcieID": "pci0", "busID": f"0000:{m:02x}:00.0"},
                }
                for m in range(cards)
            ]
        },
    }


# --- vendor accelerators with DevicePluginAdaption (Koordinator v1.7, spec C.5) -------------------


def vendor_device_manifest(
    name: str,
    vendor: str,
    model: str = "",
    cards: int = 1,
    memory: str = "16Gi",
    extra: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A node's Device CR of ``cards`` GPUs labelled with ``vendor`` and ``model`` (the labels the
    device-plugin adapters read), each with 100 cores, ``memory`` and the ``extra`` resources."""
    labels = {GPU_VENDOR_LABEL: vendor, **({GPU_MODEL_LABEL: model} if model else {})}
    per_card = {
        "koordinator.sh/gpu-core": "100",
        "koordinator.sh/gpu-memory": memory,
        "koordinator.sh/gpu-memory-ratio": "100",
        **(extra or {}),
    }
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "devices": [
                {"type": "gpu", "id": f"GPU-{m}", "minor": m, "health": True, "resources": dict(per_card)}
                for m in range(cards)
            ]
        },
    }


def shared_gpu_allocatable(cards: int, memory_gi: int = 16) -> dict[str, str]:
    """What a node of ``cards`` shareable GPUs reports (gpu.shared, cores, ratio, memory)."""
    per_card = {"koordinator.sh/gpu.shared": 100, "koordinator.sh/gpu-core": 100}
    per_card["koordinator.sh/gpu-memory-ratio"] = 100
    return {k: str(v * cards) for k, v in per_card.items()} | {
        "koordinator.sh/gpu-memory": f"{memory_gi * cards}Gi"
    }


class FakeNodeLockPort:
    """The node lock's side of an output port (``NodeLockWriter``), in memory: Node annotations by
    node, the pods that exist (``namespace/name``), and every patch sent."""

    def __init__(self, nodes: Mapping[str, Mapping[str, str]], pods: set[str] | None = None) -> None:
        self.nodes = {n: dict(a) for n, a in nodes.items()}
        self.pods = set(pods or ())
        self.patches: list[tuple[str, dict[str, str]]] = []

    async def read_node_annotations(self, node_name: str) -> tuple[Mapping[str, str], str] | None:
        found = self.nodes.get(node_name)
        return (dict(found), "7") if found is not None else None

    async def pod_exists(self, namespace: str, name: str) -> bool:
        return f"{namespace}/{name}" in self.pods

    async def patch_node_annotations(
        self, node_name: str, annotations: Mapping[str, str], resource_version: str
    ) -> None:
        self.patches.append((node_name, dict(annotations)))
        self.nodes[node_name].update(annotations)


class FakeNodeLockBinder(FakeNodeLockPort):
    """A binder (``tests.fakes.FakeBinder``'s ``bind``) that is also a ``NodeLockWriter``."""

    def __init__(self, nodes: Mapping[str, Mapping[str, str]], pods: set[str] | None = None) -> None:
        super().__init__(nodes, pods)
        self.bound: list[tuple[str, str, Any]] = []
        self.error: Exception | None = None

    async def bind(self, pod: Pod, node_name: str, plan: Any) -> None:
        self.bound.append((pod.key, node_name, plan))
