"""What the fault tests share: a fully packed GPU + cpuset cluster, the burst, and the checks.

The cluster is small and full on purpose: ``NODES`` nodes, each with 4 GPUs (a Device CR) and 4
physical cores of 2 threads (a NodeResourceTopology), and exactly as many pods as there is room
for: one whole GPU for each GPU pod, one whole core (2 CPUs, ``FullPCPUs``) for each cpuset pod
(QoS LSR). Any GPU minor or CPU handed out twice therefore shows as two bound pods holding it,
and a pod that an allocation was forgotten for would have to take one that is taken.

The scheduler's client is throttled (``clientConnection.qps``) so a burst of a few dozen binds
takes seconds, long enough for a fault to land in the middle of it; each test asserts that it
did (some pods bound, some not, when the fault struck).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.helpers import Api, ApiError, AuditLog, Cluster, node, node_of, pod, wait_for, write_profile
from tests.e2e.test_crd_smoke import COLLECTIONS

NODES = 4
GPUS_PER_NODE = 4
CORES_PER_NODE = 4  # 2 threads each: 8 CPUs
GPU_PODS = NODES * GPUS_PER_NODE
CPU_PODS = NODES * CORES_PER_NODE
TOTAL = GPU_PODS + CPU_PODS

DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
RESOURCE_SPEC = "scheduling.koordinator.sh/resource-spec"
QOS_LABEL = "koordinator.sh/qosClass"

#: Binds per second the scheduler may send (its client's qps); the burst lasts TOTAL / BIND_QPS s.
BIND_QPS = 8


# --- the cluster ----------------------------------------------------------------------------------


def gpu_node(name: str) -> dict[str, Any]:
    res = {
        "cpu": str(2 * CORES_PER_NODE),
        "memory": "64Gi",
        "pods": "110",
        "koordinator.sh/gpu": str(100 * GPUS_PER_NODE),
        "koordinator.sh/gpu-core": str(100 * GPUS_PER_NODE),
        "koordinator.sh/gpu-memory-ratio": str(100 * GPUS_PER_NODE),
        "koordinator.sh/gpu-memory": f"{16 * GPUS_PER_NODE}Gi",
    }
    return node(name, res.pop("cpu"), res.pop("memory"), res.pop("pods"), **res)


def device(name: str) -> dict[str, Any]:
    gpus = [
        {
            "type": "gpu",
            "id": f"GPU-{name}-{minor}",
            "minor": minor,
            "health": True,
            "resources": {
                "koordinator.sh/gpu-core": "100",
                "koordinator.sh/gpu-memory-ratio": "100",
                "koordinator.sh/gpu-memory": "16Gi",
            },
            "topology": {
                "socketID": minor // 2,
                "nodeID": minor // 2,
                "pcieID": f"pci0000:{minor // 2}0",
                "busID": f"0000:{minor:02x}:00.0",
            },
        }
        for minor in range(GPUS_PER_NODE)
    ]
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": name, "labels": {"koordsched.io/e2e": "true"}},
        "spec": {"devices": gpus},
    }


def topology(name: str) -> dict[str, Any]:
    """2 NUMA nodes of 2 cores; thread siblings are id and id + CORES_PER_NODE (Linux numbering)."""
    half = CORES_PER_NODE // 2
    detail = [
        {"id": t * CORES_PER_NODE + core, "core": core, "socket": core // half, "node": core // half}
        for t in range(2)
        for core in range(CORES_PER_NODE)
    ]
    zone_cpus = str(2 * half)
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {
            "name": name,
            "labels": {"koordsched.io/e2e": "true"},
            "annotations": {
                "kubelet.koordinator.sh/cpu-manager-policy": '{"policy":"none"}',
                "node.koordinator.sh/cpu-topology": json.dumps({"detail": detail}),
            },
        },
        "topologyPolicies": ["None"],
        "zones": [
            {
                "name": f"node-{n}",
                "type": "Node",
                "resources": [
                    {"name": "cpu", "capacity": zone_cpus, "allocatable": zone_cpus, "available": zone_cpus},
                    {"name": "memory", "capacity": "32Gi", "allocatable": "32Gi", "available": "32Gi"},
                ],
            }
            for n in range(2)
        ],
    }


@contextlib.asynccontextmanager
async def packed_cluster(api: Api, cluster: Cluster) -> AsyncIterator[list[str]]:
    """The nodes with their Device CRs and topologies; yields the node names."""
    created: list[str] = []
    names = [cluster.node_name(f"g{i}") for i in range(NODES)]
    try:
        for name in names:
            await api.create_node(gpu_node(name))
            cluster.nodes.append(name)
            for kind, obj in (("Device", device(name)), ("NodeResourceTopology", topology(name))):
                await api.post(COLLECTIONS[kind], obj)
                created.append(f"{COLLECTIONS[kind]}/{name}")
        yield names
    finally:
        for path in created:
            with contextlib.suppress(ApiError):
                await api.delete(path)


def gpu_pod(namespace: str, name: str) -> dict[str, Any]:
    res = {"koordinator.sh/gpu": "100", "memory": "256Mi"}
    return _pod(namespace, name, res, {}, {})


def cpuset_pod(namespace: str, name: str) -> dict[str, Any]:
    res = {"cpu": "2", "memory": "256Mi"}
    spec = {RESOURCE_SPEC: json.dumps({"preferredCPUBindPolicy": "FullPCPUs"})}
    return _pod(namespace, name, res, {QOS_LABEL: "LSR"}, spec)


def _pod(
    namespace: str, name: str, res: dict[str, str], labels: dict[str, str], annotations: dict[str, str]
) -> dict[str, Any]:
    return pod(
        namespace,
        name,
        scheduler="koord-scheduler",
        requests=res,
        limits=res,
        labels=labels,
        annotations=annotations,
    )


async def create_burst(api: Api, namespace: str) -> list[str]:
    """All the pods, pending, GPU and cpuset pods interleaved; returns their names."""
    names = []
    for i in range(max(GPU_PODS, CPU_PODS)):
        if i < GPU_PODS:
            names.append(f"gpu-{i:02d}")
            await api.create_pod(gpu_pod(namespace, names[-1]))
        if i < CPU_PODS:
            names.append(f"cpu-{i:02d}")
            await api.create_pod(cpuset_pod(namespace, names[-1]))
    return names


def throttled_profile(
    path: Path,
    *,
    lease_name: str,
    qps: float = BIND_QPS,
    lease_duration: str = "4s",
    renew_deadline: str = "3s",
    retry_period: str = "1s",
    leader_elect: bool = True,
) -> Path:
    """The shipped profile with short lease settings (by default) and a throttled client."""
    write_profile(
        path,
        lease_name=lease_name,
        leader_elect=leader_elect,
        lease_duration=lease_duration,
        renew_deadline=renew_deadline,
        retry_period=retry_period,
    )
    cfg = yaml.safe_load(path.read_text())
    cfg["clientConnection"] = {"qps": qps, "burst": 1}
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


# --- watching the burst ------------------------------------------------------------------------------


async def bound_count(cluster: Cluster) -> tuple[int, int]:
    """(bound, total) pods in the test's namespace."""
    pods = await cluster.pods()
    return sum(1 for p in pods.values() if node_of(p)), len(pods)


