"""Manifest-like builders for DeviceShare tests: Device CRs, GPU nodes, device pods, a handle.

The standard node has 8 GPUs on 2 NUMA nodes x 2 PCIe switches x 2 GPUs, and one RDMA NIC
per PCIe switch with a VF group. Everything is built with ``msgspec.convert`` from dicts
shaped like the YAML a user would write.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec
import numpy as np

from koordsched.api.core import Node
from koordsched.api.kinds import CONFIG_MAPS, DEVICES
from koordsched.api.koordinator import Device
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import Code, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare import DeviceShare, DeviceShareArgs
from tests.builders import ASCEND_TEMPLATES, container, node, pod, pod_info, templates_config_map
from tests.fakes import FakeHandle

GI = 1024**3
GPU_MEM = "80Gi"


def gpu_entry(
    minor: int,
    numa: int,
    pcie: str,
    *,
    memory: str = GPU_MEM,
    health: bool = True,
    labels: Mapping[str, str] | None = None,
    topology: bool = True,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": "gpu",
        "id": f"GPU-{minor:04d}-uuid",
        "minor": minor,
        "health": health,
        "labels": dict(labels or {}),
        "resources": {
            "koordinator.sh/gpu-core": "100",
            "koordinator.sh/gpu-memory-ratio": "100",
            "koordinator.sh/gpu-memory": memory,
        },
    }
    if topology:
        entry["topology"] = {
            "socketID": numa,
            "nodeID": numa,
            "pcieID": pcie,
            "busID": f"0000:{minor:02x}:00.0",
        }
    return entry


def rdma_entry(
    minor: int,
    numa: int,
    pcie: str,
    *,
    vfs: int = 4,
    vf_labels: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    health: bool = True,
) -> dict[str, Any]:
    bus = f"0000:{0x10 + minor:02x}:00"
    entry: dict[str, Any] = {
        "type": "rdma",
        "id": f"{bus}.0",
        "minor": minor,
        "health": health,
        "labels": dict(labels or {"type": "fakeW"}),
        "resources": {"koordinator.sh/rdma": "100"},
        "topology": {"socketID": numa, "nodeID": numa, "pcieID": pcie, "busID": f"{bus}.0"},
    }
    if vfs:
        entry["vfGroups"] = [
            {
                "labels": dict(vf_labels or {"type": "general"}),
                "vfs": [{"minor": i, "busID": f"{bus}.{i + 2}"} for i in range(vfs)],
            }
        ]
    return entry


def standard_entries(
    *,
    gpus: int = 8,
    rdma: bool = True,
    vfs: int = 4,
    unhealthy: Iterable[int] = (),
    memory: str = GPU_MEM,
) -> list[dict[str, Any]]:
    """2 NUMA x 2 PCIe x 2 GPUs (minors 0..7), one RDMA NIC (minors 1..4) per PCIe switch."""
    bad = set(unhealthy)
    entries = [gpu_entry(m, m // 4, f"pci{m // 2}", memory=memory, health=m not in bad) for m in range(gpus)]
    if rdma:
        entries.extend(rdma_entry(p + 1, p // 2, f"pci{p}", vfs=vfs) for p in range((gpus + 1) // 2))
    return entries


def npu_entry(minor: int, *, core: str = "20", memory: str = "64Gi") -> dict[str, Any]:
    """An Ascend card as the W manual's Device entry shows it (C.1)."""
    return {
        "type": "gpu",
        "id": f"npu-{minor}",
        "minor": minor,
        "health": True,
        "resources": {
            "huawei.com/npu-core": core,
            "huawei.com/npu-cpu": "7",
            "huawei.com/npu-dvpp": "100",
            "koordinator.sh/gpu-memory": memory,
            "koordinator.sh/gpu-memory-ratio": "100",
        },
        "topology": {
            "socketID": 0,
            "nodeID": minor // 4,
            "pcieID": f"pci{minor // 2}",
            "busID": f"0000:{minor:02x}:00.0",
        },
    }


def make_device(
    name: str,
    entries: list[dict[str, Any]] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    resource_version: str = "1",
) -> Device:
    return msgspec.convert(
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Device",
            "metadata": {
                "name": name,
                "resourceVersion": resource_version,
                "labels": dict(labels or {}),
                "annotations": dict(annotations or {}),
            },
            "spec": {"devices": standard_entries() if entries is None else entries},
        },
        Device,
    )


def make_node(name: str, labels: Mapping[str, str] | None = None) -> Node:
    return node(name, "128", "1Ti", labels=labels, capacity=False)


