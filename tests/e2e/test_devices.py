"""DeviceShare and NodeNUMAResource on a real apiserver: the seed pods get GPUs; a restart keeps them.

Two GPU nodes of ``examples/gpu-numa-cluster.yaml`` (gpu-h800-1: kubelet topology policy none;
gpu-l20-0: SingleNUMANode), each with its Node, Device CR and NodeResourceTopology, renamed per
run, and the three seed pods of ``examples/seed-pods.yaml`` in the test's namespace. The scheduler
must bind all three and write ``device-allocated`` (and ``resource-status``) annotations of the
right shape, naming the GPUs of the Device CR. Then it is stopped and a new one started: that one
knows which GPU minors are taken only from those annotations, so a pod asking for exactly the GPUs
left on the H800 node must get exactly those, and a pod asking for one more whole GPU there must
stay pending with a clear message.

This module runs its own control plane with the CRDs installed (as ``test_crd_smoke.py`` does):
with the CRDs in the session's shared one, every other test's scheduler would start watching
Devices and NodeResourceTopologies, which is not what those tests are about.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections import Counter
from collections.abc import AsyncIterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordsched.api.quantity import parse_quantity
from tests.e2e.apiserver import REPO_ROOT
from tests.e2e.conftest import SCHEDULER_USER
from tests.e2e.fixtures import audited_control_plane, own_lease
from tests.e2e.helpers import (
    Api,
    ApiError,
    AuditLog,
    Cluster,
    condition,
    node_of,
    scheduler_in_process,
    write_profile,
)
from tests.e2e.test_crd_smoke import COLLECTIONS, install_crds

pytestmark = pytest.mark.e2e

CLUSTER_EXAMPLE = REPO_ROOT / "examples" / "gpu-numa-cluster.yaml"
SEED_PODS = REPO_ROOT / "examples" / "seed-pods.yaml"

DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
GPU_CORE = "koordinator.sh/gpu-core"
GPU_RATIO = "koordinator.sh/gpu-memory-ratio"
GPU_MEMORY = "koordinator.sh/gpu-memory"
RDMA = "koordinator.sh/rdma"

RESTRICTED = "gpu-numa-restricted"
VF01 = "pod-vf01"
SHARED = "pod-example"
SEEDS = [RESTRICTED, VF01, SHARED]

#: Scheduling a handful of pods; generous for a loaded 2-core machine.
BIND_TIMEOUT = 60.0


# --- the control plane ----------------------------------------------------------------------------


module_dir, audit_log, kube_env = audited_control_plane("e2e-devices", {SCHEDULER_USER: ["system:masters"]})


# --- objects from the examples ---------------------------------------------------------------------


def example_objects(kind: str, name: str) -> dict[str, Any]:
    for doc in yaml.safe_load_all(CLUSTER_EXAMPLE.read_text()):
        if isinstance(doc, dict) and doc.get("kind") == kind and doc["metadata"]["name"] == name:
            return copy.deepcopy(doc)
    raise AssertionError(f"no {kind} {name} in {CLUSTER_EXAMPLE}")


def seed_pods(namespace: str) -> list[dict[str, Any]]:
    """The seed pods of the release notes (with the container names and images the example added),
    in ``namespace``."""
    pods = [d for d in yaml.safe_load_all(SEED_PODS.read_text()) if isinstance(d, dict)]
    assert [p["metadata"]["name"] for p in pods] == SEEDS
    for p in pods:
        p["metadata"]["namespace"] = namespace
        p["metadata"].setdefault("labels", {})["koordsched.io/e2e"] = "true"
        p["spec"]["terminationGracePeriodSeconds"] = 0
    return pods


@contextlib.asynccontextmanager
async def gpu_nodes(
    api: Api, cluster: Cluster, examples: dict[str, str]
) -> AsyncIterator[dict[str, tuple[str, dict[str, Any]]]]:
    """Node + Device + NodeResourceTopology for each ``short -> example node``, renamed after the
    test; yields ``short -> (node name, Device CR)``, and deletes the custom resources on the way
    out (the cluster fixture deletes the nodes)."""
    created: list[str] = []
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    try:
        for short, example in examples.items():
            name = cluster.node_name(short)
            node = example_objects("Node", example)
            node["metadata"]["name"] = name
            node["metadata"]["labels"].update({"kubernetes.io/hostname": name, "koordsched.io/e2e": "true"})
            await api.create_node(node)
            cluster.nodes.append(name)
            # Node status is accepted on create (the node strategy keeps it): check, since the
            # whole test rests on allocatable koordinator.sh/* being there.
            got = await api.get(f"/api/v1/nodes/{name}")
            assert got["status"]["allocatable"] == node["status"]["allocatable"], got["status"]

            device: dict[str, Any] = {}
            for kind in ("Device", "NodeResourceTopology"):
                obj = example_objects(kind, example)
                obj["metadata"]["name"] = name  # both are named after their node
                obj["metadata"].setdefault("labels", {})["koordsched.io/e2e"] = "true"
                await api.post(COLLECTIONS[kind], obj)
                created.append(f"{COLLECTIONS[kind]}/{name}")
                if kind == "Device":
                    device = obj
            out[short] = (name, device)
        yield out
    finally:
        for path in created:
            with contextlib.suppress(ApiError):
                await api.delete(path)


def gpu_pod(namespace: str, name: str, node: str, requests: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"koordsched.io/e2e": "true"}},
        "spec": {
            "schedulerName": "koord-scheduler",
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.2",
                    "resources": {"requests": dict(requests), "limits": dict(requests)},
                }
            ],
        },
    }


# --- reading the annotations -------------------------------------------------------------------------


def annotation(pod: dict[str, Any], key: str) -> Any:
    raw = (pod["metadata"].get("annotations") or {}).get(key)
    assert raw is not None, (
        f"{pod['metadata']['name']}: no {key} annotation: {pod['metadata'].get('annotations')}"
    )
    return json.loads(raw)


def devices_of(device_cr: dict[str, Any], type_: str) -> dict[int, dict[str, Any]]:
    """minor -> device entry of the Device CR."""
    return {d["minor"]: d for d in device_cr["spec"]["devices"] if d["type"] == type_}


def q(value: str) -> Fraction:
    return parse_quantity(value)


def check_gpus(
    who: str, allocated: list[dict[str, Any]], device_cr: dict[str, Any], core: int
) -> list[dict[str, Any]]:
    """Each allocated GPU names a GPU of the Device CR (minor and UUID), once, with core = ratio =
    ``core`` and the matching share of that GPU's memory; returns the Device CR entries."""
    gpus = devices_of(device_cr, "gpu")
    minors = [a["minor"] for a in allocated]
    assert len(set(minors)) == len(minors), f"{who}: a GPU minor given twice: {allocated}"
    entries = []
    for a in allocated:
        assert a["minor"] in gpus, f"{who}: GPU minor {a['minor']} is not in the Device CR"
        dev = gpus[a["minor"]]
        assert a.get("id") == dev["id"], (
            f"{who}: minor {a['minor']} has id {a.get('id')}, Device CR {dev['id']}"
        )
        res = a["resources"]
        assert set(res) == {GPU_CORE, GPU_RATIO, GPU_MEMORY}, f"{who}: {res}"
        assert q(res[GPU_CORE]) == core and q(res[GPU_RATIO]) == core, f"{who}: {res}"
        assert q(res[GPU_MEMORY]) == q(dev["resources"][GPU_MEMORY]) * core / 100, f"{who}: {res}"
        entries.append(dev)
    return entries


