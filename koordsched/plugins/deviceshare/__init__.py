"""DeviceShare: Koordinator's device plugin (GPUs, RDMA, FPGA), with batch Filter and Score kernels.

Besides the plugin, what others may read of devices as DeviceShare reads them: the GPUs of
the Device CRs among some objects and what a pod holds (the simulator's fragmentation report).
"""

from koordsched.plugins.deviceshare.adaption import DEVICE_PLUGIN_ADAPTION
from koordsched.plugins.deviceshare.allocation import PodAllocations, pod_allocations
from koordsched.plugins.deviceshare.args import DeviceShareArgs
from koordsched.plugins.deviceshare.kernels import warm_up as warm_up_kernels
from koordsched.plugins.deviceshare.model import GpuCapacities, gpu_capacities
from koordsched.plugins.deviceshare.plugin import DeviceShare, SharedGPUAdvisor
from koordsched.plugins.deviceshare.requests import (
    DeviceRequestError,
    calc_gpu_per_instance,
    get_pod_device_requests,
)
from koordsched.plugins.deviceshare.rows import DeviceRows
from koordsched.plugins.deviceshare.store import DeviceStore

__all__ = [
    "DEVICE_PLUGIN_ADAPTION",
    "DeviceRequestError",
    "DeviceRows",
    "DeviceShare",
    "DeviceShareArgs",
    "DeviceStore",
    "GpuCapacities",
    "PodAllocations",
    "SharedGPUAdvisor",
    "calc_gpu_per_instance",
    "get_pod_device_requests",
    "gpu_capacities",
    "pod_allocations",
    "warm_up_kernels",
]
