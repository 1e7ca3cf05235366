"""The API client: kubernetes-asyncio for config, auth and the connection pool; our own requests,
status checks and throttling.

kubernetes-asyncio's generated methods are not used: their models are slow to build and, with
``_preload_content=False``, version 36.1.0 returns non-2xx responses instead of raising (see the
ecosystem notes, section 1.5). Nor is its ``ApiClient.call_api``: per request it sanitizes the
headers, query and body recursively and encodes with the json module, which cost a fifth of the
scheduler's time per bind in the end-to-end benchmark. :meth:`KubeClient.request` sends on the
library's aiohttp session itself, with the library's auth (``update_params_for_auth``: the bearer
token, refreshed by its hook) and its proxy and TLS server name settings, encodes bodies with
msgspec, checks every status and raises :class:`ApiError`, so no caller can forget.

Every request waits on a client-side token bucket (``clientConnection.qps``/``burst``, as
client-go's default rate limiter) and is timed into ``rest_client_*`` metrics.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp
import msgspec
import yaml
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import ConfigException, load_incluster_config
from kubernetes_asyncio.config.kube_config import KubeConfigLoader

from koordsched import __version__
from koordsched.backends.kube.wire import decode_status
from koordsched.observability.metrics import NullMetrics, RestClientMetrics

log = logging.getLogger(__name__)

JSON = "application/json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"

USER_AGENT = f"koordsched/{__version__}"

#: What a dropped connection or a timeout raises; callers treat these as transient.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, asyncio.TimeoutError, OSError)

Query = Sequence[tuple[str, str]]
Timeout = aiohttp.ClientTimeout | float | None

#: What kubernetes-asyncio sends for ``_request_timeout=None``: no limit at all.
_NO_TIMEOUT = aiohttp.ClientTimeout()
_AUTH = ["BearerToken"]
_encode = msgspec.json.Encoder().encode


def _timeout(value: Timeout) -> aiohttp.ClientTimeout:
    """``_request_timeout`` as kubernetes-asyncio reads it: seconds in all, or a ClientTimeout."""
    if isinstance(value, aiohttp.ClientTimeout):
        return value
    return aiohttp.ClientTimeout(total=value) if value else _NO_TIMEOUT


class ClientConfigError(Exception):
    """No usable connection settings: a bad kubeconfig, or not in a cluster and none given."""


class ApiError(Exception):
    """A non-2xx answer, with the server's ``Status`` message when it sent one."""

    def __init__(
        self, status: int, body: bytes, *, method: str = "", path: str = "", retry_after: float | None = None
    ) -> None:
        self.status = status
        self.body = body
        self.method = method
        self.path = path
        self.retry_after = retry_after
        parsed = decode_status(body)
        self.reason = parsed.reason if parsed else ""
        self.message = parsed.message if parsed and parsed.message else body[:512].decode(errors="replace")
        head = f"{method} {path}: {status}" + (f" {self.reason}" if self.reason else "")
        super().__init__(f"{head}: {self.message}")

    @property
    def gone(self) -> bool:
        """410: the resourceVersion (or continue token) is older than the server's history."""
        return self.status == 410

    @property
    def transient(self) -> bool:
        """Worth retrying the same request later: throttled, timed out, or a server-side failure."""
        return self.status == 429 or self.status >= 500


class TokenBucket:
    """client-go's token bucket: ``burst`` requests at once, then ``qps`` per second.

    Waiters reserve a token up front (the bucket may go negative), so they are served in
    arrival order without a lock; a waiter cancelled while sleeping gives its token back.
    """

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if qps <= 0:
            raise ValueError("qps must be positive")
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock
        self._tokens = float(self.burst)
        self._last = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    def reserve(self) -> float:
        """Take a token; returns how long the caller must wait before using it."""
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def refund(self) -> None:
        self._tokens = min(float(self.burst), self._tokens + 1.0)

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay <= 0:
            return
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            self.refund()
            raise