async def wait_bound_at_least(cluster: Cluster, n: int, timeout: float = 90.0, detail: Any = None) -> int:
    async def probe() -> int | None:
        bound, _ = await bound_count(cluster)
        return bound if bound >= n else None

    return await wait_for(probe, timeout=timeout, interval=0.05, what=f"{n} pods bound", detail=detail)


async def wait_all_bound(
    cluster: Cluster, names: list[str], timeout: float = 120.0, detail: Any = None
) -> None:
    async def probe() -> bool:
        pods = await cluster.pods()
        return all(node_of(pods.get(n, {})) for n in names)

    await wait_for(probe, timeout=timeout, interval=0.25, what=f"all {len(names)} pods bound", detail=detail)


@dataclass
class Verdict:
    """What a fault test reports (and docs/reliability.md quotes)."""

    pods: int = 0
    bound: int = 0
    lost: int = 0
    bound_twice: int = 0
    double_allocated_gpus: int = 0
    double_allocated_cpus: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def line(self, name: str) -> str:
        return "FAULT-FIGURES " + json.dumps({"test": name, **self.__dict__}, sort_keys=True)


def check_allocations(pods: dict[str, dict[str, Any]], names: list[str]) -> Verdict:
    """Every pod bound, with readable allocations, nothing held twice."""
    v = Verdict(pods=len(names))
    gpus: dict[tuple[str, int], list[str]] = defaultdict(list)
    cpus: dict[tuple[str, int], list[str]] = defaultdict(list)
    for name in names:
        p = pods.get(name)
        node = node_of(p) if p else None
        if not node:
            v.lost += 1
            continue
        assert p is not None
        v.bound += 1
        ann = p["metadata"].get("annotations") or {}
        if name.startswith("gpu-"):
            raw = ann.get(DEVICE_ALLOCATED)
            assert raw, f"{name} on {node}: no {DEVICE_ALLOCATED} annotation: {ann}"
            alloc = json.loads(raw).get("gpu") or []
            assert len(alloc) == 1, f"{name}: {raw}"
            gpus[(node, alloc[0]["minor"])].append(name)
        else:
            raw = ann.get(RESOURCE_STATUS)
            assert raw, f"{name} on {node}: no {RESOURCE_STATUS} annotation: {ann}"
            cpuset = _cpus(json.loads(raw).get("cpuset", ""))
            assert len(cpuset) == 2, f"{name}: cpuset {raw}"
            for cpu in cpuset:
                cpus[(node, cpu)].append(name)
    v.double_allocated_gpus = sum(1 for holders in gpus.values() if len(holders) > 1)
    v.double_allocated_cpus = sum(1 for holders in cpus.values() if len(holders) > 1)
    v.extra["gpus_held_twice"] = {f"{n}/{m}": h for (n, m), h in gpus.items() if len(h) > 1}
    v.extra["cpus_held_twice"] = {f"{n}/{c}": h for (n, c), h in cpus.items() if len(h) > 1}
    return v


