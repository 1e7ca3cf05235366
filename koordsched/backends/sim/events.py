"""The events the simulator's port records, as ``kubectl get events`` would show them.

A run writes one Scheduled event per bound pod. :class:`EventLog` keeps such an event as the
bound pod itself (the port holds it anyway: its namespace, name and node are the event's) and
writes the :class:`SimEvent` when read, instead of one object per pod (some 90 bytes each)
held to the run's end.
"""

from __future__ import annotations

from dataclasses import dataclass

from koordsched.api.core import Pod
from koordsched.backends.sim.lazy import LazyRecords

#: kube-scheduler's event reason for a bind.
SCHEDULED = "Scheduled"


@dataclass(frozen=True, slots=True)
class SimEvent:
    """A core/v1 Event as ``kubectl get events`` shows it."""

    type: str  # "Normal" | "Warning"
    reason: str
    namespace: str
    name: str
    text: str = ""
    #: A Scheduled event's node: its message is then written when read (one per bound pod,
    #: some 100 bytes each if kept as text).
    assigned_to: str = ""

    @property
    def message(self) -> str:
        if not self.assigned_to:
            return self.text
        who = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"Successfully assigned {who} to {self.assigned_to}"


class EventLog(LazyRecords[SimEvent]):
    """Events in the order they were written."""

    __slots__ = ()

    def append(self, event: SimEvent) -> None:
        self._entries.append(event)

    def scheduled(self, bound: Pod) -> None:
        """The Scheduled event of a bind: ``bound`` is the pod as bound (``spec.nodeName`` set)."""
        self._entries.append(bound)

    def _record(self, pod: Pod) -> SimEvent:
        meta = pod.metadata
        return SimEvent("Normal", SCHEDULED, meta.namespace, meta.name, assigned_to=pod.spec.node_name)

    def __repr__(self) -> str:
        return f"EventLog({len(self._entries)} events)"
