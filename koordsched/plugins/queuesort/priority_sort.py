"""PrioritySort: higher priority first, then the pod that entered the queue earlier."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from koordsched.framework.interface import Handle, QueueSortPlugin
from koordsched.framework.types import PodInfo


class PrioritySort:
    """Upstream ``Less``: ``p1 > p2 || (p1 == p2 && t1 < t2)``, expressed as an ascending sort key."""

    name = "PrioritySort"

    def __init__(self, args: Any, handle: Handle) -> None:
        pass

    def sort_key(self, pod: PodInfo) -> tuple[int, float]:
        return (-pod.priority, pod.timestamp)


if TYPE_CHECKING:
    # The extension points PrioritySort implements; mypy checks each line, nothing runs.
    _queue_sort: type[QueueSortPlugin] = PrioritySort
