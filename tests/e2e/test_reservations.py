"""Reservations on a real apiserver, with exactly deploy/rbac.yaml's permissions.

A node with 8 GPUs (Node + Device CR). A Reservation of 4 GPUs for ``app=train`` is scheduled as
a reserve pod and becomes Available on the node, with the GPUs it holds in its
``device-allocated`` annotation. A pod that is no owner asking for all 8 GPUs stays pending. The
scheduler is restarted (the new one rebuilds what the Reservation holds from the objects); the
owner lands on the node with exactly the reserved minors and ``reservation-allocated`` naming
the Reservation, which then ends (allocateOnce: Succeeded). A second Reservation with a short
TTL takes the 4 GPUs left; a pod that is no owner waits until the TTL expires (Failed, Expired)
and then gets them.

The scheduler authenticates as the ServiceAccount deploy/rbac.yaml binds, so the Reservation
writes (annotations and status patches) are shown to be allowed and used, and nothing is
refused. Its own control plane with the CRDs installed, as test_devices.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.apiserver import REPO_ROOT, KubeEnv
from tests.e2e.conftest import RBAC_GROUPS, RBAC_USER, SCHEDULER_USER
from tests.e2e.fixtures import audited_control_plane
from tests.e2e.helpers import (
    LEASE_NAMESPACE,
    Api,
    AuditLog,
    Cluster,
    condition,
    node_of,
    scheduler_in_process,
    unique,
    wait_for,
    write_profile,
)
from tests.e2e.test_crd_smoke import COLLECTIONS, install_crds
from tests.e2e.test_rbac import LEASE_NAME, apply, manifests

pytestmark = pytest.mark.e2e

RESERVATIONS = COLLECTIONS["Reservation"]
RBAC_FILE = REPO_ROOT / "deploy" / "rbac.yaml"
SA_FILE = REPO_ROOT / "deploy" / "serviceaccount.yaml"
DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
RESERVATION_ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
TIMEOUT = 60.0
GPU_RESOURCES = {
    "koordinator.sh/gpu-core": "100",
    "koordinator.sh/gpu-memory-ratio": "100",
    "koordinator.sh/gpu-memory": "80Gi",
}


module_dir, audit_log, kube_env = audited_control_plane(
    "e2e-reservations", {SCHEDULER_USER: ["system:masters"], RBAC_USER: RBAC_GROUPS}, lease_namespace=True
)


def gpu_pod(ns: str, name: str, gpus: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    requests = {"cpu": "1", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"koordsched.io/e2e": "true", **(labels or {})},
        },
        "spec": {
            "schedulerName": "koord-scheduler",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.2",
                    "resources": {"requests": requests, "limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
        },
    }


def reservation(name: str, ns: str, owner_app: str, ttl: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name, "labels": {"koordsched.io/e2e": "true"}},
        "spec": {
            "template": {
                "metadata": {"namespace": ns},
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "containers": [
                        {
                            "name": "reserve",
                            "resources": {
                                "requests": {"cpu": "1", "nvidia.com/gpu": "4"},
                                "limits": {"nvidia.com/gpu": "4"},
                            },
                        }
                    ],
                },
            },
            "owners": [{"labelSelector": {"matchLabels": {"app": owner_app}}}],
            "ttl": ttl,
        },
    }


def minors(obj: dict[str, Any]) -> list[int]:
    raw = (obj["metadata"].get("annotations") or {}).get(DEVICE_ALLOCATED)
    assert raw, f"{obj['metadata']['name']}: no {DEVICE_ALLOCATED}: {obj['metadata'].get('annotations')}"
    return sorted(e["minor"] for e in json.loads(raw)["gpu"])


async def test_reserved_gpus_go_to_the_owner_and_expire(
    api: Api, cluster: Cluster, kube_env: KubeEnv, tmp_path: Path, audit_log: AuditLog
) -> None:
    await install_crds(api)
    objs = manifests(SA_FILE) + manifests(RBAC_FILE) if SA_FILE.is_file() else manifests(RBAC_FILE)
    applied = await apply(api, objs)
    node = cluster.node_name("gpu")
    created: list[str] = []
    try:
        await api.create_node(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": node,
                    "labels": {"kubernetes.io/hostname": node, "koordsched.io/e2e": "true"},
                },
                "status": {
                    "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "8"},
                    "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "8"},
                },
            }
        )
        cluster.nodes.append(node)
        device = {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Device",
            "metadata": {"name": node},
            "spec": {
                "devices": [
                    {"type": "gpu", "minor": m, "id": f"GPU-{m}", "health": True, "resources": GPU_RESOURCES}
                    for m in range(8)
                ]
            },
        }
        await api.post(COLLECTIONS["Device"], device)
        created.append(f"{COLLECTIONS['Device']}/{node}")
        train = unique("train")
        await api.post(RESERVATIONS, reservation(train, cluster.ns, "train", "1h"))
        created.append(f"{RESERVATIONS}/{train}")

        kubeconfig = tmp_path / "kubeconfig-rbac"
        kubeconfig.write_bytes(kube_env.kubeconfig_for(RBAC_USER).read_bytes())
        kubeconfig.chmod(0o600)
        # The Role in deploy/rbac.yaml allows this one Lease only.
        cluster.leases.append((LEASE_NAMESPACE, LEASE_NAME))
        await api.delete(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}")
        profile = write_profile(tmp_path / "profile.yaml", lease_name=LEASE_NAME)
        mark = audit_log.mark()
        async with scheduler_in_process(profile, kubeconfig) as sched:

            async def available(name: str) -> dict[str, Any] | None:
                r = await api.get(f"{RESERVATIONS}/{name}")
                return r if (r.get("status") or {}).get("phase") == "Available" else None

            r = await wait_for(
                lambda: available(train), timeout=TIMEOUT, what="the Reservation to be Available"
            )
            assert r["status"]["nodeName"] == node
            held = minors(r)
            assert len(held) == 4
            conds = {c["type"]: (c["status"], c["reason"]) for c in r["status"]["conditions"]}
            assert conds == {"Scheduled": ("True", "Scheduled"), "Ready": ("True", "Available")}

            async def scheduled_event() -> dict[str, Any] | None:
                events = (await api.get("/apis/events.k8s.io/v1/namespaces/kube-system/events"))["items"]
                mine = [e for e in events if (e.get("regarding") or {}).get("name") == train]
                return mine[0] if mine else None

            event = await wait_for(scheduled_event, timeout=TIMEOUT, what="the Reservation's Scheduled event")
            assert (event["reason"], event["note"]) == (
                "Scheduled",
                f"Successfully assigned {train} to {node}",
            )
            assert event["regarding"]["kind"] == "Reservation"

            # No owner: 8 GPUs do not fit, 4 of them are held.
            await api.create_pod(gpu_pod(cluster.ns, "hog", 8))
            pending = await cluster.wait_condition("hog", "False", "Unschedulable")
            assert "Insufficient" in condition(pending)["message"], condition(pending)
            sched.assert_running()
            assert sched.problems() == [], sched.log_text()

        # A restart: the new scheduler knows what the Reservation holds only from the objects.
        async with scheduler_in_process(profile, kubeconfig) as sched:
            # The owner: the reserved GPUs, exactly.
            await api.create_pod(gpu_pod(cluster.ns, "train-0", 4, {"app": "train"}))
            pods = await cluster.wait_bound(["train-0"], timeout=TIMEOUT)
            owner = pods["train-0"]
            assert node_of(owner) == node
            assert minors(owner) == held
            allocated = json.loads(owner["metadata"]["annotations"][RESERVATION_ALLOCATED])
            assert allocated == {"name": train, "uid": r["metadata"]["uid"]}

            async def ended() -> dict[str, Any] | None:
                got = await api.get(f"{RESERVATIONS}/{train}")
                return got if (got.get("status") or {}).get("phase") == "Succeeded" else None

            done = await wait_for(ended, timeout=TIMEOUT, what="the allocateOnce Reservation to end")
            assert [o["name"] for o in done["status"]["currentOwners"]] == ["train-0"]

            # A short TTL: it takes the 4 GPUs left, a pod that is no owner gets them once it expires.
            await cluster.delete_pod("hog")
            short = unique("short")
            await api.post(RESERVATIONS, reservation(short, cluster.ns, "nobody", "20s"))
            created.append(f"{RESERVATIONS}/{short}")
            r2 = await wait_for(lambda: available(short), timeout=TIMEOUT, what="the short Reservation")
            assert set(minors(r2)).isdisjoint(held)
            await api.create_pod(gpu_pod(cluster.ns, "late", 4))
            await cluster.wait_condition("late", "False", "Unschedulable")
            pods = await cluster.wait_bound(["late"], timeout=TIMEOUT)
            assert minors(pods["late"]) == minors(r2)
            failed = await api.get(f"{RESERVATIONS}/{short}")
            assert failed["status"]["phase"] == "Failed"
            ready = [c for c in failed["status"]["conditions"] if c["type"] == "Ready"]
            assert [(c["status"], c["reason"]) for c in ready] == [("False", "Expired")]
            sched.assert_running()
            assert sched.problems() == [], sched.log_text()
        mine = [e for e in audit_log.events(mark) if e.user == RBAC_USER]
        assert [(e.verb, e.uri, e.code) for e in mine if e.code == 403] == []
        writes = {(e.verb, e.resource, e.subresource) for e in mine if 200 <= e.code < 300}
        assert ("patch", "reservations", "") in writes, sorted(writes)
        assert ("patch", "reservations", "status") in writes, sorted(writes)
        assert ("create", "pods", "binding") in writes
    finally:
        for path in created:
            await api.delete(path)
        for path in reversed(applied):
            await api.delete(path, grace=None)


def test_rbac_file_names_the_reservation_writes() -> None:
    role = next(o for o in yaml.safe_load_all(RBAC_FILE.read_text()) if o and o["kind"] == "ClusterRole")
    verbs = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    assert {("reservations", "patch"), ("reservations/status", "patch")} <= verbs
