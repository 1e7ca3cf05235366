"""Why a pod fits nowhere: per-node rejections and kube-scheduler's FailedScheduling text."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import BatchFilterPlugin, Codes, NodeStatusMap, Rows
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.status import Status
from koordsched.framework.types import PodInfo

NO_NODES_AVAILABLE = "no nodes available to schedule pods"


@dataclass
class _BatchRejection:
    plugin: BatchFilterPlugin
    rows: Rows
    codes: Codes


@dataclass
class Diagnosis:
    """Filter rejections, kept in compact form until a reason is actually needed.

    Batch filters reject many rows with a handful of distinct codes; turning each code
    into a Status once (``explain``) and counting rows per code keeps an unschedulable
    pod's message cheap even on thousands of nodes.
    """

    num_all_nodes: int = 0
    pre_filter_msg: str = ""
    #: The PreFilter rejection, which upstream records for every node (PostFilter plugins read it there).
    pre_filter_status: Status | None = None
    post_filter_msg: str = ""
    unschedulable_plugins: set[str] = field(default_factory=set)
    _batch: list[_BatchRejection] = field(default_factory=list)
    _per_node: dict[int, Status] = field(default_factory=dict)

    def reject_rows(self, plugin: BatchFilterPlugin, rows: Rows, codes: Codes) -> None:
        self._batch.append(_BatchRejection(plugin, rows, codes))
        self.unschedulable_plugins.add(plugin.name)

    def reject_row(self, row: int, status: Status) -> None:
        self._per_node[row] = status
        if status.plugin:
            self.unschedulable_plugins.add(status.plugin)

    def rejected_count(self) -> int:
        return sum(len(b.rows) for b in self._batch) + len(self._per_node)

    def reason_histogram(self, state: CycleState, pod: PodInfo) -> dict[str, int]:
        counts: dict[str, int] = {}
        for b in self._batch:
            codes, n = np.unique(b.codes, return_counts=True)
            for code, count in zip(codes.tolist(), n.tolist(), strict=True):
                for reason in b.plugin.explain(state, pod, int(code)).reasons:
                    counts[reason] = counts.get(reason, 0) + count
        for status in self._per_node.values():
            for reason in status.reasons:
                counts[reason] = counts.get(reason, 0) + 1
        return counts

    def node_statuses(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> NodeStatusMap:
        """Node name -> rejecting Status, for PostFilter plugins and ``--explain``."""
        out: NodeStatusMap = {}
        infos = snapshot.infos
        for b in self._batch:
            cache: dict[int, Status] = {}
            for row, code in zip(b.rows.tolist(), b.codes.tolist(), strict=True):
                st = cache.get(code)
                if st is None:
                    st = cache[code] = b.plugin.explain(state, pod, code).with_plugin(b.plugin.name)
                out[infos[row].name] = st
        for row, status in self._per_node.items():
            out[infos[row].name] = status
        return out

    def message(self, state: CycleState, pod: PodInfo) -> str:
        """kube-scheduler's FitError text, byte for byte."""
        msg = f"0/{self.num_all_nodes} nodes are available:"
        if self.pre_filter_msg:
            msg += f" {self.pre_filter_msg}."
        else:
            hist = self.reason_histogram(state, pod)
            # Go sorts the formatted "count reason" strings lexicographically.
            parts = sorted(f"{count} {reason}" for reason, count in hist.items())
            if parts:
                msg += f" {', '.join(parts)}."
        if self.post_filter_msg:
            msg += f" {self.post_filter_msg}."
        return msg
