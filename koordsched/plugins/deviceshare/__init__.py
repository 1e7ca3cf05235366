"""DeviceShare: Koordinator's device plugin (GPUs, RDMA, FPGA), with batch Filter and Score kernels.

Besides the plugin, what others may read of devices as DeviceShare reads them: the GPUs of
the Device CRs among some objects and what a pod holds (the simulator's fragmentation report).
"""

from koordsched.plugins.deviceshare.allocation import PodAllocations, pod_allocations
from koordsched.plugins.deviceshare.args import DeviceShareArgs
from koordsched.plugins.deviceshare.kernels import warm_up as warm_up_kernels
from koordsched.plugins.deviceshare.model import GpuCapacities, gpu_capacities
from koordsched.plugins.deviceshare.plugin import DeviceShare

__all__ = [
    "DeviceShare",
    "DeviceShareArgs",
    "GpuCapacities",
    "PodAllocations",
    "gpu_capacities",
    "pod_allocations",
    "warm_up_kernels",
]
