"""The three example pods of Koordinator's v1.6 release notes, through `simulate`, as users run them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koordsched.backends.sim.runner import SimResult, simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"


@pytest.fixture(scope="module")
def cluster() -> SimResult:
    return simulate([EXAMPLES / "gpu-numa-cluster.yaml"])


def devices(result: SimResult, key: str) -> dict[str, Any]:
    allocated: dict[str, Any] = json.loads(result.pod(key).annotations[DEVICE_ALLOCATED])
    return allocated


def device_cr(node: str, device_type: str, minor: int) -> dict[str, Any]:
    import yaml

    for doc in yaml.safe_load_all((EXAMPLES / "gpu-numa-cluster.yaml").read_text()):
        if doc and doc.get("kind") == "Device" and doc["metadata"]["name"] == node:
            for d in doc["spec"]["devices"]:
                if d["type"] == device_type and d.get("minor", 0) == minor:
                    found: dict[str, Any] = d
                    return found
    raise KeyError((node, device_type, minor))


def test_gpus_cpus_and_memory_share_one_numa_node(cluster: SimResult) -> None:
    pod = cluster.pod("default/gpu-numa-restricted")
    assert pod.status == "Scheduled"
    assert pod.node is not None
    gpus = devices(cluster, pod.key)["gpu"]
    assert len(gpus) == 2
    assert all(g["resources"]["koordinator.sh/gpu-core"] == "100" for g in gpus)
    numa_of_gpus = {device_cr(pod.node, "gpu", g["minor"])["topology"]["nodeID"] for g in gpus}
    status = json.loads(pod.annotations[RESOURCE_STATUS])
    numa_of_cpu = {r["node"] for r in status["numaNodeResources"]}
    assert len(numa_of_gpus) == 1 and numa_of_gpus == numa_of_cpu
    assert status["numaNodeResources"][0]["resources"] == {"cpu": "64", "memory": "500Gi"}


def test_gpu_and_rdma_vf_on_the_same_pcie_switch_as_published(cluster: SimResult) -> None:
    # The published hint has a "//apply VF" comment inside its JSON.
    pod = cluster.pod("kubeflow/pod-vf01")
    assert pod.status == "Scheduled" and pod.node is not None
    allocated = devices(cluster, pod.key)
    (gpu,) = allocated["gpu"]
    (nic,) = allocated["rdma"]
    assert nic["extension"]["vfs"][0]["busID"]
    gpu_switch = device_cr(pod.node, "gpu", gpu["minor"])["topology"]["pcieID"]
    nic_switch = device_cr(pod.node, "rdma", nic["minor"])["topology"]["pcieID"]
    assert gpu_switch == nic_switch
    assert nic["id"] == device_cr(pod.node, "rdma", nic["minor"])["id"]


def test_hami_core_shared_gpu_as_published(cluster: SimResult) -> None:
    # Published with the misspelt koordinator.sh/gpu-shared; read as gpu.shared.
    pod = cluster.pod("default/pod-example")
    assert pod.status == "Scheduled"
    (gpu,) = devices(cluster, pod.key)["gpu"]
    assert gpu["resources"]["koordinator.sh/gpu-core"] == "50"
    assert gpu["resources"]["koordinator.sh/gpu-memory-ratio"] == "50"
    assert gpu["resources"]["koordinator.sh/gpu-memory"]  # what HAMi-core's memory limit is set from


def test_no_device_is_given_twice(cluster: SimResult) -> None:
    seen: set[tuple[str, str, int, int]] = set()
    for pod in cluster.pods:
        raw = pod.annotations.get(DEVICE_ALLOCATED)
        if not raw or pod.node is None:
            continue
        for device_type, entries in json.loads(raw).items():
            for e in entries:
                core = int(e["resources"].get("koordinator.sh/gpu-core", "100"))
                # Whole devices must be unique; shared GPUs may repeat but never exceed 100% core.
                key = (pod.node, device_type, e["minor"], 0 if core < 100 else 1)
                if core >= 100:
                    assert key not in seen, key
                seen.add(key)


def test_the_seed_pods_are_refused_with_reasons_where_nothing_fits(tmp_path: Path) -> None:
    small = tmp_path / "cpu-only.yaml"
    small.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: cpu-only}\n"
        "status: {allocatable: {cpu: '8', memory: 32Gi, pods: '110'}}\n"
    )
    result = simulate([small, EXAMPLES / "seed-pods.yaml"])
    for p in result.pods:
        assert p.status == "Unschedulable", p.key
        assert p.message.startswith("0/1 nodes are available: 1 "), p.message
    assert "Insufficient koordinator.sh/gpu" in result.pod("default/gpu-numa-restricted").message
