"""List-then-watch for one kind, delivering ordered add/update/delete callbacks.

Our own loop rather than kubernetes-asyncio's ``Watch`` (which retries a 410 once with the same
stale resourceVersion and then raises, and parses every line three times). It follows
client-go's Reflector, except in how it lists:

* every list, the first and a relist after a 410, is a consistent read (``resourceVersion``
  unset) in pages of ``limit`` objects, each page decoded and dropped before the next is asked
  for, and the watch starts from the list's RV (never from a listed item's). client-go lists at
  ``resourceVersion=0`` or the last synced RV instead, served by the watch cache, which ignores
  ``limit`` (kube-apiserver 1.20): 150,000 pods come back as one body of some 200 MB, all of it
  held while it is decoded. A paged read from etcd measured no dearer for the API server and
  etcd (bench/memory.py ``run --list-cost``) and keeps the scheduler's peak at one page. A
  page's ``continue`` token that expired (410) starts the list over, in pages again (client-go's
  pager falls back to one unpaged list);
* watches ask for bookmarks and a randomised ``timeoutSeconds``; every event and bookmark
  advances the RV, and a watch that ends resumes from it;
* 410 (as an HTTP status or an in-stream ``ERROR``) means relist; other failures back off
  exponentially with jitter;
* an *optional* kind (a CRD the cluster may lack) that the server does not serve (404) or lets
  us read (403) counts as synced and empty, and is listed again with backoff, up to once a
  minute, so a CRD installed (or an RBAC rule granted) later is picked up without a restart. A required kind
  keeps failing its list, and readiness keeps waiting for it.

A relist is diffed against the store: objects gone are delivered as deletes (with their last
known state), new ones as adds, changed ones (different resourceVersion) as updates, and a
recreated object (same name, new uid) as a delete then an add. Nothing is lost and nothing
is applied twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
import random
import time
import weakref
from collections.abc import AsyncIterator
from typing import Any, Generic, Protocol, TypeVar, cast

import aiohttp
import msgspec

from koordsched.backends.kube.backoff import Backoff
from koordsched.backends.kube.client import TRANSPORT_ERRORS, ApiError, KubeClient
from koordsched.backends.kube.kinds import KubeObject, ResourceKind
from koordsched.backends.kube.wire import (
    ADDED,
    BOOKMARK,
    DELETED,
    ERROR,
    EVENT_DECODER,
    LIST_META_DECODER,
    MINIMAL_DECODER,
    MODIFIED,
    STATUS_DECODER,
    ObjectList,
    Status,
    split_list,
)
from koordsched.observability.log_ratelimit import RepeatedErrors

log = logging.getLogger(__name__)

T = TypeVar("T", bound=KubeObject)
T_contra = TypeVar("T_contra", contravariant=True)

#: client-go's default page size for the initial list.
PAGE_SIZE = 500
#: client-go's minWatchTimeout; each watch asks for a timeout between this and twice it.
MIN_WATCH_TIMEOUT = 300.0
#: A watch that ends this fast with nothing delivered is treated as a failure (client-go does too).
SHORT_WATCH = 1.0
#: A watch that expires sooner than this after its list waits a backoff before relisting.
MIN_RELIST_PERIOD = 30.0
#: Refuse a single watch line longer than this rather than buffer without bound.
MAX_LINE = 64 * 1024 * 1024
#: Lists of tens of thousands of pods take a while; do not hang forever on a dead connection either.
LIST_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=30.0, sock_read=120.0)
#: An optional kind that is not available is listed again at most this far apart (plus jitter).
OPTIONAL_RECHECK = 60.0

#: List answers that mean "this kind is not available to us" rather than "try again", and why.
_UNAVAILABLE = {
    404: ("is not served", "its CRD is installed"),
    403: ("is forbidden", "RBAC grants list and watch on it"),
}


#: One per client (per API server): every informer's connection errors are the same outage.
_CONNECTION_ERRORS: weakref.WeakKeyDictionary[KubeClient, RepeatedErrors] = weakref.WeakKeyDictionary()


def connection_errors(client: KubeClient) -> RepeatedErrors:
    """The rate-limited log of ``client``'s connection errors, shared by its reflectors."""
    errors = _CONNECTION_ERRORS.get(client)
    if errors is None:
        errors = _CONNECTION_ERRORS[client] = RepeatedErrors(log)
    return errors


