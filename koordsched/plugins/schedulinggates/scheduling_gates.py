"""SchedulingGates: a pod with ``spec.schedulingGates`` waits until every gate is removed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from koordsched.framework.interface import ClusterEventWithHint, EnqueueExtensions, Handle, PreEnqueuePlugin
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import UNSCHEDULED_POD_UPDATE, PodInfo


class SchedulingGates:
    name = "SchedulingGates"

    def __init__(self, args: Any, handle: Handle) -> None:
        pass

    def pre_enqueue(self, pod: PodInfo) -> Status:
        gates = pod.pod.spec.scheduling_gates
        if not gates:
            return SUCCESS
        # Go prints a []string with %v: "[a b]".
        names = " ".join(g.name for g in gates)
        return Status.unresolvable(f"waiting for scheduling gates: [{names}]")

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """Only an update of the pod itself can remove a gate."""
        return [ClusterEventWithHint(UNSCHEDULED_POD_UPDATE)]


if TYPE_CHECKING:
    # The extension points SchedulingGates implements; mypy checks each line, nothing runs.
    _pre_enqueue: type[PreEnqueuePlugin] = SchedulingGates
    _enqueue_extensions: type[EnqueueExtensions] = SchedulingGates
