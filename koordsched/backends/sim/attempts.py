"""The simulator's record of every scheduling attempt, and what ``--explain`` shows of each.

:class:`AttemptRecorder` is the :class:`~koordsched.scheduler.observer.CycleObserver` the
simulator gives the scheduler: it keeps each attempt's outcome in order (the report counts
attempts per pod) and, with ``explain`` (every pod) or ``explain_pods`` (those named), renders
for the pod's best nodes every Filter verdict and every Score plugin's raw, normalised and
weighted score, and for a pod that fits nowhere its rejections grouped by verdict.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.diagnosis import Diagnosis
from koordsched.framework.interface import NodeStatusMap, Rows, ScoreDetailsPlugin
from koordsched.framework.runtime import Framework
from koordsched.framework.status import Status
from koordsched.framework.steps import ScoreResult
from koordsched.framework.types import PodInfo
from koordsched.scheduler.observer import SCHEDULED

#: How many of the best-scoring nodes an explanation shows.
TOP_SCORED = 5
#: How many rejecting nodes an explanation shows when none fits.
TOP_REJECTED = 10
#: How many node names a verdict group lists (its count covers them all).
GROUP_NODES = 20


@dataclass
class Explanation:
    """What ``--explain`` shows for one pod: filter verdicts and per-plugin scores on its best nodes."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    #: Every rejecting verdict with the nodes that got it (:func:`verdict_groups`).
    verdicts: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class Attempt:
    """The outcome of one scheduling cycle (updated by the binding cycle that follows it)."""

    key: str  # namespace/name
    uid: str
    result: str  # "scheduled" | "unschedulable" | "error" | "waiting"
    node: str | None = None
    message: str = ""
    explanation: Explanation | None = None


class AttemptRecorder:
    """Counts each pod's attempts and keeps what the report shows of them.

    A record per attempt would be kept to the run's end (some 100 bytes each, one or more per
    pod): the report only needs each pod's count and, with ``explain``, its latest
    explanation; :attr:`last` is the most recent attempt (tests read its outcome)."""

    def __init__(self, explain: bool = False, explain_pods: Collection[str] = ()) -> None:
        self.explain = explain
        #: ``namespace/name`` of the pods explained even without ``explain`` (``--explain-pod``).
        self.explain_pods = frozenset(explain_pods)
        #: ``namespace/name`` -> scheduling cycles the pod went through.
        self.counts: dict[str, int] = {}
        #: ``namespace/name`` -> the nodes its latest attempt's explanation shows (explained pods).
        self.explanations: dict[str, list[dict[str, Any]]] = {}
        #: ``namespace/name`` -> its latest attempt's rejections grouped by verdict (explained pods).
        self.verdicts: dict[str, list[dict[str, Any]]] = {}
        self.last: Attempt | None = None

    def explains(self, key: str) -> bool:
        """Whether the pod ``namespace/name`` gets an explanation."""
        return self.explain or key in self.explain_pods

    @property
    def wants_scores(self) -> bool:
        return self.explain or bool(self.explain_pods)

    def explain_scores(
        self, fw: Framework, state: CycleState, pod: PodInfo, feasible: Rows, scores: ScoreResult
    ) -> object | None:
        if not self.explains(pod.key):
            return None
        order = np.argsort(-scores.total, kind="stable")[:TOP_SCORED]
        out = Explanation()
        infos = fw.handle.snapshot.infos
        plugins = fw.handle.plugins()
        for i in order.tolist():
            row = int(feasible[i])
            entries: dict[str, dict[str, Any]] = {}
            for b in scores.breakdown:
                entry: dict[str, Any] = {
                    "raw": int(b.raw[i]),
                    "normalized": int(b.normalized[i]),
                    "weight": b.weight,
                    "weighted": int(b.normalized[i]) * b.weight,
                }
                plugin = plugins.get(b.plugin)
                if isinstance(plugin, ScoreDetailsPlugin):
                    entry.update(plugin.explain_score(state, pod, row))
                entries[b.plugin] = entry
            out.nodes.append(
                {
                    "node": infos[row].name,
                    "feasible": True,
                    "totalScore": int(scores.total[i]),
                    "filters": {name: _status_json(st) for name, st in fw.explain_filters(state, pod, row)},
                    "scores": entries,
                }
            )
        return out

    def explain_rejection(
        self, fw: Framework, state: CycleState, pod: PodInfo, diagnosis: Diagnosis
    ) -> object | None:
        if not self.explains(pod.key):
            return None
        out = Explanation()
        statuses = diagnosis.node_statuses(state, pod, fw.handle.snapshot)
        for name, st in list(statuses.items())[:TOP_REJECTED]:
            out.nodes.append({"node": name, "feasible": False, "filters": {st.plugin: _status_json(st)}})
        pre = diagnosis.pre_filter_status
        if pre is not None:
            # PreFilter refused the pod before any node was looked at: one verdict for all of them.
            group = {"stage": "PreFilter", "plugin": pre.plugin or "", **_status_json(pre)}
            out.verdicts.append({**group, "count": diagnosis.num_all_nodes, "allNodes": True, "nodes": []})
        out.verdicts.extend(verdict_groups(statuses))
        return out

    def attempted(
        self, pod: PodInfo, result: str, node: str | None, message: str, explanation: object | None
    ) -> None:
        key = pod.key
        self.counts[key] = self.counts.get(key, 0) + 1
        shown = explanation if isinstance(explanation, Explanation) else None
        if self.explains(key):
            self.explanations[key] = shown.nodes if shown is not None else []
            self.verdicts[key] = shown.verdicts if shown is not None else []
        self.last = Attempt(key, pod.uid, result, node, message, shown)

    def binding_ended(self, pod: PodInfo, result: str, message: str) -> None:
        # A pod has at most one binding cycle at a time and no attempt while it runs: if the
        # latest attempt is this pod's, it is the one this binding followed.
        a = self.last
        if a is not None and a.uid == pod.uid:
            a.result = result
            if result != SCHEDULED:
                a.node = None
                a.message = message


def verdict_groups(statuses: NodeStatusMap) -> list[dict[str, Any]]:
    """The Filter rejections by verdict (plugin, code, reasons), most nodes first.

    Each group is ``{"stage": "Filter", "plugin", "code", "reasons"?, "count", "allNodes": false,
    "nodes"}``, ``nodes`` the first :data:`GROUP_NODES` names in the scheduler's order."""
    groups: dict[tuple[str, str, tuple[str, ...]], dict[str, Any]] = {}
    for name, st in statuses.items():
        key = (st.plugin or "", st.code.label, tuple(st.reasons))
        group = groups.get(key)
        if group is None:
            group = groups[key] = {"stage": "Filter", "plugin": key[0], **_status_json(st)}
            group.update(count=0, allNodes=False, nodes=[])
        group["count"] += 1
        if len(group["nodes"]) < GROUP_NODES:
            group["nodes"].append(name)
    return sorted(groups.values(), key=lambda g: (-g["count"], g["plugin"]))


def _status_json(status: Status) -> dict[str, Any]:
    out: dict[str, Any] = {"code": status.code.label}
    if status.reasons:
        out["reasons"] = list(status.reasons)
    return out
