"""VolumeRestrictions: in-tree disk conflicts and ReadWriteOncePod claims (kube-scheduler's plugin)."""

from koordsched.plugins.volumerestrictions.plugin import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_RWOP_CONFLICT,
    VolumeRestrictions,
)

__all__ = ["ERR_REASON_DISK_CONFLICT", "ERR_REASON_RWOP_CONFLICT", "VolumeRestrictions"]
