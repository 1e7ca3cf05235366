"""Random device clusters and device pods for the property tests."""

from __future__ import annotations

import json
import random
from typing import Any

from koordsched.framework.types import PodInfo
from tests.plugins.deviceshare.fixtures import Cluster, gpu_entry, make_pod, rdma_entry

KGPU = "koordinator.sh/gpu"
RDMA = "koordinator.sh/rdma"


def random_entries(rng: random.Random) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    gpus = rng.choice([0, 1, 2, 4, 8, 8, 8])
    no_topology = rng.random() < 0.15
    memory = rng.choice(["80Gi", "40Gi", "24Gi"])
    for m in range(gpus):
        pcie = m // 2
        entries.append(
            gpu_entry(
                m,
                pcie // 2,
                f"pci{pcie}",
                memory=memory,
                health=rng.random() > 0.1,
                labels={"zone": rng.choice(["a", "b"])},
                topology=not (no_topology and m == gpus - 1),
            )
        )
    nics = rng.choice([0, 1, 2, 4])
    entries.extend(
        rdma_entry(
            n + 1,
            n // 2,
            f"pci{n}",
            vfs=rng.choice([0, 1, 2, 4]),
            vf_labels={"type": rng.choice(["general", "special"])},
            labels={"type": rng.choice(["fakeW", "other"])},
            health=rng.random() > 0.1,
        )
        for n in range(nics)
    )
    if rng.random() < 0.2:
        entries.extend(
            {
                "type": "fpga",
                "minor": m,
                "health": True,
                "resources": {"koordinator.sh/fpga": "100"},
                "id": f"f{m}",
            }
            for m in range(rng.choice([1, 2]))
        )
    return entries


def random_partition_table(rng: random.Random, gpus: int) -> str:
    table: dict[str, list[dict[str, Any]]] = {}
    for size in (1, 2, 4, 8):
        if size > gpus or rng.random() < 0.3:
            continue
        for start in range(0, gpus - size + 1, size):
            entry: dict[str, Any] = {
                "minors": list(range(start, start + size)),
                "allocationScore": rng.choice([1, 1, 2]),
            }
            if rng.random() < 0.5:
                entry["ringBusBandwidth"] = rng.choice(["100Gi", "200Gi", "400Gi"])
            table.setdefault(str(size), []).append(entry)
    return json.dumps(table)


def random_cluster(rng: random.Random, nodes: int = 12) -> Cluster:
    c = Cluster()
    for i in range(nodes):
        name = f"n{i}"
        if rng.random() < 0.1:
            c.add_node(name, device=False)
            continue
        entries = random_entries(rng)
        gpus = sum(1 for e in entries if e["type"] == "gpu")
        node_labels: dict[str, str] = {}
        device_labels: dict[str, str] = {}
        device_annotations: dict[str, str] = {}
        roll = rng.random()
        if roll < 0.25:
            node_labels["node.koordinator.sh/gpu-model"] = rng.choice(["H100", "H800", "H20"])
        elif roll < 0.45:
            device_annotations["scheduling.koordinator.sh/gpu-partitions"] = random_partition_table(rng, gpus)
        if rng.random() < 0.2:
            node_labels["node.koordinator.sh/gpu-partition-policy"] = "Honor"
        if rng.random() < 0.2:
            device_labels["node.koordinator.sh/gpu-partition-policy"] = "Honor"
        if rng.random() < 0.2:
            device_labels["node.koordinator.sh/secondary-device-well-planned"] = "true"
        c.add_node(
            name,
            entries,
            node_labels=node_labels,
            device_labels=device_labels,
            device_annotations=device_annotations,
        )
    return c


def random_gpu_request(rng: random.Random) -> dict[str, Any]:
    shape = rng.randrange(7)
    if shape == 0:
        return {KGPU: rng.choice([100, 200, 300, 400, 800])}
    if shape == 1:
        return {KGPU: rng.choice([10, 25, 50, 75, 100])}
    if shape == 2:
        return {"nvidia.com/gpu": rng.choice([1, 2, 4])}
    if shape == 3:
        shared = rng.choice([1, 2])
        return {
            "koordinator.sh/gpu.shared": shared,
            "koordinator.sh/gpu-core": shared * rng.choice([25, 50, 100]),
            "koordinator.sh/gpu-memory-ratio": shared * rng.choice([25, 50, 100]),
        }
    if shape == 4:
        return {
            "koordinator.sh/gpu-core": rng.choice([10, 50, 100]),
            "koordinator.sh/gpu-memory": rng.choice(["8Gi", "30Gi"]),
        }
    if shape == 5:
        return {"koordinator.sh/gpu-memory-ratio": rng.choice([30, 100, 200])}
    return {"koordinator.sh/gpu-memory": rng.choice(["10Gi", "50Gi"])}


def random_pod(rng: random.Random, name: str) -> PodInfo:
    requests: dict[str, Any] = {}
    annotations: dict[str, Any] = {}
    hints: dict[str, Any] = {}
    types: list[str] = []
    if rng.random() < 0.85:
        requests.update(random_gpu_request(rng))
        types.append("gpu")
    if rng.random() < 0.4 or not requests:
        requests[RDMA] = rng.choice([1, 50, 100, 200, 2, 3])
        types.append("rdma")
    if rng.random() < 0.08:
        requests["koordinator.sh/fpga"] = rng.choice([50, 100])
        types.append("fpga")
    if "gpu" in types:
        gpu_hint: dict[str, Any] = {}
        if rng.random() < 0.2:
            gpu_hint["requiredTopologyScope"] = rng.choice(["PCIe", "NUMANode", "Node", "Device"])
        if rng.random() < 0.1:
            gpu_hint["selector"] = {"matchLabels": {"zone": "a"}}
        if gpu_hint:
            hints["gpu"] = gpu_hint
        if rng.random() < 0.2:
            spec: dict[str, Any] = {}
            if rng.random() < 0.4:
                spec["allocatePolicy"] = "Restricted"
            if rng.random() < 0.4:
                spec["ringBusBandwidth"] = rng.choice(["100Gi", "300Gi"])
            annotations["scheduling.koordinator.sh/gpu-partition-spec"] = spec
    if "rdma" in types:
        rdma_hint: dict[str, Any] = {}
        roll = rng.random()
        if roll < 0.2:
            rdma_hint["vfSelector"] = {}
        elif roll < 0.3:
            rdma_hint["vfSelector"] = {"matchLabels": {"type": "special"}}
        if rng.random() < 0.15:
            rdma_hint["selector"] = {"matchLabels": {"type": "fakeW"}}
        roll = rng.random()
        if roll < 0.15:
            rdma_hint["allocateStrategy"] = "RequestsAsCount"
            if rng.random() < 0.5:
                rdma_hint["exclusivePolicy"] = "DeviceLevel"
        elif roll < 0.25:
            rdma_hint["allocateStrategy"] = "ApplyForAll"
        if rng.random() < 0.1:
            rdma_hint["exclusivePolicy"] = "PCIeLevel"
        if rdma_hint:
            hints["rdma"] = rdma_hint
    if hints:
        annotations["scheduling.koordinator.sh/device-allocate-hint"] = hints
    if len(types) > 1 and rng.random() < 0.5:
        joint_types = types[:]
        rng.shuffle(joint_types)
        joint: dict[str, Any] = {"deviceTypes": joint_types}
        if rng.random() < 0.5:
            joint["requiredScope"] = "SamePCIe"
        annotations["scheduling.koordinator.sh/device-joint-allocate"] = joint
    return make_pod(name, requests, annotations=annotations)
