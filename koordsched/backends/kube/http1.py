"""A lean HTTP/1.1 client for the API server's request/response calls (binds, events, patches).

aiohttp spends about 0.2 ms of CPU per request (request and response objects, several timers, its
stream reader and tracing hooks); the two writes of a pod (its binding and its Scheduled event)
were about a third of the scheduler's CPU per pod end to end. Here a request is one write on a
kept-alive connection and its answer is parsed as it arrives: the status line, the headers, then a
``Content-Length`` or chunked body. Watches (streamed) and anything through a proxy stay on aiohttp.

A connection carries one request at a time. One that failed, timed out or was cancelled mid-request,
or that the server asked to close, is never reused. Errors are ``aiohttp.ClientError`` subclasses
or ``OSError`` (a refused connection is ``ConnectionRefusedError``), and a timeout is
``TimeoutError``, as callers expect of :data:`~koordsched.backends.kube.client.TRANSPORT_ERRORS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections import deque

import aiohttp

#: The most a response's status line and headers may take.
MAX_HEAD = 64 * 1024
#: The most a response body may take (the largest object etcd stores is 1.5 MiB; lists are paged).
MAX_BODY = 256 * 1024 * 1024


class ProtocolError(aiohttp.ClientError):
    """The server's answer is not HTTP/1.1 as this client reads it."""


Response = tuple[int, dict[str, str], bytes]


class _Conn(asyncio.Protocol):
    """One connection; :meth:`send` writes a request and waits for its whole response."""

    def __init__(self, pool: Http1Pool) -> None:
        self._pool = pool
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.forgotten = False
        self._buf = bytearray()
        self._waiter: asyncio.Future[Response] | None = None
        self._status = 0
        self._headers: dict[str, str] = {}
        self._length: int | None = None
        self._chunked = False
        self._body = bytearray()
        self.keep_alive = True

    # --- asyncio.Protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            if self._status and self._length is None and not self._chunked:
                # A body delimited by the end of the connection.
                self._finish(bytes(self._buf))
            else:
                err = aiohttp.ServerDisconnectedError("the API server closed the connection")
                waiter.set_exception(err)
        self._pool.lost(self)

    def data_received(self, data: bytes) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            self.abort()  # nobody asked: the connection is out of step
            return
        self._buf += data
        try:
            self._parse()
        except (ValueError, ProtocolError) as exc:
            waiter.set_exception(exc if isinstance(exc, ProtocolError) else ProtocolError(str(exc)))
            self.abort()

    # --- requests ---------------------------------------------------------------------------------

    async def send(self, request: bytes) -> Response:
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._status, self._length, self._chunked = 0, None, False
        self.transport.write(request)
        try:
            return await self._waiter
        finally:
            self._waiter = None

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # --- parsing ----------------------------------------------------------------------------------

    def _parse(self) -> None:
        buf = self._buf
        if not self._status:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD:
                    raise ProtocolError("response headers too long")
                return
            lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
            del buf[: end + 4]
            version, _, rest = lines[0].partition(" ")
            if not version.startswith("HTTP/1."):
                raise ProtocolError(f"not an HTTP/1.x response: {lines[0][:80]!r}")
            status = int(rest[:3])
            if status < 200:  # 1xx (never asked for here): skip it, the real answer follows
                self._parse()
                return
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                if not sep:
                    raise ProtocolError(f"malformed header line {line[:80]!r}")
                headers[name.strip().lower()] = value.strip()
            self._status, self._headers = status, headers
            self.keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
            self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
            if self._chunked:
                self._length = None
            elif status in (204, 304):
                self._length = 0
            elif "content-length" in headers:
                self._length = int(headers["content-length"])
                if not 0 <= self._length <= MAX_BODY:
                    raise ProtocolError(f"content-length {self._length} out of range")
            else:
                self._length = None  # read until the server closes
                self.keep_alive = False
            self._body = bytearray()
        if self._chunked:
            self._parse_chunks()
        elif self._length is not None and len(buf) >= self._length:
            body = bytes(buf[: self._length])
            del buf[: self._length]
            self._finish(body)
        elif self._length is None and len(buf) > MAX_BODY:
            raise ProtocolError("response body too large")

    def _parse_chunks(self) -> None:
        buf = self._buf
        while True:
            eol = buf.find(b"\r\n")
            if eol < 0:
                if len(buf) > MAX_HEAD:
                    raise ProtocolError("chunk size line too long")
                return
            size = int(bytes(buf[:eol]).split(b";", 1)[0].strip(), 16)
            if size == 0:
                # The last chunk, optional trailers, then an empty line.
                end = buf.find(b"\r\n\r\n", eol)
                if end < 0:
                    if len(buf) > MAX_HEAD:
                        raise ProtocolError("chunked trailers too long")
                    return
                del buf[: end + 4]
                self._finish(bytes(self._body))
                return
            if len(buf) < eol + 2 + size + 2:
                return
            self._body += buf[eol + 2 : eol + 2 + size]
            if len(self._body) > MAX_BODY:
                raise ProtocolError("response body too large")
            del buf[: eol + 2 + size + 2]

    def _finish(self, body: bytes) -> None:
        waiter = self._waiter
        if self._buf:
            self.keep_alive = False  # more than was answered: out of step, do not reuse
        if waiter is not None and not waiter.done():
            waiter.set_result((self._status, self._headers, body))


