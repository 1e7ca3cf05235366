"""The output port to a real API server: bind, events, and the PodScheduled condition.

Binding is the only write the scheduler waits on. It goes through ``pods/binding`` with the
plan's annotations on the Binding's metadata: the API server copies them onto the pod in the
same update that sets ``spec.nodeName``, so Koordinator's "annotate, then bind" is one request.

Events and the ``PodScheduled=False`` status patch are fire-and-forget on background writers.
Status patches are coalesced per pod (only the newest condition is sent), skipped when the pod
already shows it, and dropped once the pod is bound, so a late "Unschedulable" can never land
on a pod that was just scheduled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from koordsched.api.core import Pod
from koordsched.backends.kube.client import (
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    TRANSPORT_ERRORS,
    ApiError,
    KubeClient,
)
from koordsched.backends.kube.events import NORMAL, WARNING, WRITE_TIMEOUT, EventRecorder
from koordsched.backends.kube.timefmt import rfc3339
from koordsched.backends.kube.writer import BackgroundWriter
from koordsched.framework.interface import BindError
from koordsched.framework.types import BindingPlan

log = logging.getLogger(__name__)

SCHEDULED = "Scheduled"
FAILED_SCHEDULING = "FailedScheduling"
POD_SCHEDULED = "PodScheduled"
UNSCHEDULABLE = "Unschedulable"

#: A bind that takes longer than this is abandoned (and the pod retried).
BIND_TIMEOUT = 30.0
#: A bind waits at most this long for an in-flight status patch of the same pod.
PATCH_WAIT = 5.0
#: How many pods' last-sent condition are remembered, to skip repeating it.
SENT_MEMORY = 10_000


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
        self._pending: dict[str, _Condition] = {}
        self._inflight: dict[str, asyncio.Event] = {}
        self._sent: OrderedDict[str, tuple[str, str]] = OrderedDict()

    # --- OutputPort ----------------------------------------------------------------------------

    async def bind(self, pod: Pod, node_name: str, plan: BindingPlan) -> None:
        uid = pod.identity
        # A PodScheduled=False still queued for this pod is obsolete now; one in flight is let finish
        # first, so it cannot overwrite the PodScheduled=True the binding sets.
        self._pending.pop(uid, None)
        inflight = self._inflight.get(uid)
        if inflight is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(inflight.wait(), PATCH_WAIT)
        try:
            if plan.labels:
                # The binding does not carry labels (the server copies only a few); patch them first.
                meta: dict[str, Any] = {"labels": dict(plan.labels)}
                if pod.metadata.uid:
                    meta["uid"] = pod.metadata.uid
                await self.client.request_bytes(
                    "PATCH",
                    _pod_path(pod),
                    body={"metadata": meta},
                    content_type=MERGE_PATCH,
                    request_timeout=self.bind_timeout,
                )
            await self.client.request_bytes(
                "POST",
                _pod_path(pod, "binding"),
                body=binding_body(pod, node_name, plan),
                request_timeout=self.bind_timeout,
            )
        except ApiError as err:
            raise BindError(err.message) from err
        except TRANSPORT_ERRORS as err:
            raise BindError(
                f"binding pod {pod.key} to node {node_name}: {type(err).__name__}: {err}"
            ) from err
        self._pending.pop(uid, None)
        self._sent.pop(uid, None)

    def scheduled(self, pod: Pod, node_name: str) -> None:
        self.events.record(
            pod, NORMAL, SCHEDULED, "Binding", f"Successfully assigned {pod.key} to {node_name}"
        )

    def unschedulable(self, pod: Pod, reason: str, message: str) -> None:
        self.events.record(pod, WARNING, FAILED_SCHEDULING, "Scheduling", message)
        self._set_condition(pod, reason, message)

    def invalid_pod(self, pod: Pod, message: str) -> None:
        self.unschedulable(pod, UNSCHEDULABLE, message)

    # --- the PodScheduled condition ------------------------------------------------------------

    def _set_condition(self, pod: Pod, reason: str, message: str) -> None:
        uid = pod.identity
        if self._sent.get(uid) == (reason, message) or _shows(pod, reason, message):
            return
        queued = uid in self._pending
        self._pending[uid] = _Condition(pod, reason, message)
        if not queued and not self.status_writer.submit(lambda: self._send_condition(uid)):
            self._pending.pop(uid, None)

    async def _send_condition(self, uid: str) -> None:
        cond = self._pending.pop(uid, None)
        if cond is None:
            return  # superseded by a bind
        done = self._inflight[uid] = asyncio.Event()
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
                return
            raise
        finally:
            done.set()
            if self._inflight.get(uid) is done:
                del self._inflight[uid]
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
        """Give queued writes ``grace`` seconds each, then stop the writers."""
        await self.status_writer.close(grace)
        await self.events.close(grace)
