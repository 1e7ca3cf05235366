"""The HTTP endpoints kube-scheduler serves: /healthz, /livez, /readyz, /metrics (and
/metrics/resources) and /configz.

This module builds the aiohttp applications and binds them; who may call what (HTTPS,
delegated authn/authz) is :mod:`koordsched.backends.kube.serving`'s, passed in as middleware.
Health bodies and status codes come from :class:`HealthChecks`, which follows apiserver's
healthz package; this module only serves them.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
from aiohttp import web

from koordsched.backends.kube.debug_routes import add_debug_routes
from koordsched.backends.kube.serving.options import DEFAULT_BIND_ADDRESS, DEFAULT_SECURE_PORT
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


def _health_handler(health: HealthChecks) -> Callable[[web.Request], Any]:
    async def health_handler(request: web.Request) -> web.Response:
        endpoint = request.match_info["endpoint"] + request.match_info.get("check", "")
        status, body = health.render(
            endpoint, verbose="verbose" in request.query, exclude=request.query.getall("exclude", [])
        )
        if status != 200:
            failures = health.failures(request.match_info["endpoint"])
            log.info("%s check failed: %s", endpoint, "; ".join(f"{n}: {r}" for n, r in failures))
        return web.Response(status=status, body=body.encode(), headers={"Content-Type": HEALTH_CONTENT_TYPE})

    return health_handler


def _add_health_routes(app: web.Application, health: HealthChecks) -> None:
    handler = _health_handler(health)
    pattern = "{endpoint:" + "|".join(HEALTH_ENDPOINTS) + "}"
    app.router.add_get(f"/{pattern}", handler)
    app.router.add_get(f"/{pattern}{{check:/[^/]+}}", handler)


def build_app(
    health: HealthChecks,
    metrics: MetricsExposition,
    config: Callable[[], dict[str, Any]] | None = None,
    *,
    middlewares: Iterable[Any] = (),
    profiling: bool = False,
    set_verbosity: Callable[[int], None] | None = None,
) -> web.Application:
    """The application of the secure port; ``config`` returns what ``/configz`` shows.

    ``middlewares`` guard it (authentication and authorization; see ``serving.filters``).
    ``profiling`` (kube-scheduler's ``--profiling``) adds ``/debug/pprof/*`` and, given
    ``set_verbosity`` (what a klog level means for the logs), ``PUT /debug/flags/v``.
    """

    async def metrics_handler(request: web.Request) -> web.Response:
        return web.Response(body=metrics.exposition(), headers={"Content-Type": METRICS_CONTENT_TYPE})

    async def resources_handler(request: web.Request) -> web.Response:
        # kube-scheduler's /metrics/resources: the pod resource families only.
        body = metrics.resources_exposition()
        return web.Response(body=body, headers={"Content-Type": METRICS_CONTENT_TYPE})

    async def configz_handler(request: web.Request) -> web.Response:
        if config is None:
            raise web.HTTPNotFound()
        return web.Response(body=msgspec.json.encode(config()), content_type="application/json")

    app = web.Application(middlewares=list(middlewares))
    _add_health_routes(app, health)
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/metrics/resources", resources_handler)
    app.router.add_get("/configz", configz_handler)
    if profiling:
        add_debug_routes(app, set_verbosity)
    return app


def build_health_app(health: HealthChecks) -> web.Application:
    """The plain-HTTP application of ``--port``: the health paths only, without authentication.

    /metrics and /configz get a 404 that says where they are, so a scrape aimed at the old
    insecure port fails clearly instead of silently.
    """

    async def secure_only(request: web.Request) -> web.Response:
        return web.Response(
            status=404,
            text=f"{request.path} is served only over HTTPS on --secure-port, with authentication\n",
        )

    app = web.Application()
    _add_health_routes(app, health)
    app.router.add_get("/metrics", secure_only)
    app.router.add_get("/metrics/resources", secure_only)
    app.router.add_get("/configz", secure_only)
    return app


class HttpServer:
    """The app bound to ``address:port`` (port 0 picks a free one; see :attr:`port`), over TLS
    when given an ``ssl_context``."""

    def __init__(
        self,
        app: web.Application,
        address: str = DEFAULT_BIND_ADDRESS,
        port: int = DEFAULT_SECURE_PORT,
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.app = app
        self.address = address
        self.requested_port = port
        self.ssl_context = ssl_context
        self._runner: web.AppRunner | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.ssl_context is not None else "http"

    async def start(self) -> None:
        """Bind and serve; raises OSError when the address is taken or not ours."""
        # Probes and scrapes finish in milliseconds; do not wait aiohttp's default 60 s on stop.
        runner = web.AppRunner(self.app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.address, self.requested_port, ssl_context=self.ssl_context).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        what = "health, metrics and configz" if self.ssl_context is not None else "health checks only"
        log.info("serving %s on %s://%s:%d", what, self.scheme, self.address, self.port)

    @property
    def port(self) -> int:
        if self._runner is None or not self._runner.addresses:
            return self.requested_port
        return int(self._runner.addresses[0][1])

    async def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
