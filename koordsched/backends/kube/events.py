"""``events.k8s.io/v1`` Events for pods, written in the background and aggregated into series.

Events look as kube-scheduler's do (client-go ``tools/events``): name ``<pod>.<hex unixNano>``,
``reportingController`` the pod's schedulerName (the profile), ``reportingInstance``
``<controller>-<hostname>``, ``eventTime`` a MicroTime with exactly six fractional digits, the
note cut to 1 KiB.

Aggregation, as client-go's events.k8s.io broadcaster does it: an event isomorphic to one
recorded less than ``finish_time`` (6 min, client-go's) ago is not written again; it becomes
that event's ``series``. The first repeat PATCHes ``series: {count: 2, lastObservedTime}`` at
once (strategic merge, the series alone: the API server keeps an Event's note immutable on
update); later repeats bump the count in memory, PATCHed at most once per ``flush_interval``
(client-go waits for its 30 min refresh or the series' end). A repeat that comes while the
event's create is still on its way is written as soon as the create lands. Our key, unlike
client-go's, holds the note (the API cannot change a written note, so a new message is a new
event instead of a series still showing the first one) and the pod's uid but not its
resourceVersion (which our own condition write changes between two failures).

Writes, as client-go's event broadcaster makes them: a create that fails on the way (no answer,
a dropped connection, a timeout) is tried again up to :data:`MAX_TRIES` times in all, about
:data:`RETRY_SLEEP` apart (jittered by 25 %); one the server answers with an error is not
retried. Unlike client-go, an event that is finally not written is forgotten, so its identical
successors are written afresh instead of being counted into a series that does not exist.
Every request is bounded by ``write_timeout``.

Nothing is dropped silently. A bind reserves a place for its ``Scheduled`` event before it is
sent (:meth:`EventRecorder.reserve`), waiting while queued and reserved events fill half the
queue (``queue_size``), so a burst of binds, however many at once, is slowed down by a backlog
of events instead of overflowing it; other events (FailedScheduling, Preempted) have the other half, and past
it are dropped with a warning and counted (``writer.dropped``), as client-go's broadcaster drops
past its 1,000 queued events (silently there).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from koordsched.api.core import Pod
from koordsched.backends.kube.client import STRATEGIC_MERGE_PATCH, TRANSPORT_ERRORS, ApiError, KubeClient
from koordsched.backends.kube.timefmt import micro_time, utcnow
from koordsched.backends.kube.writer import BackgroundWriter

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"

#: events.k8s.io/v1 limits (``NoteLengthLimit``, reportingInstance length).
NOTE_LENGTH_LIMIT = 1024
INSTANCE_LENGTH_LIMIT = 128
#: client-go closes a series left idle this long; the next identical event starts a new one.
FINISH_TIME = 6 * 60.0
#: How often pending series counts are PATCHed.
FLUSH_INTERVAL = 10.0
MAX_SERIES = 4096
#: A background write (an event, a series count, a pod's status) unanswered this long is abandoned.
#: Without it a stalled connection would hold a writer slot, or the series flush, for good.
WRITE_TIMEOUT = 30.0
#: client-go's ``maxTriesPerEvent`` and ``defaultSleepDuration`` (jittered by 25 %).
MAX_TRIES = 12
RETRY_SLEEP = 10.0
RETRY_JITTER = 0.25
#: Series counts are PATCHed this many at a time.
SERIES_CONCURRENCY = 16

DEFAULT_CONTROLLER = "koord-scheduler"


def truncate_note(note: str, limit: int = NOTE_LENGTH_LIMIT) -> str:
    """The note cut to ``limit`` bytes of UTF-8, ending in " ..." when cut (as kube-scheduler does)."""
    raw = note.encode()
    if len(raw) <= limit:
        return note
    return raw[: limit - 4].decode(errors="ignore") + " ..."


def reporting_instance(controller: str, hostname: str | None = None) -> str:
    """client-go's ``<controller>-<hostname>``, within the API's 128 characters."""
    return f"{controller}-{hostname or socket.gethostname()}"[:INSTANCE_LENGTH_LIMIT]


def build_event(
    pod: Pod,
    *,
    type_: str,
    reason: str,
    action: str,
    note: str,
    controller: str,
    instance: str,
    now: datetime | None = None,
    regarding: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The Event object for ``pod``, as client-go's ``recorderImpl.makeEvent`` builds it.

    ``regarding`` replaces the pod as the object the event is about (a Reservation, for its reserve
    pod). An event about a cluster-scoped object goes to ``kube-system``: client-go puts it in
    ``default``, which older API servers (1.20, the e2e tests' own) refuse for an event with an
    eventTime ("involvedObject.namespace: does not match event.namespace"); ``kubectl describe``
    finds it either way."""
    meta = pod.metadata
    namespace = meta.namespace or "default"
    if regarding is not None:
        namespace = regarding.get("namespace") or "kube-system"
        name = regarding["name"]
    else:
        name = meta.name
        regarding = {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": meta.namespace,
            "name": meta.name,
        }
        if meta.uid:
            regarding["uid"] = meta.uid
        if meta.resource_version:
            regarding["resourceVersion"] = meta.resource_version
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": namespace},
        "eventTime": micro_time(now),
        "reportingController": controller,
        "reportingInstance": instance,
        "action": action,
        "reason": reason,
        "type": type_,
        "note": truncate_note(note),
        "regarding": regarding,
    }


