"""The simulator's record of every scheduling attempt, and what ``--explain`` shows of each.

:class:`AttemptRecorder` is the :class:`~koordsched.scheduler.observer.CycleObserver` the
simulator gives the scheduler: it keeps each attempt's outcome in order (the report counts
attempts per pod) and, with ``explain``, renders for the pod's best nodes every Filter
verdict and every Score plugin's raw, normalised and weighted score.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.diagnosis import Diagnosis
from koordsched.framework.interface import Rows, ScoreDetailsPlugin
from koordsched.framework.runtime import Framework
from koordsched.framework.status import Status
from koordsched.framework.steps import ScoreResult
from koordsched.framework.types import PodInfo
from koordsched.scheduler.observer import SCHEDULED

#: How many of the best-scoring nodes an explanation shows.
TOP_SCORED = 5
#: How many rejecting nodes an explanation shows when none fits.
TOP_REJECTED = 10


@dataclass
class Explanation:
    """What ``--explain`` shows for one pod: filter verdicts and per-plugin scores on its best nodes."""

    nodes: list[dict[str, Any]] = field(default_factory=list)


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

    def __init__(self, explain: bool = False) -> None:
        self.explain = explain
        #: ``namespace/name`` -> scheduling cycles the pod went through.
        self.counts: dict[str, int] = {}
        #: ``namespace/name`` -> the nodes its latest attempt's explanation shows (with ``explain``).
        self.explanations: dict[str, list[dict[str, Any]]] = {}
        self.last: Attempt | None = None

    @property
    def wants_scores(self) -> bool:
        return self.explain

    def explain_scores(
        self, fw: Framework, state: CycleState, pod: PodInfo, feasible: Rows, scores: ScoreResult
    ) -> object | None:
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
        if not self.explain:
            return None
        out = Explanation()
        statuses = diagnosis.node_statuses(state, pod, fw.handle.snapshot)
        for name, st in list(statuses.items())[:TOP_REJECTED]:
            out.nodes.append({"node": name, "feasible": False, "filters": {st.plugin: _status_json(st)}})
        return out

    def attempted(
        self, pod: PodInfo, result: str, node: str | None, message: str, explanation: object | None
    ) -> None:
        key = pod.key
        self.counts[key] = self.counts.get(key, 0) + 1
        shown = explanation if isinstance(explanation, Explanation) else None
        if self.explain:
            self.explanations[key] = shown.nodes if shown is not None else []
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


def _status_json(status: Status) -> dict[str, Any]:
    out: dict[str, Any] = {"code": status.code.label}
    if status.reasons:
        out["reasons"] = list(status.reasons)
    return out