class ResourceHandler(Protocol[T_contra]):
    """What a reflector delivers to; called in event order on the event loop, never concurrently."""

    def on_add(self, obj: T_contra) -> None: ...
    def on_update(self, old: T_contra, new: T_contra) -> None: ...
    def on_delete(self, obj: T_contra) -> None: ...


class WatchExpired(Exception):
    """The watch's resourceVersion is older than the server's history: relist."""


class WatchStreamError(Exception):
    """An in-stream ``ERROR`` event other than 410: resume the watch after a backoff."""

    def __init__(self, status: Status) -> None:
        self.status = status
        super().__init__(f"watch error {status.code} {status.reason}: {status.message}")


class _Listed(enum.Enum):
    OK = enum.auto()
    FAILED = enum.auto()  # retried after the reflector's backoff
    UNAVAILABLE = enum.auto()  # optional kind, 404/403: synced empty, re-checked later


#: A list that failed this way is retried after a backoff.
_LIST_ERRORS: tuple[type[BaseException], ...] = (*TRANSPORT_ERRORS, msgspec.DecodeError)
#: A watch that failed this way is resumed from its RV after a backoff. ValueError covers
#: msgspec.DecodeError (a torn line) and an oversized line.
_WATCH_ERRORS: tuple[type[BaseException], ...] = (*TRANSPORT_ERRORS, ValueError, WatchStreamError)


async def iter_lines(stream: aiohttp.StreamReader, max_line: int = MAX_LINE) -> AsyncIterator[bytes]:
    """Newline-delimited chunks of ``stream``, however long each line is.

    ``StreamReader.readline`` refuses lines above its buffer limit (2 MiB in kubernetes-asyncio),
    and an object can be larger than that, so lines are assembled from raw chunks here.
    """
    pending = bytearray()
    async for chunk in stream.iter_any():
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                break
            if pending:
                pending += chunk[start:nl]
                line = bytes(pending)
                pending.clear()
            else:
                line = chunk[start:nl]
            start = nl + 1
            if line.strip():
                yield line
        if start < len(chunk):
            pending += chunk[start:]
            if len(pending) > max_line:
                raise ValueError(f"watch line longer than {max_line} bytes")
    if pending.strip():
        yield bytes(pending)