class KubeClient:
    """Requests to the API server over one kubernetes-asyncio ``ApiClient`` (its aiohttp session).

    :meth:`with_limiter` gives a view sharing the connection pool but throttled separately:
    kube-scheduler gives events and leader election their own clients so that neither can eat
    the scheduling loop's budget, and we do the same.
    """

    def __init__(
        self,
        api: ApiClient,
        *,
        limiter: TokenBucket | None = None,
        metrics: RestClientMetrics | None = None,
        owns_api: bool = True,
    ) -> None:
        self.api = api
        self.limiter = limiter
        self.metrics: RestClientMetrics = metrics or NullMetrics()
        self._owns_api = owns_api
        host = str(api.configuration.host)
        self.host = urlsplit(host).netloc or host
        self._base = host
        rest = getattr(api, "rest_client", None)
        #: The library's session (its pool, TLS context, client certificate) and its per-request
        #: settings, as its ``RESTClientObject.request`` passes them.
        self._session: aiohttp.ClientSession = rest.pool_manager  # type: ignore[union-attr]
        self._options: dict[str, Any] = {}
        if getattr(rest, "proxy", None):
            self._options["proxy"] = rest.proxy  # type: ignore[union-attr]
        if getattr(rest, "proxy_headers", None):
            self._options["proxy_headers"] = rest.proxy_headers  # type: ignore[union-attr]
        if getattr(rest, "server_hostname", None):
            self._options["server_hostname"] = rest.server_hostname  # type: ignore[union-attr]
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}

    def with_limiter(self, qps: float, burst: int) -> KubeClient:
        """The same connection pool with its own token bucket; closing it leaves the pool open."""
        limiter = TokenBucket(qps, burst) if qps > 0 else None
        return KubeClient(self.api, limiter=limiter, metrics=self.metrics, owns_api=False)

    async def close(self) -> None:
        if self._owns_api:
            await self.api.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query = (),
        body: Mapping[str, Any] | None = None,
        content_type: str = JSON,
        request_timeout: Timeout = None,
    ) -> aiohttp.ClientResponse:
        """Send a request; the caller reads (or streams) a 2xx response and must release it.

        Any other status raises :class:`ApiError` after reading the body and releasing the
        connection; network failures raise one of :data:`TRANSPORT_ERRORS`.

        ``request_timeout=None`` means no limit at all: kubernetes-asyncio then sends an empty
        ``ClientTimeout``, which replaces the session's default. Pass one for every write.
        """
        if self.limiter is not None:
            await self.limiter.acquire()
        headers = {**self.api.default_headers, "Content-Type": content_type, "Accept": JSON}
        params = list(query)
        await self.api.update_params_for_auth(headers, params, _AUTH)
        url = self._base + path
        if params:
            url += "?" + urlencode(params)
        timeout = self._timeouts.get(request_timeout) if isinstance(request_timeout, float | int) else None
        if timeout is None:
            timeout = _timeout(request_timeout)
            # The writers pass a few constants; a computed remainder is not worth keeping.
            if isinstance(request_timeout, float | int) and len(self._timeouts) < 16:
                self._timeouts[request_timeout] = timeout
        data = _encode(body) if body is not None else None
        t0 = time.perf_counter()
        code = "<error>"
        try:
            resp = await self._session.request(
                method, url, data=data, headers=headers, timeout=timeout, **self._options
            )
            code = str(resp.status)
            if 200 <= resp.status < 300:
                return resp
            try:
                raw = await resp.read()
            finally:
                resp.release()
            raise ApiError(resp.status, raw, method=method, path=path, retry_after=_retry_after(resp.headers))
        finally:
            self.metrics.observe_rest_request(method, code, self.host, time.perf_counter() - t0)

    async def request_bytes(
        self,
        method: str,
        path: str,
        *,
        query: Query = (),
        body: Mapping[str, Any] | None = None,
        content_type: str = JSON,
        request_timeout: Timeout = None,
    ) -> bytes:
        """:meth:`request` for a whole body: read it, release the connection, return the bytes."""
        resp = await self.request(
            method, path, query=query, body=body, content_type=content_type, request_timeout=request_timeout
        )
        try:
            return await resp.read()
        finally:
            resp.release()


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _existing_file(kubeconfig: str) -> str:
    path = os.path.expanduser(kubeconfig)
    if not os.path.isfile(path):
        raise ClientConfigError(f"kubeconfig {kubeconfig!r}: no such file")
    return path


