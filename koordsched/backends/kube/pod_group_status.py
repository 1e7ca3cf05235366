"""The PodGroup status controller (Koordinator's, spec 4.4): phase and counts written back.

While this instance leads, every ``period`` seconds each Coscheduling plugin says which
PodGroups' status should change (``Coscheduling.pod_group_updates``); each change is sent as a
JSON merge patch of the status subresource on a background writer, with a timeout, never
blocking scheduling. A status sent is not sent again until the watch shows the PodGroup with
another status; a failed write is forgotten, so the next pass sends it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from typing import Any

from koordsched.api.podgroup import PodGroup, PodGroupStatus
from koordsched.backends.kube.client import MERGE_PATCH, ApiError, KubeClient
from koordsched.backends.kube.events import WRITE_TIMEOUT
from koordsched.backends.kube.timefmt import rfc3339
from koordsched.backends.kube.writer import BackgroundWriter
from koordsched.plugins.coscheduling import Coscheduling
from koordsched.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)

#: How often PodGroups are compared with their gangs.
PERIOD = 1.0


def status_patch(pg: PodGroup, status: PodGroupStatus) -> dict[str, Any]:
    """Every status field spelled out (a merge patch leaves an omitted field as it was), and the
    uid, so a PodGroup recreated under the same name is not written with the old one's counts."""
    body: dict[str, Any] = {
        "status": {
            "phase": status.phase,
            "occupiedBy": status.occupied_by or None,
            "scheduled": status.scheduled,
            "running": status.running,
            "succeeded": status.succeeded,
            "failed": status.failed,
            "scheduleStartTime": status.schedule_start_time,
        }
    }
    if pg.metadata.uid:
        body["metadata"] = {"uid": pg.metadata.uid}
    return body


def _path(pg: PodGroup) -> str:
    meta = pg.metadata
    return f"/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{meta.namespace}/podgroups/{meta.name}/status"


class PodGroupStatusController:
    def __init__(
        self,
        client: KubeClient,
        scheduler: Scheduler,
        *,
        period: float = PERIOD,
        write_timeout: float = WRITE_TIMEOUT,
    ) -> None:
        self.client = client
        self.period = period
        self.write_timeout = write_timeout
        self.plugins = [
            p
            for fw in scheduler.frameworks.values()
            for p in fw.plugins.values()
            if isinstance(p, Coscheduling)
        ]
        workers = max((p.args.controller_workers for p in self.plugins), default=1)
        self.writer = BackgroundWriter("podgroup-status", concurrency=workers)
        #: key -> the status last sent, until the watch shows the PodGroup with it.
        self._sent: dict[str, PodGroupStatus] = {}

    def sync_once(self) -> int:
        """Queue the writes one pass finds; returns how many."""
        now = rfc3339()
        queued = 0
        differing: set[str] = set()
        for plugin in self.plugins:
            for key, pg, status in plugin.pod_group_updates(now):
                differing.add(key)
                if self._sent.get(key) == status:
                    continue  # sent; the watch has not brought it back yet
                self._sent[key] = status
                if self.writer.submit(functools.partial(self._write, key, pg, status)):
                    queued += 1
                else:
                    self._sent.pop(key, None)
        for key in [k for k in self._sent if k not in differing]:
            del self._sent[key]  # the watch shows what was sent
        return queued

    async def _write(self, key: str, pg: PodGroup, status: PodGroupStatus) -> None:
        try:
            await self.client.request_bytes(
                "PATCH",
                _path(pg),
                body=status_patch(pg, status),
                content_type=MERGE_PATCH,
                request_timeout=self.write_timeout,
            )
        except ApiError as err:
            self._forget(key, status)
            if err.status in (404, 409, 422):  # gone, or recreated under the same name
                log.debug("PodGroup %s: status not updated: %s", key, err)
                return
            raise
        except BaseException:
            self._forget(key, status)
            raise

    def _forget(self, key: str, status: PodGroupStatus) -> None:
        if self._sent.get(key) == status:
            del self._sent[key]

    async def run(self, stop: asyncio.Event, grace: float = 2.0) -> None:
        if not self.plugins:
            return
        try:
            while not stop.is_set():
                try:
                    self.sync_once()
                except Exception:  # one bad pass must not end the controller
                    log.exception("PodGroup status pass failed")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.period):
                        await stop.wait()
        finally:
            await self.writer.close(grace)
