"""The simulator's output port: an in-memory API server that binds, records events and confirms.

It behaves as a cluster would from the scheduler's side, so the core runs the same code
in both worlds: a bind succeeds (or fails, when a test injects a failure), the bound pod
then comes back as a watch update (``Scheduler.on_pod_update``) once the binding cycle has
ended (:meth:`SimPort.deliver`, called by the simulator's loop, as a watch event arrives
after the bind's response), and each outcome leaves the event and the ``PodScheduled``
condition a person would see with ``kubectl describe``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import msgspec

from koordsched.api.core import Pod, PodCondition
from koordsched.framework.interface import BindError
from koordsched.framework.types import BindingPlan
from koordsched.scheduler.scheduler import Scheduler

#: Called before each bind with (pod, node); a returned message makes that bind fail.
BindHook = Callable[[Pod, str], str | None]

#: kube-scheduler's event reasons.
SCHEDULED = "Scheduled"
FAILED_SCHEDULING = "FailedScheduling"
PREEMPTED = "Preempted"


@dataclass(frozen=True)
class SimEvent:
    """A core/v1 Event as ``kubectl get events`` shows it."""

    type: str  # "Normal" | "Warning"
    reason: str
    namespace: str
    name: str
    message: str


@dataclass(frozen=True)
class Preemption:
    """A pod deleted to make room for a higher-priority one."""

    node: str
    preemptor: str
    message: str


@dataclass
class BindRecord:
    node: str
    annotations: dict[str, str] = field(default_factory=dict)


def fail_first_binds(keys: Iterable[str], message: str = "injected bind failure") -> BindHook:
    """A hook failing the first bind of each pod in ``keys`` (``namespace/name``), then letting it through.

    Lets a test prove that a failed bind is rolled back (capacity released) and the pod retried.
    """
    remaining = set(keys)

    def hook(pod: Pod, node: str) -> str | None:
        if pod.key in remaining:
            remaining.discard(pod.key)
            return f"{message}: pod {pod.key} on node {node}"
        return None

    return hook


class SimPort:
    """Implements :class:`koordsched.scheduler.ports.OutputPort` in memory.

    ``attach`` must be called with the scheduler before the first bind: the port plays the
    watch that confirms binds, so it needs the scheduler's event handlers.
    """

    def __init__(self, bind_hook: BindHook | None = None) -> None:
        self.bind_hook = bind_hook
        self._scheduler: Scheduler | None = None
        #: The cluster's pods by ``namespace/name`` (what the API server holds).
        self.pods: dict[str, Pod] = {}
        #: Pods this scheduler bound: key -> node and what the binding carried.
        self.bound: dict[str, BindRecord] = {}
        self.events: list[SimEvent] = []
        #: key -> the pod's current PodScheduled condition.
        self.conditions: dict[str, PodCondition] = {}
        #: key -> the message of the pod's latest FailedScheduling event.
        self.failures: dict[str, str] = {}
        self.bind_failures = 0
        #: Bound pods whose watch update (old, new) has not reached the scheduler yet.
        self._unconfirmed: list[tuple[Pod, Pod]] = []
        #: Pods deleted by a preemption: key -> where they ran and for whom.
        self.preempted: dict[str, Preemption] = {}
        #: key -> the node a preemption nominated the pod to (its status.nominatedNodeName).
        self.nominations: dict[str, str] = {}
        #: Pods deleted whose watch event has not reached the scheduler yet.
        self._deleted: list[Pod] = []

    def attach(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler

    def add_pod(self, pod: Pod) -> None:
        """A pod exists in the cluster (the loader's input)."""
        self.pods[pod.key] = pod

    # --- OutputPort ----------------------------------------------------------------------------

    async def bind(self, pod: Pod, node_name: str, plan: BindingPlan) -> None:
        if self._scheduler is None:
            raise RuntimeError("SimPort.attach(scheduler) was not called")
        if self.bind_hook is not None:
            refusal = self.bind_hook(pod, node_name)
            if refusal:
                self.bind_failures += 1
                raise BindError(refusal)
        current = self.pods.get(pod.key, pod)
        if current.spec.node_name:
            # The API server refuses to bind a bound pod (409 Conflict).
            self.bind_failures += 1
            raise BindError(f"pod {pod.key} is already assigned to node {current.spec.node_name!r}")
        meta = current.metadata
        bound = msgspec.structs.replace(
            current,
            metadata=msgspec.structs.replace(
                meta,
                annotations={**meta.annotations, **plan.annotations},
            ),
            spec=msgspec.structs.replace(current.spec, node_name=node_name),
            status=msgspec.structs.replace(
                current.status,
                conditions=[
                    *(c for c in current.status.conditions if c.type != "PodScheduled"),
                    PodCondition(type="PodScheduled", status="True"),
                ],
            ),
        )
        self.pods[pod.key] = bound
        self.bound[pod.key] = BindRecord(node_name, dict(plan.annotations))
        self.conditions[pod.key] = PodCondition(type="PodScheduled", status="True")
        # The watch event that will confirm the bind (the scheduler turns its assumed pod into a bound one).
        self._unconfirmed.append((current, bound))

    def deliver(self) -> int:
        """Hand the scheduler the watch events of the writes done so far (binds, status patches,
        deletions), in order; returns how many."""
        pending, self._unconfirmed = self._unconfirmed, []
        deleted, self._deleted = self._deleted, []
        if self._scheduler is not None:
            for old, new in pending:
                self._scheduler.on_pod_update(old, new)
            for pod in deleted:
                self._scheduler.on_pod_delete(pod)
        return len(pending) + len(deleted)

    def preempt(self, preemptor: Pod, node_name: str, victims: list[Pod]) -> None:
        """Delete the victims (uid as precondition), each with kube-scheduler's ``Preempted`` event."""
        for victim in victims:
            current = self.pods.get(victim.key)
            if current is None or current.metadata.uid != victim.metadata.uid:
                continue  # already gone, or a new pod of the same name: the precondition fails
            del self.pods[victim.key]
            self.preempted[victim.key] = Preemption(
                node_name, preemptor.key, f"preempted by {preemptor.key} on node {node_name}"
            )
            who = preemptor.metadata.uid or preemptor.key
            self._event("Normal", PREEMPTED, victim, f"Preempted by pod {who} on node {node_name}")
            self._deleted.append(current)

    def nominate(self, pod: Pod, node_name: str) -> None:
        current = self.pods.get(pod.key)
        if current is None or current.spec.node_name:
            return
        if current.status.nominated_node_name == node_name:
            return
        updated = msgspec.structs.replace(
            current, status=msgspec.structs.replace(current.status, nominated_node_name=node_name)
        )
        self.pods[pod.key] = updated
        if node_name:
            self.nominations[pod.key] = node_name
        else:
            self.nominations.pop(pod.key, None)
        self._unconfirmed.append((current, updated))

    def scheduled(self, pod: Pod, node_name: str) -> None:
        self._event("Normal", SCHEDULED, pod, f"Successfully assigned {pod.key} to {node_name}")

    def unschedulable(self, pod: Pod, reason: str, message: str) -> None:
        self.conditions[pod.key] = PodCondition(
            type="PodScheduled", status="False", reason=reason, message=message
        )
        self.failures[pod.key] = message
        self._event("Warning", FAILED_SCHEDULING, pod, message)

    def invalid_pod(self, pod: Pod, message: str) -> None:
        self.unschedulable(pod, "Unschedulable", message)

    # --- helpers -------------------------------------------------------------------------------

    def _event(self, type_: str, reason: str, pod: Pod, message: str) -> None:
        self.events.append(SimEvent(type_, reason, pod.metadata.namespace, pod.metadata.name, message))

    def events_for(self, key: str) -> list[SimEvent]:
        return [e for e in self.events if f"{e.namespace}/{e.name}" == key]
