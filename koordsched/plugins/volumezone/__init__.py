"""VolumeZone: a pod's bound volumes' zone and region labels must match the node (kube-scheduler's plugin)."""

from koordsched.plugins.volumezone.plugin import ERR_REASON_CONFLICT, VolumeZone

__all__ = ["ERR_REASON_CONFLICT", "VolumeZone"]
