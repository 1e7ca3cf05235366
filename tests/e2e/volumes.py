"""Storage objects for the e2e tests, and the PV controller's part played by the test.

The test control plane runs no kube-controller-manager, so nothing answers the scheduler's
volume decisions. The tests play the PV controller (and the external provisioner) with the
writes those make, after checking the scheduler's own writes: a PV's ``claimRef`` (and
``pv.kubernetes.io/bound-by-controller``), or a claim's ``volume.kubernetes.io/selected-node``.
What is asserted is therefore the scheduler's decision and writes, and that it waits for the
binding to complete before it binds the pod.
"""

from __future__ import annotations

import contextlib
from typing import Any

from tests.e2e.helpers import Api, ApiError, node_of, pod, unique, wait_for

SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
HOSTNAME = "kubernetes.io/hostname"


def storage_class(name: str, provisioner: str = "kubernetes.io/no-provisioner") -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
    }


def local_pv(name: str, node: str, storage_class_name: str, size: str = "10Gi") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class_name,
            "persistentVolumeReclaimPolicy": "Retain",
            "local": {"path": "/mnt/disks/vol1"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
                    ]
                }
            },
        },
    }


def claim(namespace: str, name: str, storage_class_name: str, size: str = "5Gi") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class_name,
            "resources": {"requests": {"storage": size}},
        },
    }


def with_claim(pod: dict[str, Any], claim_name: str) -> dict[str, Any]:
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    return pod


class Storage:
    """Cluster-scoped storage objects a test created, removed (finalizers and all) at the end."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.classes: list[str] = []
        self.pvs: list[str] = []
        self.claims: list[str] = []

    async def add_claim(self, body: dict[str, Any]) -> dict[str, Any]:
        ns = body["metadata"]["namespace"]
        created: dict[str, Any] = await self.api.post(f"/api/v1/namespaces/{ns}/persistentvolumeclaims", body)
        self.claims.append(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{body['metadata']['name']}")
        return created

    async def add_class(self, body: dict[str, Any]) -> None:
        await self.api.post("/apis/storage.k8s.io/v1/storageclasses", body)
        self.classes.append(body["metadata"]["name"])

    async def add_pv(self, body: dict[str, Any], phase: str = "Available") -> dict[str, Any]:
        created: dict[str, Any] = await self.api.post("/api/v1/persistentvolumes", body)
        self.pvs.append(body["metadata"]["name"])
        # The PV controller marks a new PV Available (the API server leaves it Pending).
        created["status"] = {"phase": phase}
        out: dict[str, Any] = await self.api.put(
            f"/api/v1/persistentvolumes/{body['metadata']['name']}/status", created
        )
        return out

    async def cleanup(self) -> None:
        # No controller removes the protection finalizers here: drop them, then delete.
        for path in self.claims:
            with contextlib.suppress(ApiError):
                await self.api.patch(path, {"metadata": {"finalizers": None}})
                await self.api.delete(path, grace=None)
        for name in self.pvs:
            path = f"/api/v1/persistentvolumes/{name}"
            with contextlib.suppress(ApiError):
                await self.api.patch(path, {"metadata": {"finalizers": None}})
                await self.api.delete(path, grace=None)
        for name in self.classes:
            with contextlib.suppress(ApiError):
                await self.api.delete(f"/apis/storage.k8s.io/v1/storageclasses/{name}", grace=None)


async def wait_claim_ref(api: Api, pv_name: str, detail: Any = None) -> dict[str, Any]:
    """The PV once the scheduler has written a claimRef into it."""

    async def probe() -> dict[str, Any] | None:
        pv: dict[str, Any] = await api.get(f"/api/v1/persistentvolumes/{pv_name}")
        return pv if (pv.get("spec") or {}).get("claimRef") else None

    result: dict[str, Any] = await wait_for(probe, what=f"PV {pv_name} to get a claimRef", detail=detail)
    return result


async def complete_binding(api: Api, namespace: str, claim_name: str, pv_name: str) -> None:
    """What the PV controller does once a PV's claimRef names a claim: bind the claim to it."""
    await api.patch(
        f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim_name}",
        {
            "metadata": {"annotations": {BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"}},
            "spec": {"volumeName": pv_name},
        },
    )


async def wait_selected_node(api: Api, namespace: str, claim_name: str, detail: Any = None) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        pvc: dict[str, Any] = await api.get(
            f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim_name}"
        )
        return pvc if SELECTED_NODE in (pvc["metadata"].get("annotations") or {}) else None

    result: dict[str, Any] = await wait_for(
        probe, what=f"claim {claim_name} to get a selected node", detail=detail
    )
    return result


async def provision(api: Api, storage: Storage, pvc: dict[str, Any], storage_class_name: str) -> str:
    """What a provisioner and the PV controller do for a claim with a selected node: a PV on that
    node, bound to the claim. Returns the PV's name."""
    meta = pvc["metadata"]
    node = meta["annotations"][SELECTED_NODE]
    name = f"pvc-{meta['uid']}"
    body = local_pv(name, node, storage_class_name, size=pvc["spec"]["resources"]["requests"]["storage"])
    body["spec"]["claimRef"] = {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": meta["namespace"],
        "name": meta["name"],
        "uid": meta["uid"],
    }
    await storage.add_pv(body, phase="Bound")
    await complete_binding(api, meta["namespace"], meta["name"], name)
    return name


async def exercise_volume_writes(api: Api, namespace: str, node: str, storage: Storage) -> None:
    """Both of VolumeBinding's writes, each answered as the PV controller would, and the pods bound.

    ``local-pod`` gets a local PV on ``node`` (a PV patch); ``dyn-pod`` gets its claim provisioned
    (a claim patch). Cluster-scoped objects go into ``storage`` for cleanup.
    """
    local, dyn = unique("rbac-local"), unique("rbac-csi")
    await storage.add_class(storage_class(local))
    await storage.add_class(storage_class(dyn, provisioner="csi.e2e.example.com"))
    pv_name = unique("rbac-pv")
    await storage.add_pv(local_pv(pv_name, node, local))
    for name, sc in (("local-data", local), ("dyn-data", dyn)):
        await storage.add_claim(claim(namespace, name, sc))
    await api.create_pod(with_claim(pod(namespace, "local-pod", cpu="100m"), "local-data"))
    await wait_claim_ref(api, pv_name)
    await complete_binding(api, namespace, "local-data", pv_name)
    await api.create_pod(with_claim(pod(namespace, "dyn-pod", cpu="100m"), "dyn-data"))
    pvc = await wait_selected_node(api, namespace, "dyn-data")
    await provision(api, storage, pvc, dyn)

    async def bound() -> bool:
        pods = {p["metadata"]["name"]: p for p in await api.pods(namespace)}
        return all(node_of(pods.get(n, {})) for n in ("local-pod", "dyn-pod"))

    await wait_for(bound, what="the pods with claims to be bound")
