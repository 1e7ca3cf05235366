"""Writes to objects that stand for pods (Reservations): their bind and their failed attempts.

Koordinator binds a reserve pod by writing its Reservation (spec 4.3 Bind): PreBind's
annotations (``device-allocated``, ``resource-status``) are merged into the object first (a
JSON merge patch with the object's resourceVersion as precondition, so a Reservation changed
meanwhile is not bound from a stale view), then ``status`` becomes Available on the node. The
watch then delivers the Available object, which confirms the assumed reserve pod. The
annotations go first so that the object is never Available without what it holds.

A failed attempt sets the ``Scheduled=False/Unschedulable`` condition, a status write in the
background (logged and dropped on failure: the object's controller writes its status again).
Status writes computed from one resourceVersion of an object are sent once, whoever computed
them (:class:`StatusLedger`): this port for a failed attempt, the object's controller for its
sync (:class:`~koordsched.framework.controllers.StatusWrite`). Every write has a timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from koordsched.api.core import to_builtins
from koordsched.api.kinds import ObjectKind
from koordsched.backends.kube.client import MERGE_PATCH, TRANSPORT_ERRORS, ApiError, KubeClient
from koordsched.backends.kube.controllers import StatusLedger, object_path, send_status
from koordsched.backends.kube.writer import BackgroundWriter
from koordsched.framework.controllers import StatusWrite
from koordsched.framework.interface import BindError
from koordsched.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)


class StandInWrites:
    """The kube side of objects that stand for pods; see the module docstring."""

    def __init__(self, client: KubeClient, *, write_timeout: float, queue_size: int = 10_000) -> None:
        self.client = client
        self.write_timeout = write_timeout
        self.scheduler: Scheduler | None = None
        self.writer = BackgroundWriter("stand-in-status", maxsize=queue_size)
        #: Shared with the controllers' runners (``ControllerRunner(ledger=...)``).
        self.ledger = StatusLedger()

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
        write = StatusWrite(kind, key, new, obj.metadata.resource_version)
        if not self.ledger.claim(write):
            return  # already written from this version; the watch brings the result

        async def send() -> None:
            failure: BaseException | None = None
            try:
                await send_status(self.client, write, self.write_timeout)
            except ApiError as err:
                failure = err
            except TRANSPORT_ERRORS as err:
                failure = err
            if failure is not None:
                self.ledger.forget(write)  # the next write tries again
                log.warning("%s %s: status not written: %s", kind.kind, obj.metadata.name, failure)

        if not self.writer.submit(send):
            self.ledger.forget(write)

    async def close(self, grace: float) -> None:
        await self.writer.close(grace)


def _same_conditions(a: Any, b: Any) -> bool:
    """Equal but for the probe and transition times."""

    def strip(obj: Any) -> list[tuple[str, str, str, str]]:
        return [(c.type, c.status, c.reason, c.message) for c in obj.status.conditions]

    return bool(strip(a) == strip(b) and a.status.phase == b.status.phase)
