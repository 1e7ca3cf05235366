"""DeviceShare: Koordinator's device plugin (GPUs, RDMA, FPGA), with batch Filter and Score kernels."""

from koordsched.plugins.deviceshare.args import DeviceShareArgs
from koordsched.plugins.deviceshare.kernels import warm_up as warm_up_kernels
from koordsched.plugins.deviceshare.plugin import DeviceShare

__all__ = ["DeviceShare", "DeviceShareArgs", "warm_up_kernels"]
