"""NodeName: a pod with ``spec.nodeName`` fits only that node."""

from koordsched.plugins.nodename.node_name import NodeName

__all__ = ["NodeName"]
