"""Coscheduling's PodGroup status controller (Koordinator's, spec 4.4): phase and counts written back.

While this instance leads, every second each profile's Coscheduling says which PodGroups' status
should change (``Coscheduling.pod_group_updates``); each change is a JSON merge patch of the
status subresource, queued on ``controllerWorkers`` workers so it never holds scheduling back. A
status sent is not sent again until the watch shows the PodGroup with another status; a failed
write is forgotten, so the next round sends it again. I/O-free
(:mod:`koordsched.framework.controllers`); the simulator does not run it (its report shows gangs).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from koordsched.api.kinds import POD_GROUPS, ObjectKind
from koordsched.api.podgroup import PodGroup, PodGroupStatus
from koordsched.framework.controllers import Controller, MergePatch, ObjectWrite, Write, WriteResult
from koordsched.plugins.coscheduling.plugin import Coscheduling

log = logging.getLogger(__name__)

#: How often PodGroups are compared with their gangs.
PERIOD = 1.0
#: A status write unanswered this long is abandoned (as the kube backend's other background writes).
WRITE_TIMEOUT = 30.0


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


def _rfc3339(wall: float) -> str:
    """A ``metav1.Time``: UTC, whole seconds."""
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class PodGroupStatusController:
    """Writes each PodGroup's status as its gang stands (see the module docstring)."""

    name = "podgroup-status"
    description = "the PodGroup status controller"
    watches: tuple[ObjectKind[Any], ...] = (POD_GROUPS,)
    interval = PERIOD
    write_timeout = WRITE_TIMEOUT
    simulated = False

    def __init__(self, plugins: Sequence[Coscheduling]) -> None:
        self.plugins = list(plugins)
        self.workers = max((p.args.controller_workers for p in self.plugins), default=1)
        #: key -> the status last sent, until the watch shows the PodGroup with it.
        self._sent: dict[str, PodGroupStatus] = {}
        #: id of each write not yet answered -> the status it sends.
        self._in_flight: dict[int, PodGroupStatus] = {}

    def reconcile(self) -> list[Write]:
        out: list[Write] = []
        differing: set[str] = set()
        for plugin in self.plugins:
            now = _rfc3339(plugin.handle.clock.wall())
            for key, pg, status in plugin.pod_group_updates(now):
                differing.add(key)
                if self._sent.get(key) == status:
                    continue  # sent; the watch has not brought it back yet
                self._sent[key] = status
                meta = pg.metadata
                patch = MergePatch(POD_GROUPS, meta.namespace, meta.name, status_patch(pg, status), "status")
                write = ObjectWrite(key, (patch,))
                self._in_flight[id(write)] = status
                out.append(write)
        for key in [k for k in self._sent if k not in differing]:
            del self._sent[key]  # the watch shows what was sent
        return out

    def applied(self, write: Write, result: WriteResult) -> None:
        status = self._in_flight.pop(id(write), None)
        if result.ok or not isinstance(write, ObjectWrite):
            return
        if status is not None and self._sent.get(write.key) == status:
            del self._sent[write.key]  # the next round sends it again
        if result.code in (404, 409, 422):  # gone, or recreated under the same name
            log.debug("PodGroup %s: status not updated: %s", write.key, result.error)
        else:
            log.warning("PodGroup %s: status not updated: %s", write.key, result.error)

    def next_due(self) -> float | None:
        return None


def coscheduling_controllers(plugins: Sequence[object]) -> list[Controller]:
    """The PodGroup status controller over every profile's Coscheduling."""
    found = [p for p in plugins if isinstance(p, Coscheduling)]
    return [PodGroupStatusController(found)] if found else []
