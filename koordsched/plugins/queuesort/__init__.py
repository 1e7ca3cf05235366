"""PrioritySort: the default queueSort plugin."""

from koordsched.plugins.queuesort.priority_sort import PrioritySort

__all__ = ["PrioritySort"]