def make_pod(
    name: str,
    requests: Mapping[str, Any] | None = None,
    *,
    annotations: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    node_name: str = "",
    limits: Mapping[str, Any] | None = None,
) -> PodInfo:
    """A pod whose one container ``main`` asks ``requests``; annotation values that are not
    strings are JSON-encoded."""
    return pod_info(
        pod(
            name,
            uid=f"uid-{name}",
            labels=labels,
            annotations=annotations,
            node_name=node_name,
            containers=[container("main", requests, limits=limits or {})],
        )
    )


class Cluster:
    """A snapshot, a handle and a DeviceShare plugin, with helpers to add nodes and pods."""

    def __init__(self, args: DeviceShareArgs | None = None, *, device_plugin_adaption: bool = False) -> None:
        self.handle = FakeHandle()
        self.snap = self.handle.snapshot
        self.plugin = DeviceShare(args, self.handle, device_plugin_adaption=device_plugin_adaption)
        self.handle.plugin_map[self.plugin.name] = self.plugin

    def add_node(
        self,
        name: str,
        entries: list[dict[str, Any]] | None = None,
        *,
        node_labels: Mapping[str, str] | None = None,
        device_labels: Mapping[str, str] | None = None,
        device_annotations: Mapping[str, str] | None = None,
        device: bool = True,
    ) -> NodeInfo:
        info = self.snap.add_node(
            make_node(name, node_labels), {"cpu": 128000, "memory": 1 << 40, "pods": 110}
        )
        if device:
            self.set_device(name, entries, labels=device_labels, annotations=device_annotations)
        return info

    def set_device(
        self,
        name: str,
        entries: list[dict[str, Any]] | None = None,
        *,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> Device:
        dev = make_device(name, entries, labels=labels, annotations=annotations)
        self.handle.store_for(DEVICES)[name] = dev
        self.snap.touch(name)  # as EventHandlers.on_object does for a per-node object
        return dev

    def set_templates(self, text: str | None = ASCEND_TEMPLATES, key: str = "") -> None:
        """Store (or, with None, delete) the vNPU templates' ConfigMap with ``text`` as ``data.yaml``."""
        cm = templates_config_map(text or "")
        store = self.handle.store_for(CONFIG_MAPS)
        key = key or f"{cm.metadata.namespace}/{cm.metadata.name}"
        if text is None:
            store.pop(key, None)
        else:
            store[key] = cm

    def bind(self, pod: PodInfo, node: str) -> PodInfo:
        """Add a bound pod (with its annotations) as the cache would."""
        bound = msgspec.structs.replace(pod.pod, spec=msgspec.structs.replace(pod.pod.spec, node_name=node))
        info = PodInfo(bound, pod.requests)
        self.snap.add_pod(self.snap.by_name[node], info)
        return info

    def rows(self) -> np.ndarray:
        return np.arange(self.snap.n, dtype=np.int64)

    def filter(self, pod: PodInfo, state: CycleState | None = None) -> dict[str, Status | None]:
        """Node -> None when feasible, else the Status ``explain`` gives (PreFilter first)."""
        state = state if state is not None else CycleState()
        _, status = self.plugin.pre_filter(state, pod)
        if status.code is Code.SKIP:
            return {i.name: None for i in self.snap.infos}
        assert status.ok, status
        codes = self.plugin.filter_batch(state, pod, self.rows())
        return {
            info.name: None if code == 0 else self.plugin.explain(state, pod, int(code))
            for info, code in zip(self.snap.infos, codes.tolist(), strict=True)
        }

    def schedule(
        self, pod: PodInfo, node: str, state: CycleState | None = None
    ) -> tuple[Status, dict[str, str]]:
        """PreFilter, Reserve and PreBind on ``node``; returns (status, annotations written)."""
        import asyncio

        from koordsched.framework.types import BindingPlan

        state = state if state is not None else CycleState()
        _, status = self.plugin.pre_filter(state, pod)
        if not status.ok:
            return status, {}
        status = self.plugin.reserve(state, pod, node)
        if not status.ok:
            return status, {}
        plan = BindingPlan()
        status = asyncio.run(self.plugin.pre_bind(state, pod, node, plan))
        return status, plan.annotations


def allocated(annotations: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(annotations["scheduling.koordinator.sh/device-allocated"])
    return out


def minors(annotations: Mapping[str, str], device_type: str = "gpu") -> list[int]:
    return [int(e["minor"]) for e in allocated(annotations).get(device_type, [])]


def reasons(status: Status | None) -> tuple[Code, tuple[str, ...]] | None:
    return None if status is None else (status.code, status.reasons)


UAU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
UNSCHED = Code.UNSCHEDULABLE
_ = GI
