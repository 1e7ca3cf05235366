"""Which in-tree disks two pods cannot share (upstream's ``isVolumeConflict``)."""

from __future__ import annotations

from koordsched.api.core import Pod, Volume


def is_conflict_volume(v: Volume) -> bool:
    """The volume types whose conflicts VolumeRestrictions checks."""
    return (
        v.gce_persistent_disk is not None
        or v.aws_elastic_block_store is not None
        or v.rbd is not None
        or v.iscsi is not None
    )


def conflicts(v: Volume, other: Pod) -> bool:
    """Whether ``v`` cannot be mounted on a node where ``other`` runs.

    A GCE PD, an iSCSI volume (same IQN) or an RBD image (same pool and image, an overlapping
    monitor) may be shared only when every mount is read-only; an EBS volume never.
    """
    for e in other.spec.volumes:
        gce, egce = v.gce_persistent_disk, e.gce_persistent_disk
        if (
            gce is not None
            and egce is not None
            and gce.pd_name == egce.pd_name
            and not (gce.read_only and egce.read_only)
        ):
            return True
        ebs, eebs = v.aws_elastic_block_store, e.aws_elastic_block_store
        if ebs is not None and eebs is not None and ebs.volume_id == eebs.volume_id:
            return True
        iscsi, eiscsi = v.iscsi, e.iscsi
        if (
            iscsi is not None
            and eiscsi is not None
            and iscsi.iqn == eiscsi.iqn
            and not (iscsi.read_only and eiscsi.read_only)
        ):
            return True
        rbd, erbd = v.rbd, e.rbd
        if (
            rbd is not None
            and erbd is not None
            and (
                set(rbd.monitors) & set(erbd.monitors)
                and rbd.pool == erbd.pool
                and rbd.image == erbd.image
                and not (rbd.read_only and erbd.read_only)
            )
        ):
            return True
    return False
