"""GPUFragmentation (koordsched): fragmentation-aware GPU placement over the workload mix."""

from koordsched.plugins.gpufragmentation.args import GPUFragmentationArgs, WorkloadShapeArgs
from koordsched.plugins.gpufragmentation.demand import Shape, pod_shape, requests_shape
from koordsched.plugins.gpufragmentation.expected import expected_fragmentation, workload_mix
from koordsched.plugins.gpufragmentation.kernels import warm_up as warm_up_kernels
from koordsched.plugins.gpufragmentation.plugin import GPUFragmentation

__all__ = [
    "GPUFragmentation",
    "GPUFragmentationArgs",
    "Shape",
    "WorkloadShapeArgs",
    "expected_fragmentation",
    "pod_shape",
    "requests_shape",
    "warm_up_kernels",
    "workload_mix",
]