@dataclass
class _Series:
    namespace: str
    name: str
    count: int
    last_observed: datetime
    last_seen: float
    sent_count: int = 1
    created: bool = False


_Key = tuple[str, ...]


class EventRecorder:
    """Records pod events without ever blocking the caller (see the module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        *,
        hostname: str | None = None,
        controller: str | None = None,
        finish_time: float = FINISH_TIME,
        flush_interval: float = FLUSH_INTERVAL,
        queue_size: int = 10_000,
        max_series: int = MAX_SERIES,
        write_timeout: float = WRITE_TIMEOUT,
        max_tries: int = MAX_TRIES,
        retry_sleep: float = RETRY_SLEEP,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.write_timeout = write_timeout
        self.max_tries = max(1, max_tries)
        self.retry_sleep = retry_sleep
        self._rng = rng or random.Random()
        self.hostname = hostname or socket.gethostname()
        #: None: the pod's schedulerName, as kube-scheduler reports per profile.
        self.controller = controller
        self.finish_time = finish_time
        self.max_series = max_series
        self._clock = clock
        self._series: OrderedDict[_Key, _Series] = OrderedDict()
        self.writer = BackgroundWriter(
            "events",
            maxsize=queue_size,
            soft_limit=max(1, queue_size // 2),
            tick=self.flush_series,
            tick_interval=flush_interval,
        )

    async def reserve(self) -> None:
        """A place for an event to come (a bind's Scheduled event); give it back with :meth:`release`."""
        await self.writer.reserve()

    def release(self) -> None:
        self.writer.release()

    def record(
        self,
        pod: Pod,
        type_: str,
        reason: str,
        action: str,
        note: str,
        regarding: dict[str, Any] | None = None,
    ) -> None:
        """An event about ``pod`` (or, with ``regarding``, about that object, for the pod standing
        for it)."""
        controller = self.controller or pod.spec.scheduler_name or DEFAULT_CONTROLLER
        instance = reporting_instance(controller, self.hostname)
        meta = pod.metadata
        if regarding is not None:
            ns, name, uid = regarding.get("namespace", ""), regarding["name"], regarding.get("uid", "")
        else:
            ns, name, uid = meta.namespace, meta.name, meta.uid
        key: _Key = (type_, reason, action, controller, instance, ns, name, uid, note)
        now = self._clock()
        self._prune(now)
        series = self._series.get(key)
        if series is not None:
            series.count += 1
            series.last_observed = utcnow()
            series.last_seen = now
            self._series.move_to_end(key)
            if series.count == 2 and series.created:
                self._write_series(key, series)  # the first repeat: the series exists from now
            return
        body = build_event(
            pod,
            type_=type_,
            reason=reason,
            action=action,
            note=note,
            controller=controller,
            instance=instance,
            regarding=regarding,
        )
        series = _Series(body["metadata"]["namespace"], body["metadata"]["name"], 1, utcnow(), now)
        self._series[key] = series
        while len(self._series) > self.max_series:
            self._series.popitem(last=False)

        path = f"/apis/events.k8s.io/v1/namespaces/{series.namespace}/events"
        tries = 0

        def give_up() -> None:
            self._forget(key, series)  # the next occurrence tries a fresh event

        async def create() -> None:
            nonlocal tries
            tries += 1
            try:
                await self.client.request_bytes("POST", path, body=body, request_timeout=self.write_timeout)
            except ApiError:
                give_up()  # the server refused it: not retried (client-go neither)
                raise
            except TRANSPORT_ERRORS as err:
                if tries >= self.max_tries:
                    give_up()
                    log.error(
                        "event %s/%s: unable to write it (retry limit of %d tries reached): %s: %s",
                        series.namespace,
                        series.name,
                        self.max_tries,
                        type(err).__name__,
                        err,
                    )
                    raise
                delay = self.retry_sleep * (1.0 + RETRY_JITTER * (2.0 * self._rng.random() - 1.0))
                self.writer.submit_later(delay, create, give_up)
                raise
            except BaseException:
                give_up()  # cancelled (closing): nothing will write it
                raise
            series.created = True
            if series.count > series.sent_count:
                self._write_series(key, series)  # repeated while the create was on its way

        if not self.writer.submit(create):
            self._forget(key, series)

    def _forget(self, key: _Key, series: _Series) -> None:
        if self._series.get(key) is series:
            del self._series[key]

    def _prune(self, now: float) -> None:
        while self._series:
            key, oldest = next(iter(self._series.items()))
            if now - oldest.last_seen < self.finish_time:
                return
            del self._series[key]

    async def flush_series(self) -> None:
        """PATCH the count of every series that grew since it was last written, a few at a time."""
        dirty = [
            (key, series)
            for key, series in self._series.items()
            if series.created and series.count > series.sent_count
        ]
        if not dirty:
            return
        slots = asyncio.Semaphore(SERIES_CONCURRENCY)
        async with asyncio.TaskGroup() as tg:
            for key, series in dirty:
                tg.create_task(self._patch_series(slots, key, series))

    def _write_series(self, key: _Key, series: _Series) -> None:
        """PATCH the series now (in the background); when the queue is full, the next flush does."""

        async def patch() -> None:
            await self._patch_series(None, key, series)

        self.writer.submit(patch)

    async def _patch_series(self, slots: asyncio.Semaphore | None, key: _Key, series: _Series) -> None:
        count = series.count
        if count <= series.sent_count:
            return  # written already (a flush and a first-repeat write can meet)
        patch = {"series": {"count": count, "lastObservedTime": micro_time(series.last_observed)}}
        async with slots or contextlib.nullcontext():
            try:
                await self.client.request_bytes(
                    "PATCH",
                    f"/apis/events.k8s.io/v1/namespaces/{series.namespace}/events/{series.name}",
                    body=patch,
                    content_type=STRATEGIC_MERGE_PATCH,
                    request_timeout=self.write_timeout,
                )
            except TRANSPORT_ERRORS as err:
                log.warning("event %s/%s: series update failed: %s", series.namespace, series.name, err)
                return  # retried on the next flush, while the series lives
            except ApiError as err:
                # 404: the event expired (events live an hour); start a new one next time.
                self._forget(key, series)
                if err.status != 404:
                    log.warning("event %s/%s: series update failed: %s", series.namespace, series.name, err)
                return
        series.sent_count = max(series.sent_count, count)

    async def close(self, grace: float = 2.0) -> None:
        await self.writer.close(grace)
