"""The plugins' controllers in a cluster: one runner that applies their writes through the API server.

While this instance leads, every controller a plugin declared
(:mod:`koordsched.framework.controllers`) runs in a task of its own: a round every
``interval`` seconds, then the round's writes. A controller with ``workers`` 0 has them sent in
order, each awaited, before its next round; one with workers has them queued on a
:class:`~koordsched.backends.kube.writer.BackgroundWriter` of that concurrency, never holding a
round back, and flushed on stop. Each controller has its own client (its own token bucket, so
controllers never starve binds), and every request has the controller's ``write_timeout``.

* An :class:`~koordsched.framework.controllers.ObjectWrite` is a JSON merge patch per step, of the
  object or of its subresource (with the object as the fallback where the controller asks);
* a :class:`~koordsched.framework.controllers.StatusWrite` is a JSON merge patch of the status
  subresource with the object's whole status; one computed from a resourceVersion is sent once
  per version of its object across this runner and every other writer sharing its
  :class:`StatusLedger` (the port's writes of an object a pod stands for);
* an :class:`~koordsched.framework.controllers.Eviction` is a ``policy/v1`` Eviction where the API
  server takes it, else ``policy/v1beta1``, looked up once
  (:mod:`~koordsched.backends.kube.eviction`), with the pod's uid as the precondition (RBAC:
  ``pods/eviction`` create).

Each write's outcome goes back to its controller, which decides what to log and whether to try
again; nothing here names a kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Collection, Iterable
from typing import Any

from koordsched.api.core import to_builtins
from koordsched.api.kinds import ObjectKind
from koordsched.backends.kube.client import MERGE_PATCH, ApiError, KubeClient
from koordsched.backends.kube.eviction import EvictionApi
from koordsched.backends.kube.writer import BackgroundWriter
from koordsched.framework.controllers import (
    APPLIED,
    DROPPED,
    NO_ANSWER,
    Controller,
    Eviction,
    MergePatch,
    StatusWrite,
    Write,
    WriteResult,
)

log = logging.getLogger(__name__)


def object_path(kind: ObjectKind[Any], namespace: str, name: str, sub: str = "") -> str:
    """The URL of one object of ``kind`` (or of its subresource ``sub``)."""
    if kind.namespaced:
        base, plural = kind.path.rsplit("/", 1)
        path = f"{base}/namespaces/{namespace}/{plural}/{name}"
    else:
        path = f"{kind.path}/{name}"
    return f"{path}/{sub}" if sub else path


class StatusLedger:
    """The resourceVersion each object's last status write was computed from (see the module
    docstring): a write is claimed before it is sent, forgotten when it fails or is dropped."""

    def __init__(self) -> None:
        self._sent: dict[tuple[str, str], str] = {}

    def claim(self, write: StatusWrite) -> bool:
        """False when a write computed from the same version was sent (the watch brings it)."""
        key = (write.kind.kind, write.key)
        if write.version and self._sent.get(key) == write.version:
            return False
        self._sent[key] = write.version
        return True

    def forget(self, write: StatusWrite) -> None:
        self._sent.pop((write.kind.kind, write.key), None)


async def send_status(client: KubeClient, write: StatusWrite, request_timeout: float) -> None:
    """PATCH the object's status subresource with its whole status."""
    meta = write.obj.metadata
    await client.request_bytes(
        "PATCH",
        object_path(write.kind, meta.namespace, meta.name, "status"),
        body={"status": to_builtins(write.obj.status)},
        content_type=MERGE_PATCH,
        request_timeout=request_timeout,
    )


def runnable(controllers: Iterable[Controller], watched: Collection[str]) -> list[Controller]:
    """The controllers whose kinds are all watched (``watched``: kind names)."""
    return [c for c in controllers if all(k.kind in watched for k in c.watches)]


class ControllerRunner:
    """Runs one controller against the API server (see the module docstring)."""

    def __init__(
        self,
        controller: Controller,
        client: KubeClient,
        *,
        flush_grace: float = 2.0,
        ledger: StatusLedger | None = None,
    ) -> None:
        self.controller = controller
        self.client = client
        self.flush_grace = flush_grace
        self.ledger = ledger if ledger is not None else StatusLedger()
        self.writer = (
            BackgroundWriter(controller.name, concurrency=controller.workers)
            if controller.workers > 0
            else None
        )
        self.evictions = EvictionApi(client, timeout=controller.write_timeout)

    async def run(self, stop: asyncio.Event) -> None:
        c = self.controller
        try:
            while not stop.is_set():
                await self.round()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(c.interval):
                        await stop.wait()
        finally:
            if self.writer is not None:
                await self.writer.close(self.flush_grace)

    async def round(self) -> int:
        """One round; the number of writes sent (or queued)."""
        c = self.controller
        try:
            writes = c.reconcile()
        except Exception:  # one bad round must not end the controller
            log.exception("%s: a round failed", c.description)
            return 0
        sent = 0
        for write in writes:
            if isinstance(write, StatusWrite) and not self.ledger.claim(write):
                continue  # already written from this version; the watch brings the result
            if self.writer is None:
                await self.apply(write)
                sent += 1
            elif self.writer.submit(functools.partial(self.apply, write)):
                sent += 1
            else:
                if isinstance(write, StatusWrite):
                    self.ledger.forget(write)
                c.applied(write, WriteResult(DROPPED, "queue full"))
        return sent

    async def apply(self, write: Write) -> None:
        """Send one write and tell the controller how it went."""
        t0 = time.perf_counter()
        try:
            if isinstance(write, Eviction):
                await self._evict(write)
            elif isinstance(write, StatusWrite):
                await send_status(self.client, write, self.controller.write_timeout)
            else:
                for patch in write.patches:
                    await self._patch(patch)
        except ApiError as err:
            result = WriteResult(err.status, f"{err.status} {err}", time.perf_counter() - t0)
        except Exception as err:  # transport errors and timeouts: no answer came
            result = WriteResult(NO_ANSWER, f"{type(err).__name__}: {err}", time.perf_counter() - t0)
        else:
            result = WriteResult(APPLIED, "", time.perf_counter() - t0)
        if not result.ok and isinstance(write, StatusWrite):
            self.ledger.forget(write)  # the next round sends it again
        self.controller.applied(write, result)

    async def _patch(self, patch: MergePatch) -> None:
        path = object_path(patch.kind, patch.namespace, patch.name, patch.subresource)
        try:
            await self._send(path, patch.body)
        except ApiError as err:
            if not (patch.object_fallback and patch.subresource and err.status == 404):
                raise
            # A CRD without the subresource: the body goes to the object itself.
            await self._send(object_path(patch.kind, patch.namespace, patch.name), patch.body)

    async def _send(self, path: str, body: dict[str, Any]) -> None:
        await self.client.request_bytes(
            "PATCH", path, body=body, content_type=MERGE_PATCH, request_timeout=self.controller.write_timeout
        )

    async def _evict(self, eviction: Eviction) -> None:
        meta = eviction.pod.metadata
        options = {"preconditions": {"uid": meta.uid}} if meta.uid else None
        body = await self.evictions.body(meta.name, meta.namespace, options)
        await self.client.request_bytes(
            "POST",
            f"/api/v1/namespaces/{meta.namespace}/pods/{meta.name}/eviction",
            body=body,
            request_timeout=self.controller.write_timeout,
        )