def gpu_usage(pods: list[dict[str, Any]]) -> dict[str, Counter[int]]:
    """node -> minor -> gpu-core allocated there, from the annotations of the pods bound to it."""
    out: dict[str, Counter[int]] = {}
    for p in pods:
        node = node_of(p)
        ann = (p["metadata"].get("annotations") or {}).get(DEVICE_ALLOCATED)
        if not node or not ann:
            continue
        for a in json.loads(ann).get("gpu") or ():
            out.setdefault(node, Counter())[a["minor"]] += int(q(a["resources"][GPU_CORE]))
    return out


def assert_no_gpu_oversubscribed(pods: list[dict[str, Any]]) -> None:
    for node, used in gpu_usage(pods).items():
        over = {m: c for m, c in used.items() if c > 100}
        assert not over, f"{node}: GPU minors given beyond 100% gpu-core: {over}"


# --- the test ----------------------------------------------------------------------------------------


async def test_seed_pods_get_devices_and_a_restarted_scheduler_keeps_them(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path, audit_log: AuditLog
) -> None:
    await install_crds(api)
    lease = await own_lease(api, cluster)
    profile = write_profile(tmp_path / "profile.yaml", lease_name=lease)

    async with gpu_nodes(api, cluster, {"h800": "gpu-h800-1", "l20": "gpu-l20-0"}) as nodes:
        h800, h800_cr = nodes["h800"]
        l20, l20_cr = nodes["l20"]
        device_cr = {h800: h800_cr, l20: l20_cr}
        for p in seed_pods(cluster.ns):
            await api.create_pod(p)

        mark = audit_log.mark()
        async with scheduler_in_process(profile, scheduler_kubeconfig) as sched:
            await cluster.wait_bound(SEEDS, timeout=BIND_TIMEOUT)
            sched.assert_running()
            assert sched.problems() == [], sched.log_text()
        # One binding each, by the scheduler, accepted: the annotations came with it (or before).
        binds = audit_log.bindings(cluster.ns, since=mark)
        assert sorted((b.name, b.user, b.code) for b in binds) == [
            (n, SCHEDULER_USER, 201) for n in sorted(SEEDS)
        ]

        # Read back from the API server, not from the scheduler.
        pods = {n: await cluster.get_pod(n) for n in SEEDS}
        for n, p in pods.items():
            c = condition(p)
            assert c is not None and c["status"] == "True", (n, p["status"])

        # 1. Restricted NUMA policy: the L20 node's own policy (SingleNUMANode) does not match, so
        #    the H800 node; 2 whole GPUs on one NUMA node, and its CPU and memory on that node too.
        p = pods[RESTRICTED]
        assert node_of(p) == h800, (node_of(p), p["status"])
        alloc = annotation(p, DEVICE_ALLOCATED)
        assert set(alloc) == {"gpu"}, alloc
        assert len(alloc["gpu"]) == 2, alloc
        entries = check_gpus(RESTRICTED, alloc["gpu"], h800_cr, 100)
        numa = {e["topology"]["nodeID"] for e in entries}
        assert len(numa) == 1, f"{RESTRICTED}: GPUs on NUMA nodes {numa}: {alloc}"
        status = annotation(p, RESOURCE_STATUS)
        zones = status.get("numaNodeResources")
        assert isinstance(zones, list) and len(zones) == 1, status
        assert zones[0]["node"] in numa, (
            f"{RESTRICTED}: CPU/memory on NUMA {zones[0]['node']}, GPUs on {numa}"
        )
        assert {k: q(v) for k, v in zones[0]["resources"].items()} == {"cpu": 64, "memory": q("500Gi")}, (
            status
        )

        # 2. GPU + RDMA jointly: one whole GPU and one NIC on the same PCIe switch, one VF of it.
        p = pods[VF01]
        node = node_of(p)
        assert node in device_cr, node
        alloc = annotation(p, DEVICE_ALLOCATED)
        assert set(alloc) == {"gpu", "rdma"}, alloc
        assert len(alloc["gpu"]) == 1 and len(alloc["rdma"]) == 1, alloc
        (gpu,) = check_gpus(VF01, alloc["gpu"], device_cr[node], 100)
        nic_alloc = alloc["rdma"][0]
        nics = devices_of(device_cr[node], "rdma")
        assert nic_alloc["minor"] in nics, alloc
        nic = nics[nic_alloc["minor"]]
        assert nic_alloc.get("id") == nic["id"], (nic_alloc, nic["id"])
        assert nic["topology"]["pcieID"] == gpu["topology"]["pcieID"], (
            f"{VF01}: GPU on {gpu['topology']['pcieID']}, NIC on {nic['topology']['pcieID']}"
        )
        assert q(nic_alloc["resources"][RDMA]) > 0, nic_alloc
        vfs = (nic_alloc.get("extension") or {}).get("vfs")
        assert isinstance(vfs, list) and len(vfs) == 1, nic_alloc
        nic_vfs = {vf["busID"] for g in nic["vfGroups"] for vf in g["vfs"]}
        assert vfs[0]["busID"] in nic_vfs, (vfs, sorted(nic_vfs))

        # 3. Half of one GPU (gpu-shared read as gpu.shared): core = ratio = 50, half its memory.
        p = pods[SHARED]
        node = node_of(p)
        assert node in device_cr, node
        alloc = annotation(p, DEVICE_ALLOCATED)
        assert set(alloc) == {"gpu"} and len(alloc["gpu"]) == 1, alloc
        check_gpus(SHARED, alloc["gpu"], device_cr[node], 50)

        seeded = list(pods.values())
        assert_no_gpu_oversubscribed(seeded)

        # --- restart: a new scheduler knows the used GPUs only from the annotations ---
        used = gpu_usage(seeded)[h800]
        free = sorted(set(devices_of(h800_cr, "gpu")) - set(used))
        assert 0 < len(free) < 8, (used, free)
        mark = audit_log.mark()
        async with scheduler_in_process(profile, scheduler_kubeconfig) as sched:
            # Exactly the whole GPUs left on the H800 node. koordinator.sh/gpu is also counted by
            # NodeResourcesFit from the pods' requests, which leaves room for it either way; only
            # the rebuilt device state keeps it off the minors that are taken.
            await api.create_pod(
                gpu_pod(cluster.ns, "rest-of-h800", h800, {"koordinator.sh/gpu": str(100 * len(free))})
            )
            rest = (await cluster.wait_bound(["rest-of-h800"], timeout=BIND_TIMEOUT))["rest-of-h800"]
            assert node_of(rest) == h800
            alloc = annotation(rest, DEVICE_ALLOCATED)
            assert set(alloc) == {"gpu"}, alloc
            check_gpus("rest-of-h800", alloc["gpu"], h800_cr, 100)
            got = sorted(a["minor"] for a in alloc["gpu"])
            assert got == free, f"rest-of-h800 got GPU minors {got}; free were {free}, taken {dict(used)}"

            # One more whole GPU, asked as gpu-core + gpu-memory-ratio, which no bound pod
            # requests: NodeResourcesFit has room for it, so only DeviceShare can refuse it.
            await api.create_pod(
                gpu_pod(cluster.ns, "one-too-many", h800, {GPU_CORE: "100", GPU_RATIO: "100"})
            )
            pending = await cluster.wait_condition(
                "one-too-many", "False", "Unschedulable", timeout=BIND_TIMEOUT
            )
            assert node_of(pending) is None
            message = (condition(pending) or {}).get("message", "")
            assert message.startswith("0/2 nodes are available: "), message
            assert "1 Insufficient GPU Devices" in message, message
            assert "1 node(s) didn't match Pod's node affinity/selector" in message, message

            sched.assert_running()
            assert sched.problems() == [], sched.log_text()

        binds = audit_log.bindings(cluster.ns, since=mark)
        assert [(b.name, b.code) for b in binds] == [("rest-of-h800", 201)]
        assert_no_gpu_oversubscribed(list((await cluster.pods()).values()))
