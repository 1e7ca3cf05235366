"""LoadAwareScheduling: Koordinator's load-aware Filter and Score over NodeMetric usage."""

from koordsched.plugins.loadaware.args import LoadAwareSchedulingArgs
from koordsched.plugins.loadaware.kernels import warm_up as warm_up_kernels
from koordsched.plugins.loadaware.plugin import LoadAwareScheduling

__all__ = ["LoadAwareScheduling", "LoadAwareSchedulingArgs", "warm_up_kernels"]
