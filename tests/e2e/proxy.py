"""A plain-HTTP reverse proxy in front of the test apiserver that can hold chosen requests.

The scheduler is pointed at it through a kubeconfig of its own; every request is forwarded to the
apiserver over TLS with the original bearer token, responses (watch streams included) are
streamed back. A test can *hold* requests that match a predicate (say, the scheduler's first
binding of pod X): they wait in the proxy until the test releases them, which makes races such as
"someone else binds the pod while our binding is on the wire" deterministic. Every request and
its status is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from tests.e2e.apiserver import KubeEnv

_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
}


@dataclass
class Seen:
    method: str
    path: str
    query: str
    body: bytes
    status: int | None = None
    response: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    @property
    def is_binding(self) -> bool:
        return self.method == "POST" and self.path.endswith("/binding")

    @property
    def pod_name(self) -> str:
        # /api/v1/namespaces/NS/pods/NAME[/sub]
        parts = self.path.split("/")
        return parts[6] if len(parts) > 6 and parts[5] == "pods" else ""


@dataclass
class Hold:
    """Requests matching ``match`` (at most ``limit`` of them) wait until :meth:`release`."""

    match: Callable[[Seen], bool]
    limit: int = 1
    held: list[Seen] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)
    answered: asyncio.Event = field(default_factory=asyncio.Event)

    def release(self) -> None:
        self.released.set()


class ApiProxy:
    def __init__(self, env: KubeEnv) -> None:
        self.env = env
        self.seen: list[Seen] = []
        self.holds: list[Hold] = []
        #: Cleared: chunks of pod watch streams are held back (in order) until it is set again.
        self.pod_watch_gate = asyncio.Event()
        self.pod_watch_gate.set()
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ApiProxy:
        ctx = ssl.create_default_context(cafile=str(self.env.ca_file))
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ctx),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            auto_decompress=False,
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.pod_watch_gate.set()
        for h in self.holds:
            h.release()
        if self._runner is not None:
            await self._runner.cleanup()
        # A handler streaming a watch whose client went away only notices on its next write:
        # cleanup() leaves those running. End them here.
        leftover = [t for t in asyncio.all_tasks() if not t.done() and _is_server_task(t)]
        for t in leftover:
            t.cancel()
        if leftover:
            await asyncio.wait(leftover, timeout=10)
        if self._session is not None:
            await self._session.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kubeconfig(self, path: Path, token: str) -> Path:
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "proxy", "cluster": {"server": self.url}}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "u"}}],
            "current-context": "proxy",
        }
        path.write_text(json.dumps(cfg))
        path.chmod(0o600)
        return path

    def hold(self, match: Callable[[Seen], bool], limit: int = 1) -> Hold:
        h = Hold(match, limit)
        self.holds.append(h)
        return h

    def bindings(self, pod: str | None = None) -> list[Seen]:
        return [s for s in self.seen if s.is_binding and (pod is None or s.pod_name == pod)]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        body = await request.read()
        seen = Seen(request.method, request.path, request.query_string, body)
        self.seen.append(seen)
        hold = next((h for h in self.holds if len(h.held) < h.limit and h.match(seen)), None)
        if hold is not None:
            hold.held.append(seen)
            hold.arrived.set()
            await hold.released.wait()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        url = self.env.url + request.path_qs
        try:
            upstream = await self._session.request(request.method, url, headers=headers, data=body or None)
        except (aiohttp.ClientError, OSError) as err:
            seen.status = 502
            return web.Response(status=502, text=f"proxy: {err}")
        try:
            seen.status = upstream.status
            resp = web.StreamResponse(
                status=upstream.status,
                headers={k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP},
            )
            await resp.prepare(request)
            watch = request.query.get("watch") in ("true", "1")
            gated = watch and request.path.endswith("/pods")
            with contextlib.suppress(aiohttp.ClientError, ConnectionResetError):
                async for chunk in upstream.content.iter_any():
                    if gated:
                        await self.pod_watch_gate.wait()
                    if not watch and len(seen.response) < 65536:
                        seen.response += chunk
                    await resp.write(chunk)
            await resp.write_eof()
            return resp
        finally:
            upstream.release()
            if hold is not None and seen in hold.held:
                hold.answered.set()


def _is_server_task(task: asyncio.Task[Any]) -> bool:
    coro = task.get_coro()
    name = getattr(coro, "__qualname__", "")
    return name.startswith("RequestHandler.")
