"""The lean HTTP/1.1 pool the writes go through: framing, keep-alive, limits, failures.

A real TCP server on 127.0.0.1 answers with scripted bytes, so each framing the API server (Go's
net/http) may use is exercised exactly: Content-Length, chunked with and without trailers, a body
delimited by the connection's end, ``Connection: close``.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
from kubernetes_asyncio.client import Configuration

from koordsched.backends.kube.client import ApiError, new_client
from koordsched.backends.kube.http1 import Http1Pool, ProtocolError
from koordsched.backends.kube.port import refused

Answer = Callable[[bytes], bytes | None]  # the request's bytes -> the raw answer (None: no answer)


def ok(body: bytes = b'{"kind":"Status","code":201}', status: str = "201 Created", extra: str = "") -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    )
    return head.encode() + body


@dataclass
class Server:
    answer: Answer
    connections: int = 0
    open_now: int = 0
    peak: int = 0
    requests: list[bytes] = field(default_factory=list)
    close_after_answer: bool = False
    port: int = 0
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        self.connections += 1
        self.open_now += 1
        self.peak = max(self.peak, self.open_now)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                req = head + (await reader.readexactly(length) if length else b"")
                self.requests.append(req)
                out = self.answer(req)
                if out is None:
                    await reader.read()  # no answer, until the client gives up on the connection
                    return
                writer.write(out)
                await writer.drain()
                if self.close_after_answer or b"Connection: close" in out:
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            self.open_now -= 1
            writer.close()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    srv = Server(lambda _: ok())
    tcp = await asyncio.start_server(srv.handle, "127.0.0.1", 0)
    srv.port = tcp.sockets[0].getsockname()[1]
    try:
        yield srv
    finally:
        tcp.close()
        if srv.tasks:  # the handlers end once the clients' connections are closed
            _, stuck = await asyncio.wait(srv.tasks, timeout=2)
            for t in stuck:
                t.cancel()
            await asyncio.gather(*stuck, return_exceptions=True)


def pool(srv: Server, limit: int = 4) -> Http1Pool:
    return Http1Pool("127.0.0.1", srv.port, ssl_context=None, limit=limit)


HEAD = b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n"
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


async def test_content_length_answers_on_one_kept_alive_connection(server: Server) -> None:
    p = pool(server)
    try:
        for _ in range(5):
            status, headers, body = await p.request(HEAD, b"{}", 5.0)
            assert (status, headers["content-type"], body) == (
                201,
                "application/json",
                b'{"kind":"Status","code":201}',
            )
    finally:
        p.close()
    assert server.connections == 1 and len(server.requests) == 5
    assert server.requests[0].endswith(b"\r\n\r\n{}")


@pytest.mark.parametrize(
    "raw",
    [
        CHUNKED + b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n",
        CHUNKED + b"5\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n",
    ],
)
async def test_chunked_bodies_with_and_without_trailers(server: Server, raw: bytes) -> None:
    server.answer = lambda _: raw
    p = pool(server)
    try:
        for _ in range(2):  # and the connection stays in step for the next one
            assert await p.request(HEAD, b"{}", 5.0) == (
                200,
                {"transfer-encoding": "chunked"},
                b"hello, world",
            )
    finally:
        p.close()
    assert server.connections == 1


async def test_answers_split_anywhere_are_put_together(server: Server) -> None:
    raw = ok(b'{"a":1}')

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n{}")
        for i in range(len(raw)):
            writer.write(raw[i : i + 1])
            await writer.drain()
            await asyncio.sleep(0)
        await reader.read()

    tcp = await asyncio.start_server(trickle, "127.0.0.1", 0)
    p = Http1Pool("127.0.0.1", tcp.sockets[0].getsockname()[1], ssl_context=None)
    try:
        assert (await p.request(HEAD, b"{}", 5.0))[2] == b'{"a":1}'
    finally:
        p.close()
        tcp.close()


async def test_connection_close_and_eof_delimited_bodies_are_not_reused(server: Server) -> None:
    answers = iter(
        [
            ok(extra="Connection: close\r\n"),
            b"HTTP/1.1 200 OK\r\n\r\nuntil the end",  # no length: the body ends with the connection
            ok(),
        ]
    )
    server.answer = lambda _: next(answers)
    server.close_after_answer = False
    p = pool(server)
    try:
        assert (await p.request(HEAD, b"{}", 5.0))[0] == 201
        server.close_after_answer = True
        assert await p.request(HEAD, b"{}", 5.0) == (200, {}, b"until the end")
        server.close_after_answer = False
        assert (await p.request(HEAD, b"{}", 5.0))[0] == 201
    finally:
        p.close()
    assert server.connections == 3


async def test_an_idle_connection_the_server_closed_is_replaced(server: Server) -> None:
    server.close_after_answer = True  # as an idle timeout would
    p = pool(server)
    try:
        assert (await p.request(HEAD, b"{}", 5.0))[0] == 201
        await asyncio.sleep(0.05)  # the close arrives while the connection is idle
        assert p.open_connections == 0
        assert (await p.request(HEAD, b"{}", 5.0))[0] == 201
    finally:
        p.close()
    assert server.connections == 2


async def test_a_time_limit_fails_the_request_and_drops_its_connection(server: Server) -> None:
    answers = iter([None, ok()])  # the first is never answered
    server.answer = lambda _: next(answers)
    p = pool(server)
    try:
        with pytest.raises(TimeoutError):
            await p.request(HEAD, b"{}", 0.2)
        assert p.open_connections == 0
        assert (await p.request(HEAD, b"{}", 5.0))[0] == 201
    finally:
        p.close()
    assert server.connections == 2


async def test_a_lost_answer_and_a_garbled_one_are_transport_errors(server: Server) -> None:
    server.answer = lambda _: b"HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\ncut short"
    server.close_after_answer = True
    p = pool(server)
    try:
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await p.request(HEAD, b"{}", 5.0)
        server.close_after_answer = False
        server.answer = lambda _: b"SMTP ready\r\n\r\n"
        with pytest.raises(ProtocolError):
            await p.request(HEAD, b"{}", 5.0)
        assert p.open_connections == 0
    finally:
        p.close()


async def test_never_more_connections_than_the_limit(server: Server) -> None:
    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.05)
        await server.handle(reader, writer)

    tcp = await asyncio.start_server(slow, "127.0.0.1", 0)
    p = Http1Pool("127.0.0.1", tcp.sockets[0].getsockname()[1], ssl_context=None, limit=2)
    try:
        results = await asyncio.gather(*(p.request(HEAD, b"{}", 5.0) for _ in range(9)))
        assert all(r[0] == 201 for r in results)
        assert server.peak <= 2 and len(server.requests) == 9
    finally:
        p.close()
        tcp.close()


async def test_a_cancelled_waiter_passes_its_turn_on(server: Server) -> None:
    answers = iter([None, ok(), ok()])
    server.answer = lambda _: next(answers)
    p = pool(server, limit=1)
    try:
        stuck = asyncio.ensure_future(p.request(HEAD, b"{}", None))  # holds the only connection
        await asyncio.sleep(0.05)
        waiting = asyncio.ensure_future(p.request(HEAD, b"{}", None))
        await asyncio.sleep(0.05)
        waiting.cancel()
        stuck.cancel()
        await asyncio.gather(stuck, waiting, return_exceptions=True)
        assert (await p.request(HEAD, b"{}", 5.0))[0] == 201
    finally:
        p.close()


async def test_a_refused_connection_reads_as_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    p = Http1Pool("127.0.0.1", port, ssl_context=None)
    try:
        with pytest.raises(OSError) as info:
            await p.request(HEAD, b"{}", 5.0)
        assert refused(info.value)
        assert p.open_connections == 0
    finally:
        p.close()


async def test_the_client_sends_writes_through_it_with_status_and_retry_after(server: Server) -> None:
    server.answer = lambda req: (
        ok(
            b'{"kind":"Status","code":429,"reason":"TooManyRequests","message":"slow down"}',
            "429 Too Many",
            "Retry-After: 3\r\n",
        )
        if b"/busy" in req
        else ok()
    )
    c = new_client(Configuration(host=f"http://127.0.0.1:{server.port}/prefix"), qps=0, burst=0)
    try:
        assert c._lean is not None
        await c.request_bytes(
            "POST", "/api/v1/namespaces/n/pods/p/binding", body={"a": 1}, request_timeout=5.0
        )
        with pytest.raises(ApiError) as info:
            await c.request_bytes("PATCH", "/busy", body={}, request_timeout=5.0)
        assert (info.value.status, info.value.retry_after, info.value.message) == (429, 3.0, "slow down")
        view = c.with_limiter(100, 10)
        await view.request_bytes("DELETE", "/x y", request_timeout=5.0)
        await view.close()  # a view leaves the shared pool open
        await c.request_bytes("GET", "/z", query=[("a", "b c")], request_timeout=5.0)
    finally:
        await c.close()
    first, _, third, fourth = server.requests
    assert first.startswith(b"POST /prefix/api/v1/namespaces/n/pods/p/binding HTTP/1.1\r\n")
    assert b"\r\nContent-Length: 7\r\n" in first and first.endswith(b'{"a":1}')
    assert third.startswith(b"DELETE /prefix/x%20y HTTP/1.1\r\n") and b"Content-Length" not in third
    assert fourth.startswith(b"GET /prefix/z?a=b+c HTTP/1.1\r\n")
    assert server.connections == 1


async def test_a_line_break_in_a_header_is_refused(server: Server) -> None:
    cfg = Configuration(host=f"http://127.0.0.1:{server.port}")
    cfg.api_key = {"BearerToken": "tok\r\nX-Injected: 1"}
    c = new_client(cfg, qps=0, burst=0)
    try:
        with pytest.raises(ValueError, match="line break"):
            await c.request_bytes("POST", "/x", body={}, request_timeout=5.0)
    finally:
        await c.close()
    assert server.requests == []


async def test_a_proxy_keeps_every_request_on_aiohttp(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    cfg = Configuration(host="https://127.0.0.1:1")
    direct = new_client(cfg, qps=0, burst=0)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    via_env = new_client(cfg, qps=0, burst=0)
    monkeypatch.delenv("HTTPS_PROXY")
    cfg_proxy = Configuration(host="https://127.0.0.1:1")
    cfg_proxy.proxy = "http://proxy.invalid:3128"
    via_config = new_client(cfg_proxy, qps=0, burst=0)
    try:
        assert direct._lean is not None and direct._lean._ssl is not None
        assert via_env._lean is None and via_config._lean is None
    finally:
        for c in (direct, via_env, via_config):
            await c.close()
