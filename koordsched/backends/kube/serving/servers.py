"""The serving port(s) of ``koordsched run``, wired together from :class:`ServingOptions`.

``--secure-port`` (unless 0): HTTPS, delegated authn/authz in front of every path.
``--port`` (when not 0): plain HTTP for the health paths only, for manifests written for
Koordinator's insecure ``--port=10251`` probes; /metrics and /configz are never served there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from koordsched.backends.kube.server import HttpServer, build_app, build_health_app
from koordsched.backends.kube.serving.delegation import Delegation, DelegationError, delegate
from koordsched.backends.kube.serving.filters import auth_middleware
from koordsched.backends.kube.serving.options import ServingOptions
from koordsched.backends.kube.serving.tls import TLSConfigError, server_context
from koordsched.observability.health import HealthChecks
from koordsched.observability.metrics import MetricsExposition, RestClientMetrics

log = logging.getLogger(__name__)

__all__ = ["DelegationError", "Servers", "TLSConfigError", "build_servers"]


class Servers:
    """The started servers; :meth:`close` stops them and closes the delegation's connections."""

    def __init__(self, servers: list[HttpServer], delegation: Delegation | None) -> None:
        self.servers = servers
        self.delegation = delegation

    async def start(self) -> None:
        """Bind and serve; raises OSError (after closing what started) when a port is taken."""
        try:
            for s in self.servers:
                await s.start()
        except BaseException:
            await self.close()
            raise

    @property
    def secure_port(self) -> int | None:
        return next((s.port for s in self.servers if s.ssl_context is not None), None)

    async def close(self) -> None:
        for s in self.servers:
            await s.close()
        if self.delegation is not None:
            delegation, self.delegation = self.delegation, None
            await delegation.close()


async def build_servers(
    options: ServingOptions,
    *,
    health: HealthChecks,
    metrics: MetricsExposition,
    config: Callable[[], dict[str, Any]] | None,
    default_kubeconfig: str | None,
    client_metrics: RestClientMetrics | None = None,
    profiling: bool = False,
    set_verbosity: Callable[[int], None] | None = None,
) -> Servers:
    """Everything the options ask for, not started yet; ``profiling`` and ``set_verbosity``
    are :func:`~koordsched.backends.kube.server.build_app`'s.

    Raises :class:`DelegationError` (with its exit status) or :class:`TLSConfigError` (exit 2).
    """
    servers: list[HttpServer] = []
    delegation: Delegation | None = None
    address = options.listen_address
    if options.secure_port:
        delegation = await delegate(options, default_kubeconfig=default_kubeconfig, metrics=client_metrics)
        try:
            # Generating a key pair takes a moment of CPU: off the loop.
            ctx, where = await asyncio.to_thread(
                server_context,
                cert_file=options.tls_cert_file,
                key_file=options.tls_private_key_file,
                cert_dir=options.cert_dir,
                bind_address=options.bind_address,
                client_ca=delegation.client_ca,
            )
        except BaseException:
            await delegation.close()
            raise
        log.info(
            "serving HTTPS with %s%s",
            where,
            "; client certificates are verified against the client CA" if delegation.client_ca else "",
        )
        app = build_app(
            health,
            metrics,
            config,
            middlewares=[auth_middleware(delegation.authenticator, delegation.authorizer)],
            profiling=profiling,
            set_verbosity=set_verbosity,
        )
        servers.append(HttpServer(app, address, options.secure_port, ssl_context=ctx))
    if options.insecure_port:
        servers.append(HttpServer(build_health_app(health), address, options.insecure_port))
    if not servers:
        log.warning("--secure-port and --port are both 0: no health, metrics or configz endpoint is served")
    return Servers(servers, delegation)
