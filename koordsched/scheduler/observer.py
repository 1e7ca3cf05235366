"""What a backend may watch of each cycle, beyond the output port.

The simulator records every attempt and, with ``--explain``, every filter verdict and
per-plugin score on a pod's best nodes; a cluster run needs neither. The cycles call a
:class:`CycleObserver` at the few points where that material exists and thread whatever
it returns (an opaque explanation) to the attempt's outcome, so the core neither stores
attempts nor knows how an explanation is rendered.
"""

from __future__ import annotations

from typing import Protocol

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.diagnosis import Diagnosis
from koordsched.framework.interface import Rows
from koordsched.framework.runtime import Framework
from koordsched.framework.steps import ScoreResult
from koordsched.framework.types import PodInfo

#: Outcomes of an attempt, as ``scheduler_schedule_attempts_total`` labels them (plus "waiting").
SCHEDULED = "scheduled"
UNSCHEDULABLE = "unschedulable"
ERROR = "error"
WAITING = "waiting"


class CycleObserver(Protocol):
    @property
    def wants_scores(self) -> bool:
        """Score even a single feasible node, keeping each plugin's raw and normalised scores."""

    def explain_scores(
        self, fw: Framework, state: CycleState, pod: PodInfo, feasible: Rows, scores: ScoreResult
    ) -> object | None:
        """Called after Score when ``wants_scores``; the result goes to :meth:`attempted`."""

    def explain_rejection(
        self, fw: Framework, state: CycleState, pod: PodInfo, diagnosis: Diagnosis
    ) -> object | None:
        """Called when no node passed the filters (after PostFilter); the result goes to :meth:`attempted`."""

    def attempted(
        self, pod: PodInfo, result: str, node: str | None, message: str, explanation: object | None
    ) -> None:
        """A scheduling cycle ended: scheduled (binding follows), waiting, unschedulable or error."""

    def binding_ended(self, pod: PodInfo, result: str, message: str) -> None:
        """The binding cycle that followed the pod's last attempt ended with ``result``."""


class NoObserver:
    """A cluster run's observer: nothing is kept."""

    wants_scores = False

    def explain_scores(
        self, fw: Framework, state: CycleState, pod: PodInfo, feasible: Rows, scores: ScoreResult
    ) -> object | None:
        return None

    def explain_rejection(
        self, fw: Framework, state: CycleState, pod: PodInfo, diagnosis: Diagnosis
    ) -> object | None:
        return None

    def attempted(
        self, pod: PodInfo, result: str, node: str | None, message: str, explanation: object | None
    ) -> None:
        return None

    def binding_ended(self, pod: PodInfo, result: str, message: str) -> None:
        return None
