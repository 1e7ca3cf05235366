"""LoadAwareScheduling: Koordinator's load-aware Filter and Score over NodeMetric usage."""

from koordsched.plugins.loadaware.args import LoadAwareSchedulingArgs
from koordsched.plugins.loadaware.plugin import LoadAwareScheduling

__all__ = ["LoadAwareScheduling", "LoadAwareSchedulingArgs"]