def _read_kubeconfig(kubeconfig: str) -> tuple[dict[str, Any], str]:
    """The kubeconfig as a dict, and the directory its relative certificate paths are relative to.

    Read here rather than by the library, which treats ':' in a path as a list separator
    ($KUBECONFIG) and lets file errors escape as something other than ConfigException.
    Runs once at start-up, so reading synchronously is fine.
    """
    path = _existing_file(kubeconfig)
    try:
        with open(path, encoding="utf-8") as f:
            loaded = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as exc:
        raise ClientConfigError(f"kubeconfig {kubeconfig!r}: {exc}") from exc
    if not isinstance(loaded, dict):
        raise ClientConfigError(f"kubeconfig {kubeconfig!r}: not a kubeconfig mapping")
    return loaded, os.path.dirname(os.path.abspath(path))


async def load_configuration(kubeconfig: str | None, master: str | None = None) -> Configuration:
    """Connection settings from ``kubeconfig`` when given, else the pod's service account.

    Both loaders write into a fresh ``Configuration``; the library's global default is never
    touched, so tests (and two clients in one process) cannot leak settings into each other.
    ``master`` (kube-scheduler's ``--master``) overrides the server; with it and no kubeconfig,
    as client-go's ``BuildConfigFromFlags``, the server is used without credentials.
    """
    cfg = Configuration()
    if master and not kubeconfig:
        cfg.host = _server_url(master, cfg)
        return cfg
    try:
        if kubeconfig:
            loaded, base = _read_kubeconfig(kubeconfig)
            loader = KubeConfigLoader(config_dict=loaded, config_base_path=base)
            await loader.load_and_set(cfg)
        else:
            # Re-reads the (rotating, bound) service account token every minute.
            load_incluster_config(client_configuration=cfg, try_refresh_token=True)  # type: ignore[no-untyped-call]
    except ConfigException as exc:
        where = f"kubeconfig {kubeconfig!r}" if kubeconfig else "in-cluster config (no --kubeconfig given)"
        raise ClientConfigError(f"{where}: {exc}") from exc
    if master:
        cfg.host = _server_url(master, cfg)
    return cfg


def _server_url(master: str, cfg: Configuration) -> str:
    """client-go's ``DefaultServerURL``: a host without a scheme is https when TLS is configured
    (a CA, a client certificate or ``insecure-skip-tls-verify``), else http."""
    if "://" in master:
        return master.rstrip("/")
    tls = bool(cfg.ssl_ca_cert or cfg.cert_file or not cfg.verify_ssl)
    return f"{'https' if tls else 'http'}://{master.rstrip('/')}"


_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def _no_env_lookups(api: ApiClient) -> None:
    """Stop aiohttp from looking up proxies and ~/.netrc on every request when there is no proxy.

    kubernetes-asyncio builds its session with ``trust_env=True``; aiohttp then makes two
    thread-pool round trips per request (proxy from the environment, ~/.netrc), about a fifth
    of the scheduler's busy time in the end-to-end benchmark. With no proxy variable set there
    is nothing for them to find. aiohttp has no public setter, hence the attribute.
    """
    if any(os.environ.get(v) for v in _PROXY_VARIABLES):
        log.info("proxy settings found in the environment: requests will honour them")
        return
    session = getattr(getattr(api, "rest_client", None), "pool_manager", None)
    if session is not None and hasattr(session, "_trust_env"):
        session._trust_env = False


def new_client(
    cfg: Configuration, *, qps: float, burst: int, metrics: RestClientMetrics | None = None
) -> KubeClient:
    """A client over ``cfg``; must be called inside a running loop (ApiClient opens a session)."""
    api = ApiClient(configuration=cfg)
    api.user_agent = USER_AGENT
    _no_env_lookups(api)
    limiter = TokenBucket(qps, burst) if qps > 0 else None
    return KubeClient(api, limiter=limiter, metrics=metrics)


async def build_client(
    kubeconfig: str | None,
    *,
    qps: float,
    burst: int,
    metrics: RestClientMetrics | None = None,
    master: str | None = None,
) -> KubeClient:
    """``--kubeconfig``, else ``clientConnection.kubeconfig``, else in-cluster: the caller picks the
    path; ``master`` (``--master``) overrides its server."""
    return new_client(await load_configuration(kubeconfig, master), qps=qps, burst=burst, metrics=metrics)
