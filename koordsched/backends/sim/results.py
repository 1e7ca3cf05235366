"""Where each pending pod ended up: :class:`PodResult`, and the run's list of them.

A large run binds most of its pods, and a bound pod's result says nothing its bind record and
attempt count do not: :class:`PodResults` keeps such a pod as the pod itself (already held by
the input) and writes its :class:`PodResult` when read, instead of holding one object per pod
(some 100 bytes each) to the run's end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koordsched.api.core import Pod
from koordsched.backends.sim.events import SCHEDULED as SCHEDULED
from koordsched.backends.sim.lazy import LazyRecords
from koordsched.backends.sim.port import BindRecord


@dataclass(slots=True)
class PodResult:
    """Where one pending pod ended up, and why."""

    namespace: str
    name: str
    node: str | None
    status: str  # SCHEDULED | UNSCHEDULABLE | WAITING | PREEMPTED | REVOKED
    message: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    attempts: int = 0
    #: The scheduler's Explanation.nodes for the pod's last attempt (only with ``explain``).
    explain: list[dict[str, Any]] | None = None
    #: Its last attempt's rejections grouped by verdict (``attempts.verdict_groups``), when explained.
    verdicts: list[dict[str, Any]] | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class PodResults(LazyRecords[PodResult]):
    """The run's results in input order; a bound pod's is written from its bind record when read.

    ``bound`` and ``attempts`` are the run's final records (the simulator's port and attempt
    recorder), which nothing changes once the run is over.
    """

    __slots__ = ("_attempts", "_bound")

    def __init__(self, bound: Mapping[str, BindRecord], attempts: Mapping[str, int]) -> None:
        super().__init__()
        self._bound = bound
        self._attempts = attempts

    def append(self, result: PodResult) -> None:
        self._entries.append(result)

    def append_bound(self, pod: Pod) -> None:
        """A pod this run bound (its key is in ``bound``), with nothing else to say."""
        self._entries.append(pod)

    def _record(self, pod: Pod) -> PodResult:
        key = pod.key
        record = self._bound[key]
        meta = pod.metadata
        return PodResult(
            meta.namespace,
            meta.name,
            record.node,
            SCHEDULED,
            "",
            record.annotations,
            self._attempts.get(key, 0),
        )

    def __repr__(self) -> str:
        return f"PodResults({len(self._entries)} pods)"
