"""Builders for the NUMA tests: nodes with a NodeResourceTopology, pods with Koordinator annotations."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec

from koordsched.api.core import Node, Pod
from koordsched.api.kinds import NODE_RESOURCE_TOPOLOGIES
from koordsched.api.koordinator import (
    ANNOTATION_CPU_TOPOLOGY,
    ANNOTATION_NUMA_TOPOLOGY_SPEC,
    ANNOTATION_RESOURCE_SPEC,
    LABEL_QOS_CLASS,
    CPUInfo,
    NodeResourceTopology,
)
from koordsched.api.resources import pod_requests
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import NodeInfo, Snapshot
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.nodenumaresource import NodeNUMAResource, NodeNUMAResourceArgs
from koordsched.plugins.nodenumaresource.topology import CPUTopology
from koordsched.plugins.topologymanager import bitmask
from koordsched.plugins.topologymanager.interface import NUMATopologyHint, TopologyHints
from tests.builders import container, node, pod
from tests.fakes import FakeHandle

GI = 1024**3


def cpu_infos(sockets: int, nodes_per_socket: int, cores_per_node: int, threads: int) -> list[dict[str, int]]:
    """CPU ids numbered with siblings adjacent: socket, node, core, thread."""
    out = []
    cpu = 0
    for s in range(sockets):
        for n in range(nodes_per_socket):
            node = s * nodes_per_socket + n
            for c in range(cores_per_node):
                for _ in range(threads):
                    out.append({"id": cpu, "core": n * cores_per_node + c, "socket": s, "node": node})
                    cpu += 1
    return out


def topology(sockets: int, nodes_per_socket: int, cores_per_node: int, threads: int) -> CPUTopology:
    return CPUTopology.build(
        CPUInfo(**d) for d in cpu_infos(sockets, nodes_per_socket, cores_per_node, threads)
    )


def make_nrt(
    name: str,
    *,
    sockets: int = 2,
    nodes_per_socket: int = 1,
    cores_per_node: int = 4,
    threads: int = 2,
    memory_per_node: str = "64Gi",
    policies: list[str] | None = None,
    annotations: Mapping[str, str] | None = None,
    zones: list[dict[str, Any]] | None = None,
    with_topology: bool = True,
) -> NodeResourceTopology:
    infos = cpu_infos(sockets, nodes_per_socket, cores_per_node, threads)
    ann = dict(annotations or {})
    if with_topology:
        ann.setdefault(ANNOTATION_CPU_TOPOLOGY, json.dumps({"detail": infos}))
    if zones is None:
        cpus_per_node = cores_per_node * threads
        zones = [
            {
                "name": f"node-{i}",
                "type": "Node",
                "resources": [
                    {"name": "cpu", "capacity": str(cpus_per_node), "allocatable": str(cpus_per_node)},
                    {"name": "memory", "capacity": memory_per_node, "allocatable": memory_per_node},
                ],
            }
            for i in range(sockets * nodes_per_socket)
        ]
    return msgspec.convert(
        {
            "metadata": {"name": name, "annotations": ann},
            "topologyPolicies": policies or ["None"],
            "zones": zones,
        },
        NodeResourceTopology,
    )


def make_node(
    name: str,
    cpu: str = "16",
    memory: str = "128Gi",
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> Node:
    return node(name, cpu, memory, labels=labels, annotations=annotations, hostname=False, **(extra or {}))


def make_pod(
    name: str = "pod",
    requests: Mapping[str, Any] | None = None,
    *,
    qos: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    numa_policy: str | None = None,
    exclusive: str | None = None,
    resource_spec: Mapping[str, str] | None = None,
    limits: bool = True,
    node_name: str = "",
    uid: str | None = None,
) -> Pod:
    lab = dict(labels or {})
    if qos:
        lab[LABEL_QOS_CLASS] = qos
    ann = dict(annotations or {})
    if numa_policy is not None or exclusive is not None:
        spec: dict[str, str] = {}
        if numa_policy is not None:
            spec["numaTopologyPolicy"] = numa_policy
        if exclusive is not None:
            spec["singleNUMANodeExclusive"] = exclusive
        ann[ANNOTATION_NUMA_TOPOLOGY_SPEC] = json.dumps(spec)
    if resource_spec is not None:
        ann[ANNOTATION_RESOURCE_SPEC] = json.dumps(dict(resource_spec))
    res = dict(requests or {})
    return pod(
        name,
        uid=uid or f"uid-{name}",
        scheduler=None,
        labels=lab,
        annotations=ann,
        node_name=node_name,
        containers=[container("c", res, limits=res if limits else None)],
    )


def pod_info(pod: Pod) -> PodInfo:
    return PodInfo(pod, pod_requests(pod))


def add_nrt(handle: FakeHandle, nrt: NodeResourceTopology) -> None:
    """Store a NodeResourceTopology and mark its node changed, as EventHandlers.on_object does."""
    handle.store_for(NODE_RESOURCE_TOPOLOGIES)[nrt.metadata.name] = nrt
    handle.snapshot.touch(nrt.metadata.name)


class FakeGPUProvider:
    """A DeviceShare-like hint provider: ``gpus`` GPUs per NUMA node, the pod wants ``want``."""

    name = "DeviceShare"

    def __init__(
        self, gpus_per_numa: Mapping[int, int], want: int, free: Mapping[int, int] | None = None
    ) -> None:
        self.gpus = dict(gpus_per_numa)
        self.free = dict(free if free is not None else gpus_per_numa)
        self.want = want
        self.allocated: list[tuple[str, int | None]] = []

    def get_pod_topology_hints(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> tuple[TopologyHints | None, Status]:
        if self.want == 0:
            return None, SUCCESS
        nodes = sorted(self.gpus)
        feasible = [
            m
            for m in bitmask.iterate_masks(nodes)
            if sum(self.free[n] for n in bitmask.bits_of(m)) >= self.want
        ]
        if not feasible:
            return {"koordinator.sh/gpu": []}, SUCCESS
        smallest = min(m.bit_count() for m in feasible)
        return {
            "koordinator.sh/gpu": [
                NUMATopologyHint(m, m.bit_count() == smallest, 500 if i == 0 else 0)
                for i, m in enumerate(feasible)
            ]
        }, SUCCESS

    def allocate(self, state: CycleState, pod: PodInfo, node: NodeInfo, affinity: NUMATopologyHint) -> Status:
        self.allocated.append((node.name, affinity.affinity))
        if affinity.affinity is None:
            return SUCCESS
        have = sum(self.free.get(n, 0) for n in bitmask.bits_of(affinity.affinity))
        if have < self.want:
            return Status.unschedulable("Insufficient gpu devices")
        return SUCCESS


def build_plugin(handle: FakeHandle, **args: Any) -> NodeNUMAResource:
    plugin = NodeNUMAResource(msgspec.convert(args, NodeNUMAResourceArgs), handle)
    handle.plugin_map[plugin.name] = plugin
    return plugin


class Env:
    """A snapshot, a handle and the plugin, with helpers that drive a cycle as the framework does."""

    def __init__(self, **args: Any) -> None:
        from koordsched.api.resources import resource_list

        self._resource_list = resource_list
        self.snap = Snapshot()
        self.handle = FakeHandle(self.snap)
        self.plugin = build_plugin(self.handle, **args)

    def add_node(self, node: Node, nrt: NodeResourceTopology | None = None) -> NodeInfo:
        if nrt is not None:
            add_nrt(self.handle, nrt)
        return self.snap.add_node(node, self._resource_list(node.status.allocatable))

    def add_provider(self, provider: Any) -> None:
        self.handle.plugin_map[provider.name] = provider

    def place(self, pod: Pod, node: str) -> PodInfo:
        info = pod_info(pod)
        self.snap.add_pod(self.snap.by_name[node], info)
        return info

    def filter(self, pod: PodInfo, state: CycleState | None = None) -> dict[str, Status | None]:
        import numpy as np

        state = state if state is not None else CycleState()
        _, status = self.plugin.pre_filter(state, pod)
        assert status.ok or status.code.name == "SKIP", status
        rows = np.arange(self.snap.n, dtype=np.int64)
        codes = self.plugin.filter_batch(state, pod, rows)
        return {
            info.name: None if c == 0 else self.plugin.explain(state, pod, int(c))
            for info, c in zip(self.snap.infos, codes.tolist(), strict=True)
        }

    def schedule(self, pod: PodInfo) -> tuple[str | None, CycleState, dict[str, str]]:
        """PreFilter, Filter, Score, Reserve, PreBind on the best node; returns (node, state, annotations)."""
        import asyncio

        import numpy as np

        from koordsched.framework.types import BindingPlan

        state = CycleState()
        _, status = self.plugin.pre_filter(state, pod)
        if not status.ok and status.code.name != "SKIP":
            return None, state, {}
        rows = np.arange(self.snap.n, dtype=np.int64)
        codes = self.plugin.filter_batch(state, pod, rows)
        feasible = rows[codes == 0]
        if len(feasible) == 0:
            return None, state, {}
        self.plugin.pre_score(state, pod, feasible)
        scores = self.plugin.score_batch(state, pod, feasible)
        best = int(feasible[int(np.argmax(scores))])
        name = self.snap.infos[best].name
        status = self.plugin.reserve(state, pod, name)
        if not status.ok:
            return None, state, {}
        plan = BindingPlan()
        status = asyncio.run(self.plugin.pre_bind(state, pod, name, plan))
        assert status.ok, status
        return name, state, plan.annotations

    def bind(self, pod: Pod, node: str, annotations: Mapping[str, str]) -> PodInfo:
        """The pod as the API server returns it after the bind: annotated and assigned."""
        bound = msgspec.structs.replace(
            pod,
            metadata=msgspec.structs.replace(
                pod.metadata, annotations={**pod.metadata.annotations, **annotations}
            ),
            spec=msgspec.structs.replace(pod.spec, node_name=node),
        )
        return self.place(bound, node)
