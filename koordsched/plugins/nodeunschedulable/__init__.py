"""NodeUnschedulable: filters out cordoned nodes."""

from koordsched.plugins.nodeunschedulable.node_unschedulable import NodeUnschedulable

__all__ = ["NodeUnschedulable"]
