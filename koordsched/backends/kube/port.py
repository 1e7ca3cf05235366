"""The output port to a real API server: bind, events, and the PodScheduled condition.

Binding is the only write the scheduler waits on. It goes through ``pods/binding`` with the
plan's annotations on the Binding's metadata: the API server copies them onto the pod in the
same update that sets ``spec.nodeName``, so Koordinator's "annotate, then bind" is one request.

Events and the ``PodScheduled=False`` status patch are fire-and-forget on background writers.
Status patches are coalesced per pod (only the newest condition is sent), skipped when the pod
already shows it, and dropped once the pod is bound, so a late "Unschedulable" can never land
on a pod that was just scheduled. A status patch is retried as kube-scheduler retries it
(``PatchPodStatus``: ``retry.OnError(retry.DefaultBackoff, Retriable)``): up to 4 tries, 10 ms
apart growing fivefold, on 500, 503 or a refused connection.

A bind is never retried blindly. When its request fails without an answer (a timeout, a dropped
connection: the server may have bound the pod), the pod is read back: bound to our node means
done; bound elsewhere, gone or recreated means failed; still unbound means the binding is sent
again, which is safe because the server refuses to bind a pod that has a node. The pod stays
assumed (its resources held) until that is known, so nothing it may have been given is handed
out twice; only a refused connection (the request never left) fails at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import msgspec

from koordsched.api.core import Pod
from koordsched.api.storage import PersistentVolume, PersistentVolumeClaim
from koordsched.backends.kube.client import (
    JSON,
    STRATEGIC_MERGE_PATCH,
    TRANSPORT_ERRORS,
    ApiError,
    KubeClient,
)
from koordsched.backends.kube.events import NORMAL, WARNING, WRITE_TIMEOUT, EventRecorder
from koordsched.backends.kube.node_lock import KubeNodeLock
from koordsched.backends.kube.stand_ins import StandInWrites
from koordsched.backends.kube.timefmt import rfc3339
from koordsched.backends.kube.volumes import KubeVolumeWriter
from koordsched.backends.kube.writer import BackgroundWriter
from koordsched.framework.interface import BindError
from koordsched.framework.types import BindingPlan

log = logging.getLogger(__name__)

SCHEDULED = "Scheduled"
FAILED_SCHEDULING = "FailedScheduling"
POD_SCHEDULED = "PodScheduled"
UNSCHEDULABLE = "Unschedulable"
PREEMPTED = "Preempted"

#: A bind that takes longer than this is abandoned (and the pod retried).
BIND_TIMEOUT = 30.0
#: A bind waits at most this long for an in-flight status patch of the same pod.
PATCH_WAIT = 5.0
#: How many pods' last-sent condition are remembered, to skip repeating it.
SENT_MEMORY = 10_000
#: kube-scheduler's ``retry.DefaultBackoff`` for status patches: tries, first delay, factor, jitter.
STATUS_TRIES = 4
STATUS_BACKOFF = 0.010
STATUS_FACTOR = 5.0
STATUS_JITTER = 0.1
#: How long a bind whose answer was lost may take to find out whether it landed.
BIND_OUTCOME_TIMEOUT = 120.0
#: Delays between those checks: from this, doubling, up to the cap.
BIND_CHECK_BACKOFF = 0.2
BIND_CHECK_CAP = 5.0


@dataclass
class _Condition:
    pod: Pod
    reason: str
    message: str


def binding_body(pod: Pod, node_name: str, plan: BindingPlan) -> dict[str, Any]:
    """A ``v1.Binding``. The pod's uid is a precondition: current servers refuse the binding for a
    recreated pod of the same name (kube-apiserver 1.20 ignores it; the watch then shows the bind).
    """
    meta: dict[str, Any] = {"name": pod.metadata.name, "namespace": pod.metadata.namespace}
    if pod.metadata.uid:
        meta["uid"] = pod.metadata.uid
    if plan.annotations:
        meta["annotations"] = dict(plan.annotations)
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
    }


def condition_patch(pod: Pod, reason: str, message: str, now: str | None = None) -> dict[str, Any]:
    """A strategic merge patch of ``status.conditions`` (merged by ``type``), as kube-scheduler sends.

    ``lastTransitionTime`` moves only when the condition's status changes. The pod's uid rides
    along as a precondition: the patch fails rather than mark a recreated pod of the same name.
    """
    prev = next((c for c in pod.status.conditions if c.type == POD_SCHEDULED), None)
    if prev is not None and prev.status == "False" and prev.last_transition_time:
        transition = prev.last_transition_time
    else:
        transition = now or rfc3339()
    patch: dict[str, Any] = {
        "status": {
            "conditions": [
                {
                    "type": POD_SCHEDULED,
                    "status": "False",
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": transition,
                }
            ]
        }
    }
    if pod.metadata.uid:
        patch["metadata"] = {"uid": pod.metadata.uid}
    return patch


def delete_body(pod: Pod) -> dict[str, Any]:
    """DeleteOptions for a preemption victim: its uid as a precondition, so a recreated pod of the
    same name is never deleted in its place."""
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if pod.metadata.uid:
        body["preconditions"] = {"uid": pod.metadata.uid}
    return body


def disruption_patch(
    victim: Pod, scheduler_name: str, now: str | None = None, *, message: str = ""
) -> dict[str, Any]:
    """The ``DisruptionTarget`` condition kube-scheduler sets on a victim before deleting it
    (PodDisruptionConditions, on by default since 1.26), merged by type, uid as a precondition;
    ``message`` replaces kube-scheduler's (a job-level preemption writes Koordinator's)."""
    text = message or f"{scheduler_name}: preempting to accommodate a higher priority pod"
    patch: dict[str, Any] = {
        "status": {
            "conditions": [
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "PreemptionByScheduler",
                    "message": text,
                    "lastTransitionTime": now or rfc3339(),
                }
            ]
        }
    }
    if victim.metadata.uid:
        patch["metadata"] = {"uid": victim.metadata.uid}
    return patch


def nomination_patch(pod: Pod, node_name: str) -> dict[str, Any]:
    """``status.nominatedNodeName`` set (or removed, for ``""``), uid as a precondition."""
    patch: dict[str, Any] = {"status": {"nominatedNodeName": node_name or None}}
    if pod.metadata.uid:
        patch["metadata"] = {"uid": pod.metadata.uid}
    return patch


class _PodSpec(msgspec.Struct, rename="camel"):
    node_name: str = ""


class _PodMeta(msgspec.Struct):
    uid: str = ""


class _BoundPod(msgspec.Struct):
    """What a bind's check reads of a pod."""

    metadata: _PodMeta = msgspec.field(default_factory=_PodMeta)
    spec: _PodSpec = msgspec.field(default_factory=_PodSpec)


