"""The storage objects kube-scheduler's volume plugins read: StorageClass, PersistentVolume(Claim),
CSINode, CSIDriver and CSIStorageCapacity.

Only the fields VolumeBinding, VolumeZone, VolumeRestrictions and NodeVolumeLimits read are
declared. Each kind has a ``check_*`` run once per object where it enters (the simulator's
loader, ``EventHandlers.on_object``): a quantity or selector the API server would refuse is
reported naming the object and field, and the object is set aside alone.
"""

from __future__ import annotations

from typing import Final

import msgspec

from koordsched.api.core import LabelSelector, NodeSelector, ObjectMeta, Quantity, ResourceList
from koordsched.api.field_errors import Refused, invalid, invalid_object, not_supported, required
from koordsched.api.quantity import QuantityError, int_value_int64, parse_quantity
from koordsched.api.selectors import (
    SelectorError,
    match_node_selector,
    validate_label_selector,
    validate_node_selector,
)

__all__ = [
    "ANN_BIND_COMPLETED",
    "ANN_BOUND_BY_CONTROLLER",
    "ANN_SELECTED_NODE",
    "BINDING_IMMEDIATE",
    "BINDING_WAIT_FOR_FIRST_CONSUMER",
    "CSIDriver",
    "CSINode",
    "CSIStorageCapacity",
    "ClaimReference",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
    "check_csi_node",
    "check_csi_storage_capacity",
    "check_persistent_volume",
    "check_persistent_volume_claim",
    "check_storage_class",
    "claim_request_bytes",
    "pv_capacity_bytes",
]

BINDING_IMMEDIATE: Final = "Immediate"
BINDING_WAIT_FOR_FIRST_CONSUMER: Final = "WaitForFirstConsumer"
BINDING_MODES: Final = (BINDING_IMMEDIATE, BINDING_WAIT_FOR_FIRST_CONSUMER)

#: Set by the PV controller on a claim once its binding is complete.
ANN_BIND_COMPLETED: Final = "pv.kubernetes.io/bind-completed"
#: Set on a PV (and claim) whose binding a controller (or the scheduler) made.
ANN_BOUND_BY_CONTROLLER: Final = "pv.kubernetes.io/bound-by-controller"
#: The node the scheduler chose for a claim to be provisioned on (read by the external provisioner).
ANN_SELECTED_NODE: Final = "volume.kubernetes.io/selected-node"

ACCESS_MODES: Final = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")


