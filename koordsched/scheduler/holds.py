"""PreEnqueue holds: the queue's admission check, and saying on a pod why it is held.

Built before the queue (which calls :meth:`PreEnqueueHolds.pre_enqueue` on every add), so the
event handlers and the scheduler get it complete rather than closing a loop after the fact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from koordsched.framework.runtime import Framework
from koordsched.framework.status import Status
from koordsched.framework.types import PodInfo
from koordsched.scheduler.ports import OutputPort

#: The PreEnqueue plugin whose holds the API server reports itself.
GATES_PLUGIN = "SchedulingGates"


class PreEnqueueHolds:
    """Runs the pod's profile's PreEnqueue plugins and reports each hold once per reason."""

    def __init__(self, frameworks: Mapping[str, Framework], port: OutputPort) -> None:
        self._frameworks = frameworks
        self._port = port
        #: Whether the initial list is in: until then a pod's hold may only mean its peers are
        #: not listed yet, and is not reported.
        self.synced = False
        #: uid -> the hold last reported on the pod, so each reason is said once.
        self._reported: dict[str, str] = {}

    def pre_enqueue(self, pod: PodInfo) -> Status:
        fw = self._frameworks.get(pod.pod.spec.scheduler_name)
        status = fw.run_pre_enqueue(pod) if fw is not None else Status.unresolvable("no profile")
        if status.ok or status.plugin == GATES_PLUGIN:
            self._reported.pop(pod.uid, None)
        elif self.synced:
            self._report(pod, status.message())
        return status

    def _report(self, pod: PodInfo, message: str) -> None:
        # A pod held before any cycle would otherwise show nothing (kube-scheduler 1.28 only logs
        # it): say why on the pod, once per reason, however often the pod is updated (each update
        # runs PreEnqueue again, our own condition write included). The API server itself marks
        # pods held by scheduling gates (SchedulingGated).
        if self._reported.get(pod.uid) != message:
            self._reported[pod.uid] = message
            self._port.unschedulable(pod.pod, "Unschedulable", message)

    def report_pending(self, pending: Iterable[PodInfo]) -> None:
        """The initial list is in: report each pod still held at PreEnqueue (a gang member whose
        peers came later in the list was held only until they did, and says nothing)."""
        self.synced = True
        for pod in pending:
            if pod.gated and pod.gating_plugin != GATES_PLUGIN and pod.gating_message:
                self._report(pod, pod.gating_message)

    def forget(self, uid: str) -> None:
        """The pod is gone: a later pod with its uid starts with nothing reported."""
        self._reported.pop(uid, None)


__all__ = ["GATES_PLUGIN", "PreEnqueueHolds"]