_BOUND_POD = msgspec.json.Decoder(_BoundPod)


def refused(err: BaseException) -> bool:
    """The connection was refused: the request never reached the server (Go's IsConnectionRefused)."""
    if isinstance(err, aiohttp.ClientConnectorError):
        return err.errno == errno.ECONNREFUSED or isinstance(err.os_error, ConnectionRefusedError)
    return isinstance(err, ConnectionRefusedError)


def status_retriable(err: BaseException) -> bool:
    """kube-scheduler's ``Retriable``: InternalError (500), ServiceUnavailable (503), connection refused."""
    if isinstance(err, ApiError):
        return err.status in (500, 503)
    return refused(err)


@dataclass
class _Sending:
    """A pod whose condition is being sent (tries and the pauses between them)."""

    idle: asyncio.Event
    superseded: bool = False


def _shows(pod: Pod, reason: str, message: str) -> bool:
    return any(
        c.type == POD_SCHEDULED and c.status == "False" and c.reason == reason and c.message == message
        for c in pod.status.conditions
    )


def _pod_path(pod: Pod, sub: str = "") -> str:
    path = f"/api/v1/namespaces/{pod.metadata.namespace}/pods/{pod.metadata.name}"
    return f"{path}/{sub}" if sub else path


class KubePort:
    """Implements :class:`koordsched.scheduler.ports.OutputPort` against the API server.

    ``events_client`` should have its own rate limiter (kube-scheduler gives events a client of
    their own) so a burst of FailedScheduling events never delays a bind.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        events_client: KubeClient | None = None,
        hostname: str | None = None,
        controller: str | None = None,
        bind_timeout: float = BIND_TIMEOUT,
        write_timeout: float = WRITE_TIMEOUT,
        queue_size: int = 10_000,
        event_flush_interval: float = 10.0,
    ) -> None:
        self.client = client
        self.bind_timeout = bind_timeout
        self.write_timeout = write_timeout
        self.events = EventRecorder(
            events_client or client,
            hostname=hostname,
            controller=controller,
            queue_size=queue_size,
            flush_interval=event_flush_interval,
            write_timeout=write_timeout,
        )
        self.status_writer = BackgroundWriter("pod-status", maxsize=queue_size)
        #: Pods that stand for objects (Reservations): bound and refused by writing the object.
        #: Its ``scheduler`` is set once the scheduler exists.
        self.stand_ins = StandInWrites(client, write_timeout=write_timeout, queue_size=queue_size)
        self.bind_outcome_timeout = BIND_OUTCOME_TIMEOUT
        self._rng = random.Random()
        self._pending: dict[str, _Condition] = {}
        self._sending: dict[str, _Sending] = {}
        self._sent: OrderedDict[str, tuple[str, str]] = OrderedDict()
        #: Pods bound whose Scheduled event has a place reserved in the events queue.
        self._event_places: set[str] = set()
        #: VolumeBinding's PV/PVC writes (its PreBind reaches them through this port).
        self.volumes = KubeVolumeWriter(client, write_timeout)
        #: DeviceShare's node lock and pod labels (``DevicePluginAdaption``).
        self.node_lock = KubeNodeLock(client, write_timeout)

    # --- OutputPort ----------------------------------------------------------------------------

    def _stand_in(self, pod: Pod) -> tuple[Any, str, Any] | None:
        sched = self.stand_ins.scheduler
        return sched.stand_in_of(pod) if sched is not None else None

    async def bind(self, pod: Pod, node_name: str, plan: BindingPlan) -> None:
        # The Scheduled event this bind leads to is never dropped: its place in the events queue
        # is reserved first, and a backlog of events holds the bind back instead (the events
        # writer runs apart, as kube-scheduler's recorder). :meth:`scheduled` gives it back.
        await self.events.reserve()
        try:
            await self._bind(pod, node_name, plan)
        except BaseException:
            self.events.release()
            raise
        if pod.identity in self._event_places:
            self.events.release()  # bound twice without its event: one place is enough
        self._event_places.add(pod.identity)

    async def _bind(self, pod: Pod, node_name: str, plan: BindingPlan) -> None:
        stand_in = self._stand_in(pod)
        if stand_in is not None:
            kind, key, obj = stand_in
            await self.stand_ins.bind(kind, key, obj, node_name, plan.annotations)
            return
        uid = pod.identity
        # A PodScheduled=False still queued for this pod is obsolete now; one on the wire is let
        # finish first, so it cannot overwrite the PodScheduled=True the binding sets, and is not
        # tried again.
        self._pending.pop(uid, None)
        sending = self._sending.get(uid)
        if sending is not None:
            sending.superseded = True
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(PATCH_WAIT):
                    await sending.idle.wait()
        try:
            if plan.labels:
                # A Binding carries annotations only: the labels go onto the pod first.
                m = pod.metadata
                await self.node_lock.patch_pod_labels(m.namespace, m.name, m.uid, plan.labels)
            try:
                await self._post_binding(pod, node_name, plan)
            except TRANSPORT_ERRORS as err:
                if refused(err):
                    raise
                await self._bind_outcome(pod, node_name, plan, err)
        except ApiError as err:
            raise BindError(err.message) from err
        except TRANSPORT_ERRORS as err:
            raise BindError(
                f"binding pod {pod.key} to node {node_name}: {type(err).__name__}: {err}"
            ) from err
        self._pending.pop(uid, None)
        self._sent.pop(uid, None)

    async def _post_binding(self, pod: Pod, node_name: str, plan: BindingPlan) -> None:
        await self.client.request_bytes(
            "POST",
            _pod_path(pod, "binding"),
            body=binding_body(pod, node_name, plan),
            request_timeout=self.bind_timeout,
        )

    async def _bind_outcome(self, pod: Pod, node_name: str, plan: BindingPlan, first: BaseException) -> None:
        """After a binding whose answer was lost: read the pod until we know, rebinding if unbound.

        Returns when the pod is bound to ``node_name``; raises BindError when it cannot be.
        """
        log.warning(
            "binding pod %s to node %s: %s: %s; reading the pod back to find out whether it landed",
            pod.key,
            node_name,
            type(first).__name__,
            first,
        )
        deadline = time.monotonic() + self.bind_outcome_timeout
        delay = BIND_CHECK_BACKOFF
        last: BaseException = first
        while time.monotonic() < deadline:
            try:
                raw = await self.client.request_bytes(
                    "GET", _pod_path(pod), request_timeout=self.bind_timeout
                )
            except ApiError as err:
                if err.status == 404:
                    raise BindError(f"binding pod {pod.key} to node {node_name}: the pod is gone") from err
                if not err.transient:
                    raise
                last = err
            except TRANSPORT_ERRORS as err:
                last = err
            else:
                found = _BOUND_POD.decode(raw)
                if pod.metadata.uid and found.metadata.uid and found.metadata.uid != pod.metadata.uid:
                    raise BindError(f"binding pod {pod.key} to node {node_name}: the pod was recreated")
                if found.spec.node_name == node_name:
                    log.info("pod %s: the binding to node %s had landed", pod.key, node_name)
                    return
                if found.spec.node_name:
                    raise BindError(f"pod {pod.key} is already assigned to node {found.spec.node_name}")
                try:
                    await self._post_binding(pod, node_name, plan)  # safe: refused once it has a node
                    return
                except ApiError as err:
                    if err.status != 409 and not err.transient:
                        raise
                    last = err  # 409: bound meanwhile (by this very binding?); the next read tells
                except TRANSPORT_ERRORS as err:
                    last = err
            pause = min(delay, max(0.0, deadline - time.monotonic()))
            delay = min(BIND_CHECK_CAP, delay * 2)
            await asyncio.sleep(pause * (0.5 + self._rng.random()))
        raise BindError(
            f"binding pod {pod.key} to node {node_name}: outcome unknown after "
            f"{self.bind_outcome_timeout:g}s: {type(last).__name__}: {last}"
        )

    def scheduled(self, pod: Pod, node_name: str) -> None:
        try:
            self._scheduled(pod, node_name)
        finally:
            if pod.identity in self._event_places:
                self._event_places.discard(pod.identity)
                self.events.release()

    def _scheduled(self, pod: Pod, node_name: str) -> None:
        stand_in = self._stand_in(pod)
        if stand_in is not None:
            # Koordinator's Reservation Bind: a Scheduled event on the Reservation itself.
            kind, _, obj = stand_in
            regarding = {"apiVersion": obj.api_version, "kind": kind.kind, "name": obj.metadata.name}
            if obj.metadata.uid:
                regarding["uid"] = obj.metadata.uid
            note = f"Successfully assigned {obj.metadata.name} to {node_name}"
            self.events.record(pod, NORMAL, SCHEDULED, "Binding", note, regarding=regarding)
            return
        self.events.record(
            pod, NORMAL, SCHEDULED, "Binding", f"Successfully assigned {pod.key} to {node_name}"
        )

    def unschedulable(self, pod: Pod, reason: str, message: str) -> None:
        stand_in = self._stand_in(pod)
        if stand_in is not None:
            kind, key, obj = stand_in
            self.stand_ins.unschedulable(kind, key, obj, message)
            return
        self.events.record(pod, WARNING, FAILED_SCHEDULING, "Scheduling", message)
        self._set_condition(pod, reason, message)

    def invalid_pod(self, pod: Pod, message: str) -> None:
        self.unschedulable(pod, UNSCHEDULABLE, message)

    def warn(self, pod: Pod, reason: str, message: str) -> None:
        if self._stand_in(pod) is None:
            self.events.record(pod, WARNING, reason, "Scheduling", message)

    def preempt(self, preemptor: Pod, node_name: str, victims: list[Pod], *, message: str = "") -> None:
        for victim in victims:
            self.events.record(
                victim,
                NORMAL,
                PREEMPTED,
                "Preempting",
                f"Preempted by pod {preemptor.metadata.uid or preemptor.key} on node {node_name}",
            )
            job = functools.partial(self._evict, victim, preemptor.spec.scheduler_name, message)
            if not self.status_writer.submit(job):
                log.error("pod %s: not deleted for preemption (write queue full)", victim.key)

    async def _evict(self, victim: Pod, scheduler_name: str, message: str = "") -> None:
        """kube-scheduler's eviction of a victim: the DisruptionTarget condition, then the delete
        (not sent when the condition could not be written, as upstream)."""
        patch = disruption_patch(victim, scheduler_name, message=message)
        if await self._write(victim, "PATCH", "status", patch):
            await self._write(victim, "DELETE", "", delete_body(victim))

    def nominate(self, pod: Pod, node_name: str) -> None:
        job = functools.partial(self._nominate, pod, node_name)
        if not self.status_writer.submit(job):
            log.error("pod %s: nominatedNodeName not written (write queue full)", pod.key)

    async def _nominate(self, pod: Pod, node_name: str) -> None:
        await self._write(pod, "PATCH", "status", nomination_patch(pod, node_name))

    async def _write(self, pod: Pod, method: str, sub: str, body: dict[str, Any]) -> bool:
        """One write about ``pod``, retried as status patches are; True when it was done (a pod gone
        or recreated under the same name is left alone: False)."""
        delay = STATUS_BACKOFF
        for tries in range(1, STATUS_TRIES + 1):
            try:
                await self.client.request_bytes(
                    method,
                    _pod_path(pod, sub),
                    body=body,
                    content_type=STRATEGIC_MERGE_PATCH if method == "PATCH" else JSON,
                    request_timeout=self.write_timeout,
                )
                return True
            except ApiError as err:
                if err.status in (404, 409, 422):
                    log.debug("pod %s: %s %s not done: %s", pod.key, method, sub or "pod", err)
                    return False
                if tries >= STATUS_TRIES or not status_retriable(err):
                    log.error("pod %s: %s %s failed: %s", pod.key, method, sub or "pod", err)
                    return False
            except TRANSPORT_ERRORS as err:
                if tries >= STATUS_TRIES or not status_retriable(err):
                    log.error(
                        "pod %s: %s %s failed: %s: %s", pod.key, method, sub or "pod", type(err).__name__, err
                    )
                    return False
            await asyncio.sleep(delay * (1.0 + STATUS_JITTER * self._rng.random()))
            delay *= STATUS_FACTOR
        return False

    # --- volume binding (koordsched.plugins.volumebinding.VolumeBindingWriter) -------------------

    async def update_persistent_volume(self, pv: PersistentVolume) -> PersistentVolume:
        return await self.volumes.update_pv(pv)

    async def update_persistent_volume_claim(self, pvc: PersistentVolumeClaim) -> PersistentVolumeClaim:
        return await self.volumes.update_pvc(pvc)

    async def wait_for_volume_binding(self, done: Callable[[], bool], limit_s: float) -> bool:
        return await self.volumes.wait(done, limit_s)

    # --- node lock (koordsched.plugins.deviceshare.node_lock.NodeLockWriter) ---------------------

    async def read_node_annotations(self, node_name: str) -> tuple[Mapping[str, str], str] | None:
        return await self.node_lock.read_node_annotations(node_name)

    async def pod_exists(self, namespace: str, name: str) -> bool:
        return await self.node_lock.pod_exists(namespace, name)

    async def patch_node_annotations(
        self, node_name: str, annotations: Mapping[str, str], resource_version: str
    ) -> None:
        await self.node_lock.patch_node_annotations(node_name, annotations, resource_version)

    # --- the PodScheduled condition ------------------------------------------------------------

    def _set_condition(self, pod: Pod, reason: str, message: str) -> None:
        uid = pod.identity
        if self._sent.get(uid) == (reason, message) or _shows(pod, reason, message):
            return
        queued = uid in self._pending or uid in self._sending  # a sender picks up the newest
        self._pending[uid] = _Condition(pod, reason, message)
        if not queued and not self.status_writer.submit(lambda: self._send_condition(uid)):
            self._pending.pop(uid, None)

    async def _send_condition(self, uid: str) -> None:
        """Send the newest pending condition of the pod, retrying as kube-scheduler does."""
        sending = self._sending[uid] = _Sending(asyncio.Event())
        sending.idle.set()
        delay = STATUS_BACKOFF
        tries = 0
        try:
            while not sending.superseded:
                cond = self._pending.pop(uid, None)
                if cond is None:
                    return  # superseded by a bind, or nothing newer to send
                tries += 1
                sending.idle.clear()
                try:
                    await self.client.request_bytes(
                        "PATCH",
                        _pod_path(cond.pod, "status"),
                        body=condition_patch(cond.pod, cond.reason, cond.message),
                        content_type=STRATEGIC_MERGE_PATCH,
                        request_timeout=self.write_timeout,
                    )
                except ApiError as err:
                    if err.status in (404, 409, 422):  # the pod is gone, or was recreated under the same name
                        log.debug("pod %s: status not updated: %s", cond.pod.key, err)
                        tries = 0
                        continue
                    if tries >= STATUS_TRIES or not status_retriable(err):
                        raise
                except TRANSPORT_ERRORS as err:
                    if tries >= STATUS_TRIES or not status_retriable(err):
                        raise
                else:
                    self._remember_sent(uid, cond)
                    tries = 0
                    continue  # a newer condition may have been queued meanwhile
                finally:
                    sending.idle.set()
                self._pending.setdefault(uid, cond)  # unless something newer came: send that
                pause = delay * (1.0 + STATUS_JITTER * self._rng.random())
                delay *= STATUS_FACTOR
                await asyncio.sleep(pause)
        finally:
            if self._sending.get(uid) is sending:
                del self._sending[uid]
            # Queued after a bind superseded us (the bind failed and the pod is unschedulable
            # again): that one is current, send it.
            resend = sending.superseded and uid in self._pending
            if resend and not self.status_writer.submit(lambda: self._send_condition(uid)):
                self._pending.pop(uid, None)

    def _remember_sent(self, uid: str, cond: _Condition) -> None:
        self._sent[uid] = (cond.reason, cond.message)
        self._sent.move_to_end(uid)
        while len(self._sent) > SENT_MEMORY:
            self._sent.popitem(last=False)

    # --- lifecycle -----------------------------------------------------------------------------

    async def flush(self) -> None:
        """Wait until every queued event and status patch was sent (tests, shutdown)."""
        await self.status_writer.join()
        await self.events.writer.join()

    async def close(self, grace: float = 2.0) -> None:
        """Give queued writes ``grace`` seconds (both writers at once), then stop the writers.

        Returns within ``grace`` and the writers' short unwind, whatever the server does.
        """
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.status_writer.close(grace))
            tg.create_task(self.events.close(grace))
            tg.create_task(self.stand_ins.close(grace))