class _Base(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    pass


# --- StorageClass ------------------------------------------------------------------------------


class TopologySelectorLabelRequirement(_Base):
    key: str = ""
    values: list[str] = []


class TopologySelectorTerm(_Base):
    match_label_expressions: list[TopologySelectorLabelRequirement] = []


class StorageClass(_Base):
    api_version: str = "storage.k8s.io/v1"
    kind: str = "StorageClass"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    provisioner: str = ""
    #: The API server defaults it to Immediate.
    volume_binding_mode: str = BINDING_IMMEDIATE
    allowed_topologies: list[TopologySelectorTerm] = []
    parameters: dict[str, str] = {}


# --- PersistentVolume ----------------------------------------------------------------------------


class ClaimReference(_Base):
    """``spec.claimRef`` of a PV (an ObjectReference)."""

    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    api_version: str = ""
    resource_version: str = ""


class VolumeNodeAffinity(_Base):
    required: NodeSelector | None = None


class CSIPersistentVolumeSource(_Base):
    driver: str = ""
    volume_handle: str = ""
    read_only: bool = False


class GCEPersistentDiskVolumeSource(_Base):
    pd_name: str = ""
    fs_type: str = ""
    partition: int = 0
    read_only: bool = False


class AWSElasticBlockStoreVolumeSource(_Base):
    volume_id: str = msgspec.field(default="", name="volumeID")
    fs_type: str = ""
    partition: int = 0
    read_only: bool = False


class AzureDiskVolumeSource(_Base):
    disk_name: str = ""
    disk_uri: str = msgspec.field(default="", name="diskURI")


class CinderPersistentVolumeSource(_Base):
    volume_id: str = msgspec.field(default="", name="volumeID")


class PersistentVolumeSpec(_Base):
    capacity: ResourceList = {}
    access_modes: list[str] = []
    claim_ref: ClaimReference | None = None
    storage_class_name: str = ""
    node_affinity: VolumeNodeAffinity | None = None
    #: The API server defaults it to Filesystem.
    volume_mode: str = "Filesystem"
    persistent_volume_reclaim_policy: str = ""
    csi: CSIPersistentVolumeSource | None = None
    gce_persistent_disk: GCEPersistentDiskVolumeSource | None = None
    aws_elastic_block_store: AWSElasticBlockStoreVolumeSource | None = None
    azure_disk: AzureDiskVolumeSource | None = None
    cinder: CinderPersistentVolumeSource | None = None


class PersistentVolumeStatus(_Base):
    phase: str = ""


class PersistentVolume(_Base):
    api_version: str = "v1"
    kind: str = "PersistentVolume"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PersistentVolumeSpec = msgspec.field(default_factory=PersistentVolumeSpec)
    status: PersistentVolumeStatus = msgspec.field(default_factory=PersistentVolumeStatus)


# --- PersistentVolumeClaim -----------------------------------------------------------------------


class VolumeResourceRequirements(_Base):
    requests: ResourceList = {}
    limits: ResourceList = {}


class PersistentVolumeClaimSpec(_Base):
    access_modes: list[str] = []
    selector: LabelSelector | None = None
    resources: VolumeResourceRequirements = msgspec.field(default_factory=VolumeResourceRequirements)
    volume_name: str = ""
    #: None: the cluster's default class (the admission plugin fills it in); "": no class.
    storage_class_name: str | None = None
    volume_mode: str = "Filesystem"


class PersistentVolumeClaimStatus(_Base):
    phase: str = ""
    access_modes: list[str] = []
    capacity: ResourceList = {}


class PersistentVolumeClaim(_Base):
    api_version: str = "v1"
    kind: str = "PersistentVolumeClaim"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PersistentVolumeClaimSpec = msgspec.field(default_factory=PersistentVolumeClaimSpec)
    status: PersistentVolumeClaimStatus = msgspec.field(default_factory=PersistentVolumeClaimStatus)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"


# --- CSI ------------------------------------------------------------------------------------------


class VolumeNodeResources(_Base):
    count: int | None = None


class CSINodeDriver(_Base):
    name: str = ""
    node_id: str = msgspec.field(default="", name="nodeID")
    topology_keys: list[str] = []
    allocatable: VolumeNodeResources | None = None


class CSINodeSpec(_Base):
    drivers: list[CSINodeDriver] = []


class CSINode(_Base):
    """One per node, named after it: its CSI drivers and how many volumes each can attach."""

    api_version: str = "storage.k8s.io/v1"
    kind: str = "CSINode"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: CSINodeSpec = msgspec.field(default_factory=CSINodeSpec)


class CSIDriverSpec(_Base):
    attach_required: bool | None = None
    #: The driver publishes CSIStorageCapacity objects: VolumeBinding checks them.
    storage_capacity: bool | None = None


class CSIDriver(_Base):
    api_version: str = "storage.k8s.io/v1"
    kind: str = "CSIDriver"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: CSIDriverSpec = msgspec.field(default_factory=CSIDriverSpec)


class CSIStorageCapacity(_Base):
    api_version: str = "storage.k8s.io/v1"
    kind: str = "CSIStorageCapacity"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    storage_class_name: str = ""
    node_topology: LabelSelector | None = None
    capacity: Quantity | None = None
    maximum_volume_size: Quantity | None = None


# --- sizes ----------------------------------------------------------------------------------------


def _bytes(q: Quantity | None) -> int | None:
    return None if q is None else int_value_int64(q)


def pv_capacity_bytes(pv: PersistentVolume) -> int:
    """``spec.capacity.storage`` in bytes (0 when absent: it then fits no claim asking for more)."""
    return _bytes(pv.spec.capacity.get("storage")) or 0


def claim_request_bytes(pvc: PersistentVolumeClaim) -> int:
    """``spec.resources.requests.storage`` in bytes (0 when absent)."""
    return _bytes(pvc.spec.resources.requests.get("storage")) or 0


def capacity_bytes(q: Quantity | None) -> int | None:
    """A CSIStorageCapacity quantity in bytes, None when not given."""
    return _bytes(q)


INT32_MAX = 2**31 - 1


# --- checks (once per object, where it enters) ------------------------------------------------------


def _quantity(errs: list[str], path: str, q: Quantity | None) -> None:
    if q is None:
        return
    try:
        # The sign of the exact value: "-100m" rounds up to 0 bytes but is refused all the same.
        if parse_quantity(q) < 0:
            errs.append(invalid(path, str(q), "must be greater than or equal to 0"))
            return
        int_value_int64(q)
    except QuantityError as exc:
        errs.append(invalid(path, str(q), str(exc)))


def _access_modes(errs: list[str], path: str, modes: list[str]) -> None:
    for i, m in enumerate(modes):
        if m not in ACCESS_MODES:
            errs.append(not_supported(f"{path}[{i}]", m, ACCESS_MODES))


def _raise(kind: str, name: str, errs: list[str]) -> None:
    if errs:
        raise Refused(invalid_object(kind, name, errs))


def check_storage_class(sc: StorageClass) -> None:
    errs: list[str] = []
    if not sc.provisioner:
        errs.append(required("provisioner"))
    if sc.volume_binding_mode not in BINDING_MODES:
        errs.append(not_supported("volumeBindingMode", sc.volume_binding_mode, BINDING_MODES))
    _raise("StorageClass", sc.metadata.name, errs)


def check_persistent_volume(pv: PersistentVolume) -> None:
    errs: list[str] = []
    _quantity(errs, "spec.capacity[storage]", pv.spec.capacity.get("storage"))
    if not pv.spec.access_modes:
        errs.append(required("spec.accessModes"))  # the API server's ValidatePersistentVolumeSpec
    _access_modes(errs, "spec.accessModes", pv.spec.access_modes)
    na = pv.spec.node_affinity
    if na is not None and na.required is not None:
        try:
            validate_node_selector(na.required)
        except SelectorError as exc:
            errs.append(invalid("spec.nodeAffinity.required", "", str(exc)))
    _raise("PersistentVolume", pv.metadata.name, errs)


def check_persistent_volume_claim(pvc: PersistentVolumeClaim) -> None:
    errs: list[str] = []
    _quantity(errs, "spec.resources.requests[storage]", pvc.spec.resources.requests.get("storage"))
    _access_modes(errs, "spec.accessModes", pvc.spec.access_modes)
    try:
        validate_label_selector(pvc.spec.selector)
    except SelectorError as exc:
        errs.append(invalid("spec.selector", "", str(exc)))
    _raise("PersistentVolumeClaim", pvc.metadata.name, errs)


def check_csi_node(node: CSINode) -> None:
    errs: list[str] = []
    for i, d in enumerate(node.spec.drivers):
        a = d.allocatable
        if a is not None and a.count is not None and a.count < 0:
            errs.append(
                invalid(f"spec.drivers[{i}].allocatable.count", a.count, "must be greater than or equal to 0")
            )
        elif a is not None and a.count is not None and a.count > INT32_MAX:
            # *int32 in the API: the API server cannot decode a larger number.
            errs.append(invalid(f"spec.drivers[{i}].allocatable.count", a.count, "must fit in int32"))
    _raise("CSINode", node.metadata.name, errs)


def check_csi_storage_capacity(cap: CSIStorageCapacity) -> None:
    errs: list[str] = []
    _quantity(errs, "capacity", cap.capacity)
    _quantity(errs, "maximumVolumeSize", cap.maximum_volume_size)
    try:
        validate_label_selector(cap.node_topology)
    except SelectorError as exc:
        errs.append(invalid("nodeTopology", "", str(exc)))
    _raise("CSIStorageCapacity", cap.metadata.name, errs)


# --- helpers the volume plugins share (upstream's storage helpers) --------------------------------

#: The beta annotation that named a claim's (and a PV's) class before ``storageClassName``.
ANN_BETA_STORAGE_CLASS: Final = "volume.beta.kubernetes.io/storage-class"


def claim_class(pvc: PersistentVolumeClaim) -> str:
    """``GetPersistentVolumeClaimClass``: the beta annotation, else ``spec.storageClassName``, else ""."""
    ann = pvc.metadata.annotations.get(ANN_BETA_STORAGE_CLASS)
    if ann is not None:
        return ann
    return pvc.spec.storage_class_name or ""


def pv_class(pv: PersistentVolume) -> str:
    """``GetPersistentVolumeClass``: the beta annotation, else ``spec.storageClassName``."""
    ann = pv.metadata.annotations.get(ANN_BETA_STORAGE_CLASS)
    return ann if ann is not None else pv.spec.storage_class_name


def ephemeral_claim_name(pod_name: str, volume_name: str) -> str:
    """The claim the ephemeral-volume controller creates for a pod's ``ephemeral`` volume."""
    return f"{pod_name}-{volume_name}"


def claim_not_found(name: str) -> str:
    """The API's NotFound message for a claim, as upstream's plugins report it."""
    return f'persistentvolumeclaim "{name}" not found'


def pv_not_found(name: str) -> str:
    return f'persistentvolume "{name}" not found'


def storage_class_not_found(name: str) -> str:
    return f'storageclass.storage.k8s.io "{name}" not found'


def is_bound_to_claim(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> bool:
    """``IsVolumeBoundToClaim``: the PV's claimRef names the claim (and its uid, when it has one)."""
    ref = pv.spec.claim_ref
    if ref is None or ref.name != pvc.metadata.name or ref.namespace != pvc.metadata.namespace:
        return False
    return not ref.uid or ref.uid == pvc.metadata.uid


def claim_fully_bound(pvc: PersistentVolumeClaim) -> bool:
    """``isPVCFullyBound``: a volume name and the PV controller's bind-completed annotation."""
    return bool(pvc.spec.volume_name) and ANN_BIND_COMPLETED in pvc.metadata.annotations


def pv_node_affinity_matches(pv: PersistentVolume, labels: dict[str, str]) -> bool:
    """``CheckNodeAffinity``: the PV's required node affinity holds for these node labels.

    Upstream builds a node with the labels only, so ``matchFields`` (metadata.name) match no node.
    """
    na = pv.spec.node_affinity
    if na is None or na.required is None:
        return True
    return match_node_selector(na.required, labels, "")
