"""The HTTP endpoints kube-scheduler serves: /healthz, /livez, /readyz, /metrics and /configz.

Plain HTTP for now (Koordinator's own deployment probes koord-scheduler over plain HTTP on
``--port``); kube-scheduler's 10259 is HTTPS with delegated authn/authz, which is not done yet.
Health bodies and status codes come from :class:`HealthChecks`, which follows apiserver's
healthz package; this module only serves them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import msgspec
from aiohttp import web

from koordsched.backends.kube.flags import DEFAULT_BIND_ADDRESS, DEFAULT_PORT
from koordsched.config.types import KubeSchedulerConfiguration
from koordsched.observability.health import CONTENT_TYPE as HEALTH_CONTENT_TYPE
from koordsched.observability.health import HealthChecks
from koordsched.observability.metrics import MetricsExposition

log = logging.getLogger(__name__)

#: The Prometheus text format version kube-scheduler serves.
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
HEALTH_ENDPOINTS = ("healthz", "livez", "readyz")


def configz(raw: KubeSchedulerConfiguration) -> dict[str, Any]:
    """``/configz`` as kube-scheduler answers it: the configuration (as read) under ``componentconfig``."""
    return {"componentconfig": msgspec.to_builtins(raw)}


def build_app(
    health: HealthChecks,
    metrics: MetricsExposition,
    config: Callable[[], dict[str, Any]] | None = None,
) -> web.Application:
    """The aiohttp application; ``config`` returns what ``/configz`` shows."""

    async def health_handler(request: web.Request) -> web.Response:
        endpoint = request.match_info["endpoint"] + request.match_info.get("check", "")
        status, body = health.render(
            endpoint, verbose="verbose" in request.query, exclude=request.query.getall("exclude", [])
        )
        if status != 200:
            failures = health.failures(request.match_info["endpoint"])
            log.info("%s check failed: %s", endpoint, "; ".join(f"{n}: {r}" for n, r in failures))
        return web.Response(status=status, body=body.encode(), headers={"Content-Type": HEALTH_CONTENT_TYPE})

    async def metrics_handler(request: web.Request) -> web.Response:
        return web.Response(body=metrics.exposition(), headers={"Content-Type": METRICS_CONTENT_TYPE})

    async def configz_handler(request: web.Request) -> web.Response:
        if config is None:
            raise web.HTTPNotFound()
        return web.Response(body=msgspec.json.encode(config()), content_type="application/json")

    app = web.Application()
    pattern = "{endpoint:" + "|".join(HEALTH_ENDPOINTS) + "}"
    app.router.add_get(f"/{pattern}", health_handler)
    app.router.add_get(f"/{pattern}{{check:/[^/]+}}", health_handler)
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/configz", configz_handler)
    return app


class HttpServer:
    """The app bound to ``address:port`` (port 0 picks a free one; see :attr:`port`)."""

    def __init__(
        self, app: web.Application, address: str = DEFAULT_BIND_ADDRESS, port: int = DEFAULT_PORT
    ) -> None:
        self.app = app
        self.address = address
        self.requested_port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Bind and serve; raises OSError when the address is taken or not ours."""
        # Probes and scrapes finish in milliseconds; do not wait aiohttp's default 60 s on stop.
        runner = web.AppRunner(self.app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.address, self.requested_port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        log.info("serving health and metrics on http://%s:%d", self.address, self.port)

    @property
    def port(self) -> int:
        if self._runner is None or not self._runner.addresses:
            return self.requested_port
        return int(self._runner.addresses[0][1])

    async def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