def _cpus(cpulist: str) -> set[int]:
    out: set[int] = set()
    for part in filter(None, cpulist.split(",")):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def bindings_by_pod(audit: AuditLog, namespace: str, since: int) -> dict[str, Counter[int]]:
    """pod -> Counter of the binding requests' status codes (the audit log sees every one)."""
    out: dict[str, Counter[int]] = defaultdict(Counter)
    for e in audit.bindings(namespace, since=since):
        out[e.name][e.code] += 1
    return out


def assert_bound_once(audit: AuditLog, namespace: str, since: int, names: list[str], v: Verdict) -> None:
    """One accepted binding per pod, and no binding refused because the pod had a node already."""
    codes = bindings_by_pod(audit, namespace, since)
    v.bound_twice = sum(1 for n in names if codes[n][201] > 1)
    refused = {n: dict(c) for n, c in codes.items() if set(c) - {201}}
    v.extra["binding_requests"] = sum(sum(c.values()) for c in codes.values())
    v.extra["bindings_refused"] = refused
    assert v.bound_twice == 0, {n: dict(codes[n]) for n in names if codes[n][201] > 1}
    missing = [n for n in names if codes[n][201] != 1]
    assert not missing, f"pods without exactly one accepted binding: { {n: dict(codes[n]) for n in missing} }"
    assert not refused, f"binding requests refused: {refused}"


async def settle(seconds: float) -> None:
    """Give in-flight requests of a dead or stopped process time to land (or not) before counting."""
    await asyncio.sleep(seconds)
