"""VolumeBinding: claims bound, or bindable, on the node; PV/PVC binding in PreBind (kube-scheduler)."""

from koordsched.plugins.volumebinding.args import VolumeBindingArgs
from koordsched.plugins.volumebinding.binder import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
)
from koordsched.plugins.volumebinding.plugin import ERR_UNBOUND_IMMEDIATE, VolumeBinding
from koordsched.plugins.volumebinding.writer import VolumeBindingWriter

__all__ = [
    "ERR_REASON_BIND_CONFLICT",
    "ERR_REASON_NODE_CONFLICT",
    "ERR_REASON_NOT_ENOUGH_SPACE",
    "ERR_REASON_PV_NOT_EXIST",
    "ERR_UNBOUND_IMMEDIATE",
    "VolumeBinding",
    "VolumeBindingArgs",
    "VolumeBindingWriter",
]
