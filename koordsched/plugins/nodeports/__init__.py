"""NodePorts: host ports must be free on the node."""

from koordsched.plugins.nodeports.node_ports import NodePorts

__all__ = ["NodePorts"]
