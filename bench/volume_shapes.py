"""The PV shape of the decision benchmark: pods with bound and WaitForFirstConsumer claims.

Nodes as in SchedulingBasic (32 CPU, 256Gi, 110 pods, a hostname label). One StorageClass
``local`` (``kubernetes.io/no-provisioner``, WaitForFirstConsumer) and local PVs pinned to their
node by hostname, as local-volume provisioners create them:

* every node has one Available 100Gi PV;
* half the pods (even ones) use a claim already bound to a PV of its own on node ``i mod nodes``
  (VolumeBinding narrows the pod to that node at PreFilter);
* the other half use an unbound 10Gi claim: VolumeBinding finds a free local PV per node,
  and the pod takes it (the simulator plays the PV controller), so no two pods share a PV.

Pods ask for 100m CPU and 500Mi. :func:`check` verifies the outcome: every pod scheduled, each
bound-claim pod on its PV's node, every other claim on a distinct PV on its pod's node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from koordsched.api.core import Node, Pod
from koordsched.api.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from koordsched.backends.sim.loader import Cluster, LoadedObject

HOSTNAME = "kubernetes.io/hostname"
NAMESPACE = "pv-ns"
CLASS = "local"


def _add(cluster: Cluster, kind: str, key: str, obj: Any, role: str = "object") -> None:
    cluster.objects.append(LoadedObject(kind, key, obj, role, "bench"))  # type: ignore[arg-type]


def _pv(name: str, node: str, size: str, claim: str | None = None) -> PersistentVolume:
    spec: dict[str, Any] = {
        "capacity": {"storage": size},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": CLASS,
        "nodeAffinity": {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
                ]
            }
        },
    }
    if claim is not None:
        spec["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "namespace": NAMESPACE,
            "name": claim,
            "uid": f"uid-{claim}",
        }
    return msgspec.convert({"metadata": {"name": name}, "spec": spec}, PersistentVolume)


def _claim(name: str, size: str, volume: str = "") -> PersistentVolumeClaim:
    return msgspec.convert(
        {
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": CLASS,
                "resources": {"requests": {"storage": size}},
                "volumeName": volume,
            },
        },
        PersistentVolumeClaim,
    )


def pv_shape(nodes: int, pods: int) -> Cluster:
    cluster = Cluster()
    sc = msgspec.convert(
        {
            "metadata": {"name": CLASS},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        StorageClass,
    )
    _add(cluster, "StorageClass", CLASS, sc)
    alloc = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    for i in range(nodes):
        name = f"node-{i}"
        node = msgspec.convert(
            {
                "metadata": {"name": name, "labels": {HOSTNAME: name}},
                "status": {"allocatable": alloc, "capacity": alloc},
            },
            Node,
        )
        _add(cluster, "Node", name, node, "node")
        _add(cluster, "PersistentVolume", f"local-{i}", _pv(f"local-{i}", name, "100Gi"))
    for i in range(pods):
        claim = f"data-{i}"
        if i % 2 == 0:
            pv_name = f"bound-{i}"
            _add(cluster, "PersistentVolume", pv_name, _pv(pv_name, f"node-{i % nodes}", "10Gi", claim))
            _add(cluster, "PersistentVolumeClaim", f"{NAMESPACE}/{claim}", _claim(claim, "10Gi", pv_name))
        else:
            _add(cluster, "PersistentVolumeClaim", f"{NAMESPACE}/{claim}", _claim(claim, "10Gi"))
        pod = msgspec.convert(
            {
                "metadata": {"name": f"pv-pod-{i}", "namespace": NAMESPACE, "uid": f"uid-pod-{i}"},
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "containers": [
                        {"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}
                    ],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
                },
            },
            Pod,
        )
        _add(cluster, "Pod", f"{NAMESPACE}/pv-pod-{i}", pod, "pod")
    return cluster


SHAPES: dict[str, Callable[[int, int], Cluster]] = {"pv": pv_shape}


def check(nodes: int, placements: dict[str, str | None], volumes: list[Any]) -> dict[str, Any]:
    """How many pods are not where the shape requires (0 when all is well)."""
    pv_of = {v.claim: v.pv for v in volumes}
    misplaced = 0
    taken: set[str] = set()
    for key, node in placements.items():
        i = int(key.rsplit("-", 1)[1])
        pv = pv_of.get(f"{NAMESPACE}/data-{i}")
        if node is None or pv is None:
            misplaced += 1
            continue
        if i % 2 == 0:
            ok = node == f"node-{i % nodes}"
        else:
            ok = pv not in taken and pv == f"local-{node.rsplit('-', 1)[1]}"
        misplaced += 0 if ok else 1
        taken.add(pv)
    return {"misplaced": misplaced}
