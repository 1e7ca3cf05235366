"""In-tree volume plugins migrated to CSI drivers: their names, and the CSI volume handle of a volume.

NodeVolumeLimits counts an in-tree volume (GCE PD, AWS EBS, Azure Disk, Cinder) against its CSI
driver's limit once the node's CSINode exists: migration of these plugins is GA (always on)
in kube-scheduler v1.28. The handles are what upstream's csi-translation-lib makes, so a volume
counted through an in-tree source and through its CSI PV is counted once.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

from koordsched.api.core import Volume
from koordsched.api.storage import PersistentVolume

GCE_PD: Final = "kubernetes.io/gce-pd"
AWS_EBS: Final = "kubernetes.io/aws-ebs"
AZURE_DISK: Final = "kubernetes.io/azure-disk"
CINDER: Final = "kubernetes.io/cinder"

#: In-tree plugin -> its CSI driver, for the plugins whose migration is on in v1.28.
CSI_DRIVER_OF: Final = {
    GCE_PD: "pd.csi.storage.gke.io",
    AWS_EBS: "ebs.csi.aws.com",
    AZURE_DISK: "disk.csi.azure.com",
    CINDER: "cinder.csi.openstack.org",
}

CSI_ATTACH_LIMIT_PREFIX: Final = "attachable-volumes-csi-"
_RESOURCE_NAME_LIMIT: Final = 63
_UNSPECIFIED: Final = "UNSPECIFIED"
_EBS_ID: Final = re.compile(r"^vol-[^/]*$")
_ZONE_LABELS: Final = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")


class TranslationError(ValueError):
    pass


def attach_limit_key(driver: str) -> str:
    """``GetCSIAttachLimitKey``: the node resource naming a driver's attach limit (hashed when long)."""
    if len(CSI_ATTACH_LIMIT_PREFIX) + len(driver) >= _RESOURCE_NAME_LIMIT:
        digest = hashlib.sha1(driver.encode(), usedforsecurity=False).hexdigest()[:16]
        return CSI_ATTACH_LIMIT_PREFIX + driver[:23] + digest
    return CSI_ATTACH_LIMIT_PREFIX + driver


def ebs_volume_id(kube_id: str) -> str:
    """``KubernetesVolumeIDToEBSVolumeID``: ``aws://zone/vol-123`` or ``vol-123`` -> ``vol-123``."""
    if not kube_id.startswith("aws://"):
        return kube_id
    rest = kube_id[len("aws://") :]
    path = rest.split("/", 1)[1] if "/" in rest else ""
    aws_id = path.strip("/")
    if not _EBS_ID.match(aws_id):
        raise TranslationError(f"Invalid format for AWS volume ({kube_id})")
    return aws_id


def _gce_handle(pd_name: str, zones: list[str]) -> str:
    if len(zones) > 1:
        region = zones[0].rsplit("-", 1)[0]
        return f"projects/{_UNSPECIFIED}/regions/{region}/disks/{pd_name}"
    zone = zones[0] if zones else _UNSPECIFIED
    return f"projects/{_UNSPECIFIED}/zones/{zone}/disks/{pd_name}"


def inline_plugin(v: Volume) -> str | None:
    """The in-tree plugin of a migratable inline volume, None for any other volume."""
    if v.gce_persistent_disk is not None:
        return GCE_PD
    if v.aws_elastic_block_store is not None:
        return AWS_EBS
    if v.azure_disk is not None:
        return AZURE_DISK
    if v.cinder is not None:
        return CINDER
    return None


def inline_handle(v: Volume) -> str:
    """The CSI volume handle of a migratable inline volume."""
    if v.gce_persistent_disk is not None:
        return _gce_handle(v.gce_persistent_disk.pd_name, [])
    if v.aws_elastic_block_store is not None:
        return ebs_volume_id(v.aws_elastic_block_store.volume_id)
    if v.azure_disk is not None:
        return v.azure_disk.disk_uri
    if v.cinder is not None:
        return v.cinder.volume_id
    raise TranslationError(f"volume {v.name!r} is not a migratable in-tree volume")


def pv_plugin(pv: PersistentVolume) -> str | None:
    spec = pv.spec
    if spec.gce_persistent_disk is not None:
        return GCE_PD
    if spec.aws_elastic_block_store is not None:
        return AWS_EBS
    if spec.azure_disk is not None:
        return AZURE_DISK
    if spec.cinder is not None:
        return CINDER
    return None


def pv_handle(pv: PersistentVolume) -> str:
    """The CSI volume handle of an in-tree PV (zones from the PV's labels, as the translation reads them)."""
    if pv.spec.gce_persistent_disk is not None:
        zones: list[str] = []
        for key in _ZONE_LABELS:
            value = pv.metadata.labels.get(key)
            if value:
                zones = [z for z in value.split("__") if z]
                break
        return _gce_handle(pv.spec.gce_persistent_disk.pd_name, zones)
    if pv.spec.aws_elastic_block_store is not None:
        return ebs_volume_id(pv.spec.aws_elastic_block_store.volume_id)
    if pv.spec.azure_disk is not None:
        return pv.spec.azure_disk.disk_uri
    if pv.spec.cinder is not None:
        return pv.spec.cinder.volume_id
    raise TranslationError(f"PersistentVolume {pv.metadata.name!r} is not a migratable in-tree volume")
