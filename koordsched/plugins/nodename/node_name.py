"""NodeName: when ``spec.nodeName`` is set, every other node is rejected."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import (
    BatchFilterPlugin,
    ClusterEventWithHint,
    Codes,
    CopiesFilterPlugin,
    EnqueueExtensions,
    Handle,
    Rows,
)
from koordsched.framework.status import Status
from koordsched.framework.types import NODE_ADD, NODE_UPDATE, PodInfo
from koordsched.plugins.helper import node_only_copies

ERR_REASON = "node(s) didn't match the requested node name"
_REJECTED = Status.unresolvable(ERR_REASON)


class NodeName:
    name = "NodeName"

    def __init__(self, args: Any, handle: Handle) -> None:
        self._handle = handle

    def filter_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Codes:
        """All zeros without a nodeName (the common case); otherwise 1 everywhere but the named row."""
        wanted = pod.pod.spec.node_name
        if not wanted:
            return np.zeros(len(rows), dtype=np.int64)
        codes = np.ones(len(rows), dtype=np.int64)
        info = self._handle.snapshot.by_name.get(wanted)
        if info is not None:
            codes[rows == info.row] = 0
        return codes

    def filter_copies(self, state: CycleState, pods: Sequence[PodInfo], rows: Rows) -> Codes | None:
        return node_only_copies(pods, rows, lambda p: p.pod.spec.node_name)

    def explain(self, state: CycleState, pod: PodInfo, code: int) -> Status:
        return _REJECTED

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(NODE_ADD), ClusterEventWithHint(NODE_UPDATE)]


if TYPE_CHECKING:
    # The extension points NodeName implements; mypy checks each line, nothing runs.
    _filter: type[BatchFilterPlugin] = NodeName
    _copies: type[CopiesFilterPlugin] = NodeName
    _enqueue_extensions: type[EnqueueExtensions] = NodeName
