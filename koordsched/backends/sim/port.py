"""The simulator's output port: an in-memory API server that binds, records events and confirms.

It behaves as a cluster would from the scheduler's side, so the core runs the same code
in both worlds: a bind succeeds (or fails, when a test injects a failure), the bound pod
then comes back as a watch update (``Scheduler.on_pod_update``) once the binding cycle has
ended (:meth:`SimPort.deliver`, called by the simulator's loop, as a watch event arrives
after the bind's response), and each outcome leaves the event and the ``PodScheduled``
condition a person would see with ``kubectl describe``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from koordsched.api.core import Pod, PodCondition
from koordsched.api.kinds import PodStandIn
from koordsched.api.sharing import PodSharing
from koordsched.api.storage import PersistentVolume, PersistentVolumeClaim
from koordsched.backends.sim.events import SCHEDULED as SCHEDULED
from koordsched.backends.sim.events import EventLog
from koordsched.backends.sim.events import SimEvent as SimEvent
from koordsched.backends.sim.volumes import SimVolumeController
from koordsched.framework.interface import BindError
from koordsched.framework.types import BindingPlan
from koordsched.scheduler.scheduler import Scheduler

#: Called before each bind with (pod, node); a returned message makes that bind fail.
BindHook = Callable[[Pod, str], str | None]

#: kube-scheduler's event reasons.
FAILED_SCHEDULING = "FailedScheduling"
PREEMPTED = "Preempted"


@dataclass(frozen=True, slots=True)
class Preemption:
    """A pod deleted to make room for a higher-priority one."""

    #: The node the pod ran on.
    node: str
    preemptor: str
    message: str


@dataclass(frozen=True, slots=True)
class BindRecord:
    """Where a bind put a pod and the annotations it carried (frozen: pods bound to one node
    without annotations share one record)."""

    node: str
    annotations: dict[str, str] = field(default_factory=dict)


#: A bind record's annotations when the binding carried none: one dict for all, never changed.
_NO_ANNOTATIONS: dict[str, str] = {}
#: What a bind leaves in a pod's status and in :attr:`SimPort.conditions`: one object for all
#: (nothing changes a condition in place; a run holds one per bound pod).
_SCHEDULED_CONDITION = PodCondition(type="PodScheduled", status="True")


class PodConditions(Mapping[str, PodCondition]):
    """``namespace/name`` -> the pod's current PodScheduled condition.

    A failure's condition is kept here; a bind's is the one shared condition, answered from
    the port's bind records rather than kept again (a run binds most of its pods: one table
    entry per pod fewer). The latest write wins, as before: a bind drops an earlier failure.
    """

    __slots__ = ("_bound", "_failed", "_stand_ins")

    def __init__(self, bound: Mapping[str, BindRecord]) -> None:
        self._bound = bound
        self._failed: dict[str, PodCondition] = {}
        #: Keys in ``bound`` that name an object a pod stood for (a Reservation), not a pod.
        self._stand_ins: set[str] = set()

    def failed(self, key: str, condition: PodCondition) -> None:
        self._failed[key] = condition

    def scheduled(self, key: str) -> None:
        self._failed.pop(key, None)

    def stand_in_bound(self, key: str) -> None:
        self._stand_ins.add(key)

    def _scheduled(self, key: str) -> bool:
        return key in self._bound and key not in self._stand_ins and key not in self._failed

    def __getitem__(self, key: str) -> PodCondition:
        found = self._failed.get(key)
        if found is not None:
            return found
        if self._scheduled(key):
            return _SCHEDULED_CONDITION
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        yield from self._failed
        yield from (k for k in self._bound if self._scheduled(k))

    def __len__(self) -> int:
        return len(self._failed) + sum(1 for k in self._bound if self._scheduled(k))


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
        self._start_wall = 0.0
        #: The cluster's pods by ``namespace/name`` (what the API server holds).
        self.pods: dict[str, Pod] = {}
        #: Pods this scheduler bound: key -> node and what the binding carried.
        self.bound: dict[str, BindRecord] = {}
        #: node -> the record of a bind there that carried no annotations, shared by all such.
        self._plain_binds: dict[str, BindRecord] = {}
        self.events = EventLog()
        #: key -> the pod's current PodScheduled condition.
        self.conditions = PodConditions(self.bound)
        #: key -> the message of the pod's latest FailedScheduling event.
        self.failures: dict[str, str] = {}
        #: "<pod key>: <message>" of each Warning a plugin gave (``warn``), in order, once each.
        self.pod_warnings: dict[str, None] = {}
        self.bind_failures = 0
        self._sharing = PodSharing()
        #: Bound pods whose watch update (old, new) has not reached the scheduler yet.
        self._unconfirmed: list[tuple[Pod, Pod]] = []
        #: Pods deleted by a preemption: key -> where they ran and for whom.
        self.preempted: dict[str, Preemption] = {}
        #: Pods evicted by ElasticQuota's overuse revoke controller: key -> where they ran and why.
        self.revoked: dict[str, Preemption] = {}
        #: key -> the node a preemption nominated the pod to (its status.nominatedNodeName).
        self.nominations: dict[str, str] = {}
        #: Pods deleted whose watch event has not reached the scheduler yet.
        self._deleted: list[Pod] = []
        #: Objects written for pods standing for them (a Reservation bound or refused), not yet
        #: delivered: (kind, key, new object).
        self._object_writes: list[tuple[str, str, Any]] = []
        #: PV and claim writes, answered by a simulated PV controller and provisioner.
        self.volumes = SimVolumeController(self._deliver_object, self._objects_of)
        #: node -> the annotations written on it (DeviceShare's node locks) over the input's; None:
        #: removed (by the simulated device plugin).
        self.node_annotations: dict[str, dict[str, str | None]] = {}
        #: Called by :meth:`deliver` with the pods whose watch events it delivered (bound, updated,
        #: deleted), right after them: the controllers that follow them (``SimControllers``).
        self.after_delivery: Callable[[Sequence[Pod]], None] | None = None

    def attach(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self._start_wall = scheduler.clock.wall()

    @property
    def start_wall(self) -> float:
        """Wall time at the run's start (when the input was loaded): what an object without
        creationTimestamp counts as created at."""
        return self._start_wall

    def add_pod(self, pod: Pod) -> None:
        """A pod exists in the cluster (the loader's input)."""
        self.pods[sys.intern(pod.key)] = pod

    # --- OutputPort ----------------------------------------------------------------------------

    def _stand_in(self, pod: Pod) -> tuple[str, str, Any, PodStandIn[Any]] | None:
        """The object ``pod`` stands for (a Reservation's reserve pod): (kind, key, object, stand-in)."""
        found = self._scheduler.stand_in_of(pod) if self._scheduler is not None else None
        if found is None or found[0].stand_in is None:
            return None
        kind, key, obj = found
        return kind.kind, key, obj, found[0].stand_in

    async def bind(self, pod: Pod, node_name: str, plan: BindingPlan) -> None:
        if self._scheduler is None:
            raise RuntimeError("SimPort.attach(scheduler) was not called")
        if self.bind_hook is not None:
            refusal = self.bind_hook(pod, node_name)
            if refusal:
                self.bind_failures += 1
                raise BindError(refusal)
        stand_in = self._stand_in(pod)
        if stand_in is not None:
            # Koordinator's Reservation Bind: the object's status is written, no Binding is made.
            kind, key, obj, si = stand_in
            if obj.status.node_name:
                self.bind_failures += 1
                raise BindError(f"{kind} {key} is already assigned to node {obj.status.node_name!r}")
            new = si.bound(obj, node_name, dict(plan.annotations), self._scheduler.clock.wall())
            self._object_writes.append((kind, key, new))
            self.bound[f"{kind}/{key}"] = BindRecord(node_name, dict(plan.annotations))
            self.conditions.stand_in_bound(f"{kind}/{key}")
            return
        current = self.pods.get(pod.key, pod)
        if current.spec.node_name:
            # The API server refuses to bind a bound pod (409 Conflict).
            self.bind_failures += 1
            raise BindError(f"pod {pod.key} is already assigned to node {current.spec.node_name!r}")
        meta = current.metadata
        if plan.annotations:
            meta = msgspec.structs.replace(meta, annotations={**meta.annotations, **plan.annotations})
        if plan.labels:
            meta = msgspec.structs.replace(meta, labels={**meta.labels, **plan.labels})
        self._device_plugin_allocated(node_name, pod)
        conditions = [c for c in current.status.conditions if c.type != "PodScheduled"]
        conditions.append(_SCHEDULED_CONDITION)
        # Pods of one template bound to one node hold one spec and one status between them.
        bound = msgspec.structs.replace(
            current,
            metadata=meta,
            spec=self._sharing.spec(msgspec.structs.replace(current.spec, node_name=node_name)),
            status=self._sharing.status(msgspec.structs.replace(current.status, conditions=conditions)),
        )
        key = sys.intern(pod.key)  # one string for every table that names the pod
        self.pods[key] = bound
        if plan.annotations:
            record = BindRecord(node_name, dict(plan.annotations))
        else:
            record = self._plain_binds.get(node_name) or self._plain_binds.setdefault(
                node_name, BindRecord(node_name, _NO_ANNOTATIONS)
            )
        self.bound[key] = record
        self.conditions.scheduled(key)
        # The watch event that will confirm the bind (the scheduler turns its assumed pod into a bound one).
        self._unconfirmed.append((current, bound))

    def deliver(self) -> int:
        """Hand the scheduler the watch events of the writes done so far (binds, status patches,
        deletions), in order; returns how many."""
        pending, self._unconfirmed = self._unconfirmed, []
        deleted, self._deleted = self._deleted, []
        writes, self._object_writes = self._object_writes, []
        sched = self._scheduler
        if sched is None:
            return 0
        for kind, key, obj in writes:
            sched.on_object(kind, key, obj)
        for old, new in pending:
            sched.on_pod_update(old, new)
        for pod in deleted:
            sched.on_pod_delete(pod)
        if self.after_delivery is not None and (pending or deleted):
            self.after_delivery([new for _, new in pending] + deleted)
        return len(pending) + len(writes) + len(deleted)

    def preempt(self, preemptor: Pod, node_name: str, victims: list[Pod], *, message: str = "") -> None:
        """Delete the victims (uid as precondition), each with kube-scheduler's ``Preempted`` event."""
        for victim in victims:
            current = self.pods.get(victim.key)
            if current is None or current.metadata.uid != victim.metadata.uid:
                continue  # already gone, or a new pod of the same name: the precondition fails
            del self.pods[victim.key]
            # The victim's own node: a gang member evicted beside the chosen victim may run on
            # another node than the preemptor's (which the message and the event name).
            self.preempted[victim.key] = Preemption(
                current.spec.node_name or victim.spec.node_name,
                preemptor.key,
                message or f"preempted by {preemptor.key} on node {node_name}",
            )
            who = preemptor.metadata.uid or preemptor.key
            self._event("Normal", PREEMPTED, victim, f"Preempted by pod {who} on node {node_name}")
            self._deleted.append(current)

    def revoke(self, pod: Pod, message: str) -> bool:
        """Evict a pod for its quota's overuse (the Eviction API's delete, uid as precondition)."""
        current = self.pods.get(pod.key)
        if current is None or current.metadata.uid != pod.metadata.uid or not current.spec.node_name:
            return False
        del self.pods[pod.key]
        self.revoked[pod.key] = Preemption(current.spec.node_name, "", message)
        self._deleted.append(current)
        return True

    def write_object(self, kind: str, key: str, obj: Any) -> None:
        """Store a controller's write of an object; the scheduler sees it on :meth:`deliver`."""
        self._object_writes.append((kind, key, obj))

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
        stand_in = self._stand_in(pod)
        if stand_in is not None:
            # Koordinator's Reservation Bind: a Scheduled event on the Reservation (cluster-scoped).
            name = stand_in[2].metadata.name
            self.events.append(SimEvent("Normal", SCHEDULED, "", name, assigned_to=node_name))
            return
        meta = pod.metadata
        bound = self.pods.get(pod.key)
        if bound is not None and bound.spec.node_name == node_name and bound.metadata.uid == meta.uid:
            self.events.scheduled(bound)  # kept as the bound pod: one per bound pod
            return
        self.events.append(SimEvent("Normal", SCHEDULED, meta.namespace, meta.name, assigned_to=node_name))

    def unschedulable(self, pod: Pod, reason: str, message: str) -> None:
        stand_in = self._stand_in(pod)
        if stand_in is not None and self._scheduler is not None:
            kind, key, obj, si = stand_in
            self._object_writes.append(
                (kind, key, si.unschedulable(obj, message, self._scheduler.clock.wall()))
            )
        self.conditions.failed(
            pod.key, PodCondition(type="PodScheduled", status="False", reason=reason, message=message)
        )
        self.failures[pod.key] = message
        self._event("Warning", FAILED_SCHEDULING, pod, message)

    def invalid_pod(self, pod: Pod, message: str) -> None:
        self.unschedulable(pod, "Unschedulable", message)

    def warn(self, pod: Pod, reason: str, message: str) -> None:
        """A Warning event on the pod; the simulator's warnings list the message once."""
        self._event("Warning", reason, pod, message)
        self.pod_warnings.setdefault(f"{pod.key}: {message}", None)

    # --- volume binding (the VolumeBinding plugin's writer) ----------------------------------------

    async def update_persistent_volume(self, pv: PersistentVolume) -> PersistentVolume:
        return self.volumes.update_pv(pv)

    async def update_persistent_volume_claim(self, pvc: PersistentVolumeClaim) -> PersistentVolumeClaim:
        return self.volumes.update_pvc(pvc)

    async def wait_for_volume_binding(self, done: Callable[[], bool], limit_s: float) -> bool:
        # The simulated controllers answered within the writes: nothing more will come.
        return done()

    # --- node lock (DeviceShare's DevicePluginAdaption: NodeLockWriter) ---------------------------

    async def read_node_annotations(self, node_name: str) -> tuple[Mapping[str, str], str] | None:
        info = self._scheduler.cache.snapshot.by_name.get(node_name) if self._scheduler else None
        if info is None:
            return None
        merged: dict[str, str | None] = {
            **info.node.metadata.annotations,
            **self.node_annotations.get(node_name, {}),
        }
        return {k: v for k, v in merged.items() if v is not None}, ""

    async def pod_exists(self, namespace: str, name: str) -> bool:
        return f"{namespace}/{name}" in self.pods

    async def patch_node_annotations(
        self, node_name: str, annotations: Mapping[str, str], resource_version: str
    ) -> None:
        self.node_annotations.setdefault(node_name, {}).update(annotations)

    def _device_plugin_allocated(self, node_name: str, pod: Pod) -> None:
        """The vendor's device plugin has allocated the bound pod's devices: it removes the node
        lock the pod held (``<time>,<namespace>,<name>``), so the next pod can take it."""
        written = self.node_annotations.get(node_name)
        if not written:
            return
        suffix = f",{pod.metadata.namespace},{pod.metadata.name}"
        for key, value in written.items():
            if value is not None and value.endswith(suffix) and value.count(",") == 2:
                written[key] = None

    def _deliver_object(self, kind: str, key: str, obj: Any) -> None:
        if self._scheduler is None:
            raise RuntimeError("SimPort.attach(scheduler) was not called")
        self._scheduler.on_object(kind, key, obj)

    def _objects_of(self, kind: str) -> Mapping[str, Any]:
        return self._scheduler.objects.get(kind, {}) if self._scheduler is not None else {}

    # --- helpers -------------------------------------------------------------------------------

    def _event(self, type_: str, reason: str, pod: Pod, message: str) -> None:
        self.events.append(SimEvent(type_, reason, pod.metadata.namespace, pod.metadata.name, message))

    def events_for(self, key: str) -> list[SimEvent]:
        return [e for e in self.events if f"{e.namespace}/{e.name}" == key]
