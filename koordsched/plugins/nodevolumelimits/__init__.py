"""NodeVolumeLimits: CSI volumes attached to a node stay within its drivers' limits (kube-scheduler)."""

from koordsched.plugins.nodevolumelimits.plugin import ERR_REASON_MAX_VOLUME_COUNT, NodeVolumeLimits

__all__ = ["ERR_REASON_MAX_VOLUME_COUNT", "NodeVolumeLimits"]
