"""NodeResourcesFitPlus: Koordinator v1.6's per-resource MostAllocated/LeastAllocated score."""

from koordsched.plugins.noderesourcesfitplus.args import NodeResourcesFitPlusArgs, ResourceTypeWeight
from koordsched.plugins.noderesourcesfitplus.plugin import NodeResourcesFitPlus

__all__ = ["NodeResourcesFitPlus", "NodeResourcesFitPlusArgs", "ResourceTypeWeight"]