class Reflector(Generic[T]):
    """Keeps :attr:`store` in step with the API server and tells ``handler`` about every change.

    :attr:`synced` is set once the first list has been delivered (and stays set across relists).
    An ``optional`` reflector also sets it when the server answers 404 or 403: see
    :attr:`unavailable`; ``recheck`` spaces its lists from then on.
    """

    def __init__(
        self,
        client: KubeClient,
        kind: ResourceKind[T],
        handler: ResourceHandler[T],
        *,
        page_size: int = PAGE_SIZE,
        min_watch_timeout: float = MIN_WATCH_TIMEOUT,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
        short_watch: float = SHORT_WATCH,
        max_line: int = MAX_LINE,
        optional: bool = False,
        recheck: Backoff | None = None,
        errors: RepeatedErrors | None = None,
    ) -> None:
        self.client = client
        #: Connection errors (the server unreachable) are logged rate-limited, per API server.
        self.errors = errors or connection_errors(client)
        self._source = f"API server {client.host}"
        self.kind = kind
        self.handler = handler
        self.page_size = page_size
        self.min_watch_timeout = min_watch_timeout
        self.backoff = backoff or Backoff()
        self.short_watch = short_watch
        self.max_line = max_line
        self._rng = rng or random.Random()
        self.optional = optional
        # From a second up to a minute: a CRD applied together with the scheduler is picked up
        # at once, one that never comes costs a list a minute.
        self.recheck = recheck or Backoff(initial=1.0, cap=OPTIONAL_RECHECK, jitter=0.2)
        #: An optional kind the server does not serve or lets us read: synced, empty, re-checked.
        self.unavailable = False
        self._fallbacks = list(kind.fallback_paths)
        #: The objects as last seen, by ``namespace/name`` (``name`` when cluster-scoped).
        self.store: dict[str, T] = {}
        self.synced = asyncio.Event()
        #: The RV the next watch starts from (the last list's, then each event's or bookmark's).
        self.last_sync_rv = ""
        self._decoder = msgspec.json.Decoder(kind.type)
        self._list_decoder: msgspec.json.Decoder[ObjectList[T]] = msgspec.json.Decoder(
            cast(Any, ObjectList)[kind.type]
        )
        self._raw_list_decoder = msgspec.json.Decoder(ObjectList[msgspec.Raw])
        self._share = kind.sharing() if kind.sharing is not None else None
        self._task: asyncio.Task[None] | None = None
        #: Counters, for logs and tests.
        self.lists = 0
        self.watches = 0

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        if self._task is None or self._task.done():
            loop = asyncio.get_running_loop()
            self._task = loop.create_task(self.run(), name=f"reflector-{self.kind.kind}")
        return self._task

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        await asyncio.wait({task})

    async def run(self) -> None:
        """List, then watch; relist when the watch's history is gone. Runs until cancelled."""
        while True:
            t0 = time.monotonic()
            listed = await self._relist()
            if listed is _Listed.FAILED:
                await asyncio.sleep(self.backoff.next())
                continue
            if listed is _Listed.UNAVAILABLE:
                await asyncio.sleep(self.recheck.next())  # nothing to watch
                continue
            await self._watch_until_expired()
            if time.monotonic() - t0 < MIN_RELIST_PERIOD:
                # Expired again right after a list: back off rather than relist in a tight loop
                # (client-go waits its backoff between every list-and-watch).
                await asyncio.sleep(self.backoff.next())

    # --- list ----------------------------------------------------------------------------------

    def _selectors(self) -> list[tuple[str, str]]:
        q: list[tuple[str, str]] = []
        if self.kind.field_selector:
            q.append(("fieldSelector", self.kind.field_selector))
        if self.kind.label_selector:
            q.append(("labelSelector", self.kind.label_selector))
        return q

    async def _relist(self) -> _Listed:
        """List and deliver the difference; FAILED (logged) when the list failed."""
        for attempt in range(2):
            try:
                items, list_rv = await self._list()
            except ApiError as err:
                self.errors.succeeded(self._source)  # the server answered: it is reachable
                if err.gone and attempt == 0:
                    # A continue token older than etcd's compaction: the pages so far are
                    # dropped and the list starts over (client-go's pager falls back the same).
                    log.info(
                        "%s: list expired while paging (%s); listing afresh", self.kind.kind, err.message
                    )
                    continue
                if err.status == 404 and self._fallbacks:
                    # An older API server: the kind's older version (policy/v1beta1 before 1.21).
                    old = self.kind.path
                    self.kind = dataclasses.replace(self.kind, path=self._fallbacks.pop(0))
                    log.info("%s: %s is not served; watching %s", self.kind.kind, old, self.kind.path)
                    return await self._relist()
                if self.optional and err.status in _UNAVAILABLE:
                    self._mark_unavailable(err)
                    return _Listed.UNAVAILABLE
                log.warning("%s: list failed: %s", self.kind.kind, err)
                return _Listed.FAILED
            except _LIST_ERRORS as err:
                self._warn(err, "%s: list failed: %s: %s", self.kind.kind, type(err).__name__, err)
                return _Listed.FAILED
            self.errors.succeeded(self._source)
            self.lists += 1
            if self.unavailable:
                self.unavailable = False
                self.recheck.reset()
                log.info("%s: %s is served now; watching it", self.kind.kind, self.kind.path)
            self._replace(items, list_rv)
            return _Listed.OK
        return _Listed.FAILED

    def _mark_unavailable(self, err: ApiError) -> None:
        """Report synced and empty (what was seen before is deleted); log once until it is back."""
        if not self.unavailable:
            self.unavailable = True
            what, until = _UNAVAILABLE[err.status]
            readers = f" ({', '.join(self.kind.readers)})" if self.kind.readers else ""
            log.warning(
                "%s: %s %s (%d: %s); the plugins that read it%s see no %s objects. Re-checking "
                "with backoff up to every %gs, so once %s it is picked up without a restart.",
                self.kind.kind,
                self.kind.path,
                what,
                err.status,
                err.message,
                readers,
                self.kind.kind,
                self.recheck.cap,
                until,
            )
        self._replace([], "")

    async def _list(self) -> tuple[list[T], str]:
        """A consistent list in pages; each page's body is decoded (and its objects shared) and
        released before the next page is asked for."""
        items: list[T] = []
        cont = ""
        list_rv = ""
        while True:
            query = self._selectors()
            query.append(("limit", str(self.page_size)))
            if cont:
                query.append(("continue", cont))  # the token carries the list's RV
            body = await self.client.request_bytes(
                "GET", self.kind.path, query=query, request_timeout=LIST_TIMEOUT
            )
            page = self._decode_page(body)
            del body
            items.extend(page.items or ())
            list_rv = page.metadata.resource_version or list_rv
            cont = page.metadata.continue_
            if not cont:
                return items, list_rv

    def _decode_page(self, body: bytes) -> ObjectList[T]:
        if self._share is not None:
            return self._decode_one_by_one(body)
        try:
            return self._list_decoder.decode(body)
        except (msgspec.ValidationError, RecursionError):
            return self._decode_one_by_one(body)

    def _decode_one_by_one(self, body: bytes) -> ObjectList[T]:
        """The page's objects decoded one at a time (and shared, for a kind that shares parts).

        Decoded whole, every object of the page would exist unshared at once; one by one, each
        is shared before the next is built. It also keeps one bad object from hiding the others."""
        try:
            raw = self._raw_list_decoder.decode(body)
            metadata, pieces = raw.metadata, list(raw.items or ())
        except RecursionError:
            # Even finding the items recursed too deep: split the page without recursion.
            meta_json, parts = split_list(body)
            metadata = LIST_META_DECODER.decode(meta_json)
            pieces = [msgspec.Raw(p) for p in parts]
        share = self._share
        objs: list[T] = []
        for r in pieces:
            obj = self._decode_object(r)  # a bad object is logged and skipped
            if obj is not None:
                objs.append(share(obj) if share is not None else obj)
        return ObjectList(metadata=metadata, items=objs)

    def _decode_object(self, raw: msgspec.Raw) -> T | None:
        try:
            return self._decoder.decode(raw)
        except (msgspec.ValidationError, RecursionError) as err:
            try:
                meta = MINIMAL_DECODER.decode(raw).metadata
                name = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                name = "(unreadable metadata)"
            log.error("%s %s: cannot decode, ignoring it: %s", self.kind.kind, name, err)
            return None

    def _replace(self, items: list[T], list_rv: str) -> None:
        old = self.store
        new = {self.kind.key(obj): obj for obj in items}
        self.store = new
        for key, obj in old.items():
            if key not in new:
                self._deliver_delete(obj)
        for key, obj in new.items():
            prev = old.get(key)
            if prev is None:
                self._deliver_add(obj)
            elif prev.metadata.uid != obj.metadata.uid:
                self._deliver_delete(prev)
                self._deliver_add(obj)
            elif prev.metadata.resource_version != obj.metadata.resource_version:
                self._deliver_update(prev, obj)
        self.last_sync_rv = list_rv
        self.synced.set()

    # --- watch ---------------------------------------------------------------------------------

    async def _watch_until_expired(self) -> None:
        """Watch and re-watch from the last RV; return when a relist is needed."""
        while True:
            t0 = time.monotonic()
            try:
                seen = await self._watch_once()
            except WatchExpired as err:
                log.info("%s: watch expired (%s); relisting", self.kind.kind, err)
                return
            except ApiError as err:
                self.errors.succeeded(self._source)
                if err.gone:
                    log.info("%s: watch expired (%s); relisting", self.kind.kind, err.message)
                    return
                delay = err.retry_after if err.retry_after is not None else self.backoff.next()
                log.warning("%s: watch failed: %s; retrying in %.1fs", self.kind.kind, err, delay)
                await asyncio.sleep(delay)
                if not err.transient:
                    return  # 403, 404...: start over with a list, as client-go does
                continue
            except _WATCH_ERRORS as err:
                delay = self.backoff.next()
                self._warn(
                    err,
                    "%s: watch interrupted: %s: %s; resuming in %.1fs",
                    self.kind.kind,
                    type(err).__name__,
                    err,
                    delay,
                )
                await asyncio.sleep(delay)
                continue
            if seen:
                self.backoff.reset()
            elif time.monotonic() - t0 < self.short_watch:
                delay = self.backoff.next()
                log.warning("%s: very short watch with no events; resuming in %.1fs", self.kind.kind, delay)
                await asyncio.sleep(delay)

    def _warn(self, err: BaseException, msg: str, *args: object) -> None:
        """A connection error through the shared rate limit; anything else as it comes."""
        if isinstance(err, TRANSPORT_ERRORS):
            self.errors.failed(self._source, f"{type(err).__name__}: {err}", msg, *args, stacklevel=2)
        else:
            log.warning(msg, *args, stacklevel=2)

    async def _watch_once(self) -> int:
        """One watch request, streamed to its end; returns how many lines it carried."""
        timeout = int(self.min_watch_timeout * (1.0 + self._rng.random()))
        query = [
            *self._selectors(),
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self.last_sync_rv),
            ("timeoutSeconds", str(timeout)),
        ]
        client_timeout = aiohttp.ClientTimeout(total=None, sock_connect=30.0, sock_read=timeout + 30.0)
        resp = await self.client.request("GET", self.kind.path, query=query, request_timeout=client_timeout)
        self.errors.succeeded(self._source)
        self.watches += 1
        seen = 0
        try:
            async for line in iter_lines(resp.content, self.max_line):
                seen += 1
                self._handle_line(line)
        except BaseException:
            resp.close()  # the stream is unfinished: drop the connection rather than reuse it
            raise
        resp.release()
        return seen

    def _handle_line(self, line: bytes) -> None:
        event = EVENT_DECODER.decode(line)
        kind = event.type
        if kind == BOOKMARK:
            rv = MINIMAL_DECODER.decode(event.object).metadata.resource_version
            if rv:
                self.last_sync_rv = rv
            return
        if kind == ERROR:
            try:
                status = STATUS_DECODER.decode(event.object)
            except (msgspec.DecodeError, msgspec.ValidationError):
                status = Status(message=bytes(event.object).decode(errors="replace"))
            if status.code == 410 or status.reason in ("Expired", "Gone"):
                raise WatchExpired(status.message)
            raise WatchStreamError(status)
        if kind not in (ADDED, MODIFIED, DELETED):
            log.warning("%s: unknown watch event type %r ignored", self.kind.kind, kind)
            return
        obj = self._decode_object(event.object)
        if obj is None:
            meta = MINIMAL_DECODER.decode(event.object).metadata
            if kind == DELETED:
                gone = self.store.pop(self.kind.key_of(meta.namespace, meta.name), None)
                if gone is not None:
                    self._deliver_delete(gone)
            if meta.resource_version:
                self.last_sync_rv = meta.resource_version
            return
        if self._share is not None:
            obj = self._share(obj)
        self._apply(kind, obj)
        if obj.metadata.resource_version:
            self.last_sync_rv = obj.metadata.resource_version

    def _apply(self, kind: str, obj: T) -> None:
        key = self.kind.key(obj)
        prev = self.store.get(key)
        if kind == DELETED:
            if prev is None:
                return  # never seen (or already deleted by a relist): nothing to undo
            del self.store[key]
            self._deliver_delete(obj if prev.metadata.uid == obj.metadata.uid else prev)
            return
        self.store[key] = obj
        if prev is None:
            self._deliver_add(obj)
        elif prev.metadata.uid != obj.metadata.uid:
            self._deliver_delete(prev)
            self._deliver_add(obj)
        elif prev.metadata.resource_version != obj.metadata.resource_version:
            self._deliver_update(prev, obj)

    # --- delivery: a handler's bug must not stop the stream ------------------------------------

    def _deliver_add(self, obj: T) -> None:
        try:
            self.handler.on_add(obj)
        except Exception:
            log.exception("%s %s: add handler failed", self.kind.kind, self.kind.key(obj))

    def _deliver_update(self, old: T, new: T) -> None:
        try:
            self.handler.on_update(old, new)
        except Exception:
            log.exception("%s %s: update handler failed", self.kind.kind, self.kind.key(new))

    def _deliver_delete(self, obj: T) -> None:
        try:
            self.handler.on_delete(obj)
        except Exception:
            log.exception("%s %s: delete handler failed", self.kind.kind, self.kind.key(obj))
