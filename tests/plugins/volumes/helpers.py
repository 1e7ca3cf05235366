"""Storage objects and a handle holding them, for the volume plugins' tests."""

from __future__ import annotations

from typing import Any

import msgspec

from koordsched.api.core import Pod
from koordsched.api.kinds import (
    CSI_DRIVERS,
    CSI_NODES,
    CSI_STORAGE_CAPACITIES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
)
from koordsched.api.storage import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from koordsched.framework.snapshot import Snapshot
from koordsched.observability.metrics import SchedulerMetrics
from tests.fakes import FakeHandle

HOSTNAME = "kubernetes.io/hostname"
NS = "default"


class StorageHandle(FakeHandle):
    """A FakeHandle that records into real metric families and stores storage objects by type."""

    def __init__(self, snapshot: Snapshot | None = None) -> None:
        super().__init__(snapshot)
        # Real families on a private registry: the tests read what the plugins record.
        self.sink = SchedulerMetrics()
        self._metrics = self.sink

    def stage_errors(self) -> dict[str, float]:
        """``scheduler_volume_scheduling_stage_error_total`` by operation, as exported."""
        out: dict[str, float] = {}
        for family in self.sink.registry.collect():
            if family.name == "scheduler_volume_scheduling_stage_error":
                for sample in family.samples:
                    if sample.name.endswith("_total"):
                        out[sample.labels["operation"]] = sample.value
        return out

    def add(self, obj: Any) -> Any:
        """Store a storage object under its kind (found from its type); returns it."""
        kind = {
            StorageClass: STORAGE_CLASSES,
            PersistentVolume: PERSISTENT_VOLUMES,
            PersistentVolumeClaim: PERSISTENT_VOLUME_CLAIMS,
            CSINode: CSI_NODES,
            CSIDriver: CSI_DRIVERS,
            CSIStorageCapacity: CSI_STORAGE_CAPACITIES,
        }[type(obj)]
        self.put(kind, obj)
        return obj


def sc(
    name: str,
    *,
    mode: str = "WaitForFirstConsumer",
    provisioner: str = "kubernetes.io/no-provisioner",
    topologies: list[dict[str, Any]] | None = None,
) -> StorageClass:
    body: dict[str, Any] = {"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode}
    if topologies is not None:
        body["allowedTopologies"] = topologies
    return msgspec.convert(body, StorageClass)


def pv(
    name: str,
    *,
    size: str = "10Gi",
    cls: str = "local",
    host: str | list[str] | None = None,
    modes: list[str] | None = None,
    labels: dict[str, str] | None = None,
    claim: PersistentVolumeClaim | None = None,
    phase: str = "Available",
    affinity: dict[str, Any] | None = None,
    deletion: str | None = None,
    **spec: Any,
) -> PersistentVolume:
    body: dict[str, Any] = {
        "metadata": {"name": name, "labels": labels or {}, "deletionTimestamp": deletion},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": modes or ["ReadWriteOnce"],
            "storageClassName": cls,
            **spec,
        },
        "status": {"phase": phase},
    }
    if host is not None:
        hosts = [host] if isinstance(host, str) else host
        affinity = {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": hosts}]}
            ]
        }
    if affinity is not None:
        body["spec"]["nodeAffinity"] = {"required": affinity}
    if claim is not None:
        m = claim.metadata
        body["spec"]["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "namespace": m.namespace,
            "name": m.name,
            "uid": m.uid,
        }
        body["status"]["phase"] = "Bound"
    return msgspec.convert(body, PersistentVolume)


def pvc(
    name: str,
    *,
    size: str = "5Gi",
    cls: str | None = "local",
    modes: list[str] | None = None,
    volume: str = "",
    bound: bool = False,
    annotations: dict[str, str] | None = None,
    selector: dict[str, Any] | None = None,
    owner_uid: str | None = None,
    phase: str = "",
    **meta: Any,
) -> PersistentVolumeClaim:
    ann = dict(annotations or {})
    if bound:
        ann["pv.kubernetes.io/bind-completed"] = "yes"
    spec: dict[str, Any] = {
        "accessModes": modes or ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
        "volumeName": volume,
    }
    if cls is not None:
        spec["storageClassName"] = cls
    if selector is not None:
        spec["selector"] = selector
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "uid": f"uid-{name}",
        "annotations": ann,
        **meta,
    }
    if owner_uid is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": owner_uid, "controller": True}
        ]
    return msgspec.convert(
        {"metadata": metadata, "spec": spec, "status": {"phase": phase}}, PersistentVolumeClaim
    )


def claim_pod(name: str, *claims: str, cpu: str = "100m", volumes: list[dict[str, Any]] | None = None) -> Pod:
    vols = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return msgspec.convert(
        {
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
                "volumes": vols + (volumes or []),
            },
        },
        Pod,
    )
