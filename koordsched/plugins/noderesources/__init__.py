"""NodeResourcesFit and NodeResourcesBalancedAllocation, which share the resource scorer."""

from koordsched.plugins.noderesources.args import NodeResourcesBalancedAllocationArgs, NodeResourcesFitArgs
from koordsched.plugins.noderesources.balanced_allocation import NodeResourcesBalancedAllocation
from koordsched.plugins.noderesources.fit import NodeResourcesFit

__all__ = [
    "NodeResourcesBalancedAllocation",
    "NodeResourcesBalancedAllocationArgs",
    "NodeResourcesFit",
    "NodeResourcesFitArgs",
]
