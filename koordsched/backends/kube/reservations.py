"""Writes to Reservation objects: their bind, their failed attempts and the controller's sync.

Koordinator binds a reserve pod by writing its Reservation (spec 4.3 Bind): PreBind's
annotations (``device-allocated``, ``resource-status``) are merged into the object first (a
JSON merge patch with the object's resourceVersion as precondition, so a Reservation changed
meanwhile is not bound from a stale view), then ``status`` becomes Available on the node. The
watch then delivers the Available object, which confirms the assumed reserve pod. The
annotations go first so that the object is never Available without what it holds.

A failed attempt sets the ``Scheduled=False/Unschedulable`` condition; the controller (every
second, leader only) writes currentOwners/allocated, ends allocateOnce reservations with their
first owner and fails expired ones. Every write has a timeout; the background ones are logged
and dropped on failure (the next sync sends them again).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from koordsched.api.core import to_builtins
from koordsched.api.kinds import RESERVATIONS, ObjectKind
from koordsched.backends.kube.client import MERGE_PATCH, TRANSPORT_ERRORS, ApiError, KubeClient
from koordsched.backends.kube.controllers import object_path
from koordsched.backends.kube.writer import BackgroundWriter
from koordsched.framework.interface import BindError
from koordsched.plugins.reservation import expiry_updates, owner_updates
from koordsched.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)

#: How often the controller's sync runs (Koordinator's reservation controller resyncs on events
#: and periodically; a second keeps expiry within a second of its time).
SYNC_INTERVAL = 1.0


class ReservationWrites:
    """The kube side of objects that stand for pods (Reservations); see the module docstring."""

    def __init__(self, client: KubeClient, *, write_timeout: float, queue_size: int = 10_000) -> None:
        self.client = client
        self.write_timeout = write_timeout
        self.scheduler: Scheduler | None = None
        self.writer = BackgroundWriter(
            "reservation-status", maxsize=queue_size, tick=self.sync, tick_interval=SYNC_INTERVAL
        )
        #: key -> resourceVersion of the object a background write was last computed from.
        self._sent: dict[str, str] = {}
        #: Whether this instance may run the controller (it leads, or runs without election).
        self.leading = False

    async def bind(
        self, kind: ObjectKind[Any], key: str, obj: Any, node: str, annotations: Mapping[str, str]
    ) -> None:
        """Write the object bound to ``node``; raises BindError when it cannot be."""
        si = kind.stand_in
        sched = self.scheduler
        if si is None or sched is None:
            raise BindError(f"{kind.kind} {key}: not an object that stands for a pod")
        if obj.status.node_name:
            raise BindError(f"{kind.kind} {key} is already assigned to node {obj.status.node_name!r}")
        new = si.bound(obj, node, dict(annotations), sched.clock.wall())
        name = obj.metadata.name
        try:
            if annotations:
                meta: dict[str, Any] = {"annotations": dict(annotations)}
                if obj.metadata.resource_version:
                    meta["resourceVersion"] = obj.metadata.resource_version
                await self.client.request_bytes(
                    "PATCH",
                    object_path(kind, "", name),
                    body={"metadata": meta},
                    content_type=MERGE_PATCH,
                    request_timeout=self.write_timeout,
                )
            await self.client.request_bytes(
                "PATCH",
                object_path(kind, "", name, "status"),
                body={"status": to_builtins(new.status)},
                content_type=MERGE_PATCH,
                request_timeout=self.write_timeout,
            )
        except ApiError as err:
            raise BindError(f"binding {kind.kind} {name} to node {node}: {err.message}") from err
        except TRANSPORT_ERRORS as err:
            raise BindError(
                f"binding {kind.kind} {name} to node {node}: {type(err).__name__}: {err}"
            ) from err

    def unschedulable(self, kind: ObjectKind[Any], key: str, obj: Any, message: str) -> None:
        si = kind.stand_in
        sched = self.scheduler
        if si is None or sched is None:
            return
        new = si.unschedulable(obj, message, sched.clock.wall())
        if new.status == obj.status or _same_conditions(new, obj):
            return
        self._submit(kind, key, obj, new)

    def _submit(self, kind: ObjectKind[Any], key: str, obj: Any, new: Any) -> None:
        rv = obj.metadata.resource_version
        if rv and self._sent.get(key) == rv:
            return  # already written from this version; the watch brings the result
        self._sent[key] = rv
        name = obj.metadata.name
        body = {"status": to_builtins(new.status)}

        async def send() -> None:
            failure: BaseException | None = None
            try:
                await self.client.request_bytes(
                    "PATCH",
                    object_path(kind, "", name, "status"),
                    body=body,
                    content_type=MERGE_PATCH,
                    request_timeout=self.write_timeout,
                )
            except ApiError as err:
                failure = err
            except TRANSPORT_ERRORS as err:
                failure = err
            if failure is not None:
                self._sent.pop(key, None)  # the next sync tries again
                log.warning("%s %s: status not written: %s", kind.kind, name, failure)

        if not self.writer.submit(send):
            self._sent.pop(key, None)

    async def sync(self) -> None:
        """The controller: owners, allocateOnce's end, expiry (leader only)."""
        sched = self.scheduler
        if sched is None or not self.leading or RESERVATIONS.kind not in sched.kinds:
            return
        store = sched.objects.get(RESERVATIONS.kind, {})
        nodes = sched.cache.snapshot.by_name
        wall = sched.clock.wall()
        updates = owner_updates(store, sched.cache.owners_of, wall)
        updates += expiry_updates(store, wall, lambda n: n in nodes)
        for key, new in updates:
            old = store.get(key)
            if old is not None:
                self._submit(RESERVATIONS, key, old, new)

    def start_controller(self) -> None:
        """This instance leads: run the controller's sync every :data:`SYNC_INTERVAL`."""
        self.leading = True

        async def nothing() -> None:
            return None

        self.writer.submit(nothing)  # starts the writer's task, which runs the tick

    async def close(self, grace: float) -> None:
        self.leading = False
        await self.writer.close(grace)


def _same_conditions(a: Any, b: Any) -> bool:
    """Equal but for the probe and transition times."""

    def strip(obj: Any) -> list[tuple[str, str, str, str]]:
        return [(c.type, c.status, c.reason, c.message) for c in obj.status.conditions]

    return bool(strip(a) == strip(b) and a.status.phase == b.status.phase)