class Http1Pool:
    """Up to ``limit`` kept-alive connections to one server; requests beyond it wait their turn."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None = None,
        limit: int = 64,
    ) -> None:
        self.host, self.port = host, port
        self.authority = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
        self._ssl = ssl_context
        self._server_hostname = server_hostname
        self._limit = max(1, limit)
        self._idle: list[_Conn] = []
        self._all: set[_Conn] = set()
        self._count = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    async def request(self, head: bytes, body: bytes | None, time_limit: float | None) -> Response:
        """Send a request (``head`` ends with the blank line) and return (status, headers, body).

        ``time_limit`` bounds it all (waiting for a connection included), in seconds; None: no limit.
        """
        async with asyncio.timeout(time_limit):
            conn = await self._acquire()
            try:
                resp = await conn.send(head + body if body else head)
            except BaseException:
                self._release(conn, reuse=False)
                raise
        self._release(conn, reuse=conn.keep_alive and not conn.closed)
        return resp

    async def _acquire(self) -> _Conn:
        loop = asyncio.get_running_loop()
        while True:
            if self._closed:
                raise aiohttp.ClientConnectionError("the client is closed")
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed:
                    return conn
            if self._count < self._limit:
                self._count += 1
                try:
                    # server_hostname may only be given with TLS; without it, the URL's host.
                    name = self._server_hostname if self._ssl is not None else None
                    _, proto = await loop.create_connection(
                        lambda: _Conn(self), self.host, self.port, ssl=self._ssl, server_hostname=name
                    )
                except BaseException:
                    self._count -= 1
                    self._wake()
                    raise
                self._all.add(proto)
                return proto
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # it was our turn: pass it on
                raise

    def _release(self, conn: _Conn, *, reuse: bool) -> None:
        if reuse and not self._closed:
            self._idle.append(conn)
            self._wake()
        else:
            conn.abort()
            self._forget(conn)

    def lost(self, conn: _Conn) -> None:
        """The connection closed (either side); an idle one leaves the pool now."""
        if conn in self._idle:
            self._idle.remove(conn)
            self._forget(conn)

    def _forget(self, conn: _Conn) -> None:
        if not conn.forgotten:
            conn.forgotten = True
            self._all.discard(conn)
            self._count -= 1
            self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    @property
    def open_connections(self) -> int:
        return self._count

    def close(self) -> None:
        """Close every connection; requests in flight fail, later ones are refused."""
        self._closed = True
        for conn in list(self._all):
            conn.abort()
        self._idle.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
