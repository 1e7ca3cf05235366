"""NodeUnschedulable: ``spec.unschedulable`` nodes are out unless the pod tolerates the cordon taint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from koordsched.api.taints import UNSCHEDULABLE_TAINT, tolerations_tolerate_taint
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
from koordsched.kernels.resources import mask_codes
from koordsched.plugins.helper import as_rows, node_only_copies

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
_REJECTED = Status.unresolvable(ERR_REASON_UNSCHEDULABLE)


class NodeUnschedulable:
    name = "NodeUnschedulable"

    def __init__(self, args: Any, handle: Handle) -> None:
        self._handle = handle

    def filter_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Codes:
        """Code 1 on cordoned rows; the toleration check runs only when some node is cordoned."""
        snap = self._handle.snapshot
        column = snap.unschedulable[: snap.n]
        if not column.any() or tolerations_tolerate_taint(pod.pod.spec.tolerations, UNSCHEDULABLE_TAINT):
            return np.zeros(len(rows), dtype=np.int64)
        result: Codes = mask_codes(snap.unschedulable, as_rows(rows), True, 1)
        return result

    def filter_copies(self, state: CycleState, pods: Sequence[PodInfo], rows: Rows) -> Codes | None:
        return node_only_copies(pods, rows, lambda p: p.pod.spec.tolerations)

    def explain(self, state: CycleState, pod: PodInfo, code: int) -> Status:
        return _REJECTED

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(NODE_ADD), ClusterEventWithHint(NODE_UPDATE)]


if TYPE_CHECKING:
    # The extension points NodeUnschedulable implements; mypy checks each line, nothing runs.
    _filter: type[BatchFilterPlugin] = NodeUnschedulable
    _copies: type[CopiesFilterPlugin] = NodeUnschedulable
    _enqueue_extensions: type[EnqueueExtensions] = NodeUnschedulable
