"""The MigrationController's writes to a real API server: PodMigrationJobs, evictions, Reservations.

Every request has a timeout. A PodMigrationJob is created once, then its status is written
through the status subresource and its annotations (``passed-arbitration``) with merge patches
of the object, each with the resourceVersion last seen as a precondition: a job someone else
wrote since (a user who set it ``Aborted``) is not overwritten; the watch brings their version
and the next write goes from it. An eviction goes through the
Eviction API (``policy/v1`` where the API server takes it, else ``policy/v1beta1``, looked up once:
:mod:`~koordsched.backends.kube.eviction`), so PodDisruptionBudgets are honoured: a 429 means a
budget forbids it now, and the job retries until its TTL. With
``evictionPolicy: Delete`` the pod is deleted instead. A 404 means the pod is gone.

ReservationFirst creates a ``scheduling.koordinator.sh/v1alpha1`` Reservation from the pod's
spec (owned by the pod's controller, so its replacement may use it) and reads its
``status.phase`` and ``status.nodeName``; the replacement is recognised by its
``scheduling.koordinator.sh/reservation-allocated`` annotation naming the Reservation.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Final

import msgspec

from koordsched.api.core import Pod
from koordsched.api.reservation import Reservation
from koordsched.backends.kube.client import JSON, MERGE_PATCH, TRANSPORT_ERRORS, ApiError, KubeClient
from koordsched.backends.kube.events import NORMAL, WARNING, EventRecorder, reporting_instance, truncate_note
from koordsched.backends.kube.eviction import EvictionApi
from koordsched.backends.kube.timefmt import micro_time
from koordsched.descheduler.handle import SchedulerHandle
from koordsched.descheduler.migration import job as pmj
from koordsched.descheduler.migration.args import POLICY_DELETE
from koordsched.descheduler.migration.controller import (
    BLOCKED,
    ERROR,
    EVICTED,
    GONE,
    EvictResult,
    ReservationState,
    template_affinity,
)
from koordsched.descheduler.migration.reservation import reservation_body, reservation_state

log = logging.getLogger(__name__)

#: Any single write or read of the MigrationController gives up after this many seconds.
WRITE_TIMEOUT: Final = 10.0
JOBS_PATH: Final = f"/apis/{pmj.API_VERSION}/{pmj.PLURAL}"
RESERVATIONS_PATH: Final = f"/apis/{pmj.API_VERSION}/reservations"
ANNOTATION_RESERVATION_ALLOCATED: Final = "scheduling.koordinator.sh/reservation-allocated"
#: Events are reported as Koordinator's descheduler reports them.
CONTROLLER: Final = "koord-descheduler"
#: Events on cluster-scoped objects go to "default", as client-go puts them.
JOB_EVENTS_NAMESPACE: Final = "default"


def _pod_path(pod: Pod) -> str:
    return f"/api/v1/namespaces/{pod.metadata.namespace}/pods/{pod.metadata.name}"


def _message(err: ApiError) -> str:
    try:
        status = json.loads(err.body)
        return str(status.get("message") or err)
    except (ValueError, AttributeError):
        return str(err)


def _pruned(value: Any) -> Any:
    """``value`` without null fields (a merge patch would read null as "delete")."""
    if isinstance(value, dict):
        return {k: _pruned(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


class KubeMigrationPort:
    def __init__(self, client: KubeClient, handle: SchedulerHandle, events: EventRecorder) -> None:
        self.client = client
        self.handle = handle
        self.events = events
        self.evictions = EvictionApi(client, timeout=WRITE_TIMEOUT)
        #: Job name -> what was last written (to skip writes that change nothing).
        self._written: dict[str, bytes] = {}
        #: Job name -> the resourceVersion the next write expects (the precondition).
        self._rv: dict[str, str] = {}
        #: Jobs whose last write met a newer version: the watch's next version is taken.
        self._stale: set[str] = set()
        #: Job name -> the resourceVersion the watch last brought.
        self._seen: dict[str, str] = {}

    def known(self, name: str) -> None:
        """The job exists in the cluster already (adopted): later saves patch it."""
        self._written.setdefault(name, b"")

    def observed(self, job: pmj.PodMigrationJob) -> None:
        """A version of the job from the watch: it becomes the precondition when none is known
        or the last write found the job changed."""
        name, rv = job.metadata.name, job.metadata.resource_version
        if not rv:
            return
        self._seen[name] = rv
        if name in self._stale or name not in self._rv:
            self._rv[name] = rv
            self._stale.discard(name)

    def _took(self, name: str, answer: Any) -> None:
        rv = ((answer or {}).get("metadata") or {}).get("resourceVersion")
        if rv:
            self._rv[name] = str(rv)

    async def _call(self, method: str, path: str, body: Any = None, content_type: str = JSON) -> Any:
        raw = await self.client.request_bytes(
            method, path, body=body, content_type=content_type, request_timeout=WRITE_TIMEOUT
        )
        return json.loads(raw) if raw else None

    # --- PodMigrationJobs ----------------------------------------------------------------------

    async def save(self, job: pmj.PodMigrationJob) -> None:
        """Create the job on first sight, else write what changed of its annotations and status."""
        encoded = msgspec.json.encode(job)
        name = job.metadata.name
        if self._written.get(name) == encoded:
            return
        if job.phase == pmj.ABORTED:
            self._written[name] = encoded  # someone else's status: never written over
            return
        if name in self._stale:
            return  # the watch has not brought the newer version yet
        try:
            if name not in self._written:
                body = _pruned(msgspec.to_builtins(job))
                body.pop("status", None)
                body["apiVersion"], body["kind"] = pmj.API_VERSION, pmj.KIND
                created = await self._call("POST", JOBS_PATH, body)
                job.metadata.uid = created["metadata"].get("uid", "")
                self._took(name, created)
            else:
                meta: dict[str, Any] = {"annotations": job.metadata.annotations}
                if name in self._rv:
                    meta["resourceVersion"] = self._rv[name]
                self._took(
                    name, await self._call("PATCH", f"{JOBS_PATH}/{name}", {"metadata": meta}, MERGE_PATCH)
                )
            status: dict[str, Any] = {"status": msgspec.to_builtins(job.status)}
            if name in self._rv:
                status["metadata"] = {"resourceVersion": self._rv[name]}
            self._took(name, await self._call("PATCH", f"{JOBS_PATH}/{name}/status", status, MERGE_PATCH))
        except ApiError as err:
            if err.status == 409 and name not in self._written:
                self._written[name] = b""  # created by an earlier try whose answer was lost
            elif err.status == 409:
                # Written by someone else since: theirs comes through the watch (and with it
                # a user's Aborted, which the controller reads before any write from it).
                latest = self._seen.get(name)
                if latest and latest != self._rv.get(name):
                    self._rv[name] = latest
                else:
                    self._stale.add(name)
                log.info("PodMigrationJob %s changed since it was read; written again from the watch's", name)
                return
            log.warning("PodMigrationJob %s: %s", name, _message(err))
            return
        except TRANSPORT_ERRORS as err:
            log.warning("PodMigrationJob %s: %s", name, err)
            return
        self._written[name] = encoded

    # --- evictions -----------------------------------------------------------------------------

    async def evict(self, pod: Pod, job: pmj.PodMigrationJob, policy: str) -> EvictResult:
        options = job.spec.delete_options or {}
        try:
            if policy == POLICY_DELETE:
                await self._call("DELETE", _pod_path(pod), options or None)
            else:
                body = await self.evictions.body(pod.metadata.name, pod.metadata.namespace, options)
                await self._call("POST", f"{_pod_path(pod)}/eviction", body)
        except ApiError as err:
            if err.status == 404:
                return EvictResult(GONE, _message(err))
            if err.status == 429:
                return EvictResult(BLOCKED, _message(err))
            if err.transient:
                return EvictResult(BLOCKED, _message(err))
            return EvictResult(ERROR, _message(err))
        except TRANSPORT_ERRORS as err:
            # The eviction may have landed: the next reconcile sees the pod gone (404) or retries.
            return EvictResult(BLOCKED, f"eviction request failed: {err}")
        return EvictResult(EVICTED)

    # --- reservations --------------------------------------------------------------------------

    async def create_reservation(self, pod: Pod, job: pmj.PodMigrationJob) -> str:
        opts = job.spec.reservation_options
        affinity = template_affinity(opts.template) if opts is not None else None
        body = reservation_body(pod, job, affinity)
        try:
            await self._call("POST", RESERVATIONS_PATH, body)
        except ApiError as err:
            if err.status != 409:  # 409: created by an earlier try whose answer was lost
                raise RuntimeError(f"creating Reservation {job.metadata.name}: {_message(err)}") from None
        return job.metadata.name

    async def reservation(self, name: str) -> ReservationState:
        try:
            obj = await self._call("GET", f"{RESERVATIONS_PATH}/{name}")
        except ApiError as err:
            if err.status == 404:
                return ReservationState("", missing=True)
            return ReservationState("")
        except TRANSPORT_ERRORS:
            return ReservationState("")
        try:
            return reservation_state(msgspec.convert(obj, Reservation))
        except msgspec.ValidationError:
            # Unreadable beyond its phase and node: read those alone, never more.
            status = obj.get("status") or {}
            return ReservationState(str(status.get("phase", "")), str(status.get("nodeName", "")))

    async def delete_reservation(self, name: str) -> None:
        try:
            await self._call("DELETE", f"{RESERVATIONS_PATH}/{name}")
        except ApiError as err:
            if err.status != 404:
                raise RuntimeError(f"deleting Reservation {name}: {_message(err)}") from None

    async def replacement_bound(
        self, pod: Pod, job: pmj.PodMigrationJob, reservation: str
    ) -> tuple[str, str, bool] | None:
        for p in self.handle.all_pods():
            raw = p.metadata.annotations.get(ANNOTATION_RESERVATION_ALLOCATED)
            if not raw or p.metadata.namespace != pod.metadata.namespace:
                continue
            try:
                if json.loads(raw).get("name") == reservation and p.spec.node_name:
                    ready = any(c.type == "Ready" and c.status == "True" for c in p.status.conditions)
                    return p.key, p.spec.node_name, ready
            except (ValueError, AttributeError):
                continue
        return None

    def event(
        self, job: pmj.PodMigrationJob, pod: Pod | None, reason: str, message: str, warning: bool
    ) -> None:
        """An event on the pod (in its namespace) and one on the job (cluster-scoped: "default")."""
        type_ = WARNING if warning else NORMAL
        if pod is not None:
            note = f"{message} (PodMigrationJob {job.metadata.name})"
            self.events.record(pod, type_, reason, "Descheduling", note)
        self._job_event(job, type_, reason, message, pod)

    def _job_event(
        self, job: pmj.PodMigrationJob, type_: str, reason: str, message: str, pod: Pod | None
    ) -> None:
        meta = job.metadata
        # kube-apiserver 1.20 refuses an events.k8s.io/v1 Event whose regarding namespace differs
        # from its own, "" included: the job's events carry "default" on both.
        regarding: dict[str, Any] = {
            "apiVersion": pmj.API_VERSION,
            "kind": pmj.KIND,
            "name": meta.name,
            "namespace": JOB_EVENTS_NAMESPACE,
        }
        if meta.uid:
            regarding["uid"] = meta.uid
        note = message if pod is None else f"{message} (pod {pod.key})"
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{meta.name}.{time.time_ns():x}", "namespace": JOB_EVENTS_NAMESPACE},
            "eventTime": micro_time(),
            "reportingController": CONTROLLER,
            "reportingInstance": reporting_instance(CONTROLLER, self.events.hostname),
            "action": "Migrating",
            "reason": reason,
            "type": type_,
            "note": truncate_note(note),
            "regarding": regarding,
        }
        path = f"/apis/events.k8s.io/v1/namespaces/{JOB_EVENTS_NAMESPACE}/events"

        async def create() -> None:
            try:
                await self.client.request_bytes("POST", path, body=body, request_timeout=WRITE_TIMEOUT)
            except ApiError as err:  # an event is best effort: never retried
                log.debug("event on PodMigrationJob %s: %s", meta.name, err)
            except TRANSPORT_ERRORS as err:
                log.debug("event on PodMigrationJob %s: %s", meta.name, err)

        self.events.writer.submit(create)
