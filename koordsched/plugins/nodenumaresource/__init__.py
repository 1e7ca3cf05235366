"""Koordinator's NodeNUMAResource plugin: CPU binding (cpusets) and NUMA-aware placement."""

from koordsched.plugins.nodenumaresource.args import NodeNUMAResourceArgs
from koordsched.plugins.nodenumaresource.plugin import NodeNUMAResource

__all__ = ["NodeNUMAResource", "NodeNUMAResourceArgs"]
