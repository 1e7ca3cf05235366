"""ElasticQuota status write-back: what Koordinator's quota status controller writes, every second
while this instance leads (``syncElasticQuotaStatusWorker``).

For each ElasticQuota object the ElasticQuota plugin knows, the writes it needs
(:func:`koordsched.plugins.elasticquota.status_update`: ``status.used`` and the runtime, request
and non-preemptible-used annotations) are sent only when the object does not show them already:

* ``status.used`` by a JSON merge patch of the ``status`` subresource (resources no longer used
  are set to null); a CRD without the subresource (404 while the object exists) gets it on the
  object itself, as Koordinator writes it;
* the annotations by a JSON merge patch of the object's metadata, never touching ``spec``.

Every request has a timeout and goes through a token bucket of its own (the client connection's
qps and burst), so the write-back never starves binds; a failed write is logged (once per quota
and reason) and tried again on the next round, when it is still due. A write already sent and
not yet seen on the watch (same resourceVersion) is not sent twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from koordsched.api.elastic_quota import ElasticQuota
from koordsched.api.kinds import ELASTIC_QUOTAS
from koordsched.backends.kube.client import MERGE_PATCH, TRANSPORT_ERRORS, ApiError, KubeClient
from koordsched.observability.metrics import QuotaMetrics
from koordsched.plugins.elasticquota import (
    QuotaSummary,
    StatusUpdate,
    quota_values,
    status_update,
    summaries_of,
)
from koordsched.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)

#: Koordinator's controller period.
SYNC_INTERVAL = 1.0
#: The quota gauges are refreshed every this many rounds (Koordinator: every 10 s).
METRICS_EVERY = 10
#: One status write unanswered this long is abandoned (tried again next round).
WRITE_TIMEOUT = 10.0


def _object_path(eq: ElasticQuota, sub: str = "") -> str:
    base, plural = ELASTIC_QUOTAS.path.rsplit("/", 1)
    meta = eq.metadata
    return f"{base}/namespaces/{meta.namespace}/{plural}/{meta.name}" + (f"/{sub}" if sub else "")


class QuotaStatusSync:
    def __init__(
        self,
        client: KubeClient,
        scheduler: Scheduler,
        *,
        interval: float = SYNC_INTERVAL,
        write_timeout: float = WRITE_TIMEOUT,
        metrics: QuotaMetrics | None = None,
    ) -> None:
        self.client = client
        self.scheduler = scheduler
        self.interval = interval
        self.write_timeout = write_timeout
        self.metrics = metrics
        #: key -> (resourceVersion written against, the update sent).
        self._sent: dict[str, tuple[str, StatusUpdate]] = {}
        self._logged: dict[str, str] = {}
        #: Counters, for logs and tests.
        self.writes = 0
        self.failures = 0
        self._rounds = 0

    @staticmethod
    def wanted(scheduler: Scheduler) -> bool:
        """Whether some profile runs the ElasticQuota plugin."""
        return any(summaries_of(fw.plugins) is not None for fw in scheduler.frameworks.values())

    def _summaries(self) -> list[QuotaSummary]:
        for fw in self.scheduler.frameworks.values():
            found = summaries_of(fw.plugins)
            if found is not None:
                return found
        return []

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.sync_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)

    async def sync_once(self) -> int:
        """One round; the number of writes sent."""
        store: dict[str, Any] = self.scheduler.objects.get(ELASTIC_QUOTAS.kind, {})
        summaries = self._summaries()
        if self.metrics is not None and self._rounds % METRICS_EVERY == 0:
            self.metrics.set_quota_values(*quota_values(summaries))
        self._rounds += 1
        sent = 0
        for summary in summaries:
            eq = store.get(summary.key) if summary.key else None
            if not isinstance(eq, ElasticQuota) or summary.refusal:
                continue
            update = status_update(eq, summary)
            if update.empty:
                self._sent.pop(summary.key, None)
                continue
            version = eq.metadata.resource_version
            if self._sent.get(summary.key) == (version, update):
                continue  # sent already; the watch has not shown it yet
            if await self._write(summary.key, eq, update):
                self._sent[summary.key] = (version, update)
                sent += 1
        return sent

    async def _write(self, key: str, eq: ElasticQuota, update: StatusUpdate) -> bool:
        t0 = time.perf_counter()
        try:
            if update.annotations is not None:
                await self._patch(_object_path(eq), {"metadata": {"annotations": update.annotations}})
            if update.used is not None:
                removed: dict[str, Any] = {r: None for r in eq.status.used if r not in update.used}
                status = {"status": {"used": {**removed, **update.used}}}
                try:
                    await self._patch(_object_path(eq, "status"), status)
                except ApiError as err:
                    if err.status != 404:
                        raise
                    # A CRD without the status subresource: status is written with the object.
                    await self._patch(_object_path(eq), status)
        except ApiError as err:
            if err.status == 404:
                return False  # deleted meanwhile: its watch event follows
            self._failed(key, f"{err.status} {err}")
            return False
        except TRANSPORT_ERRORS as err:
            self._failed(key, f"{type(err).__name__}: {err}")
            return False
        finally:
            if self.metrics is not None:
                self.metrics.observe_quota_status_update(time.perf_counter() - t0)
        self.writes += 1
        self._logged.pop(key, None)
        return True

    async def _patch(self, path: str, body: dict[str, Any]) -> None:
        await self.client.request_bytes(
            "PATCH", path, body=body, content_type=MERGE_PATCH, request_timeout=self.write_timeout
        )

    def _failed(self, key: str, why: str) -> None:
        self.failures += 1
        if self._logged.get(key) != why:
            self._logged[key] = why
            log.warning(
                "ElasticQuota %s: status not written back (tried again in %ss): %s", key, self.interval, why
            )
