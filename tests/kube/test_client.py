"""The API client: status checks whatever kubernetes-asyncio does, throttling, metrics, config loading."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from kubernetes_asyncio.client import Configuration

from koordsched.backends.kube.client import (
    STRATEGIC_MERGE_PATCH,
    ApiError,
    ClientConfigError,
    KubeClient,
    TokenBucket,
    load_configuration,
    new_client,
)
from koordsched.observability.metrics import SchedulerMetrics
from tests.kube.fake_apiserver import NODES, FakeApiServer, node_json


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_token_bucket_allows_burst_then_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    # The 4th and 5th wait one and two token periods: reservations queue in arrival order.
    assert bucket.reserve() == pytest.approx(0.1)
    assert bucket.reserve() == pytest.approx(0.2)
    clock.t = 1.0  # a full second refills, capped at burst
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]


async def test_every_request_is_throttled(api: FakeApiServer) -> None:
    c = new_client(Configuration(host=api.url), qps=20, burst=1)
    try:
        t0 = time.monotonic()
        for _ in range(4):
            await c.request_bytes("GET", NODES)
        # 1 from the burst, then 3 more at 20/s.
        assert time.monotonic() - t0 >= 0.14
    finally:
        await c.close()


async def test_non_2xx_raises_with_the_status_message(api: FakeApiServer, client: KubeClient) -> None:
    with pytest.raises(ApiError) as info:
        await client.request_bytes("GET", "/api/v1/namespaces/default/pods/missing")
    assert info.value.status == 404
    assert info.value.reason == "NotFound"
    assert info.value.message == 'pods "missing" not found'


async def test_requests_are_timed_into_rest_client_metrics(
    api: FakeApiServer, client: KubeClient, metrics: SchedulerMetrics
) -> None:
    api.add(NODES, node_json("n1"))
    await client.request_bytes("GET", NODES)
    with pytest.raises(ApiError):
        await client.request_bytes("GET", "/api/v1/namespaces/default/pods/missing")
    host = f"127.0.0.1:{api.port}"
    reg = metrics.registry
    assert (
        reg.get_sample_value("rest_client_requests_total", {"code": "200", "method": "GET", "host": host})
        == 1
    )
    assert (
        reg.get_sample_value("rest_client_requests_total", {"code": "404", "method": "GET", "host": host})
        == 1
    )
    assert (
        reg.get_sample_value("rest_client_request_duration_seconds_count", {"verb": "GET", "host": host}) == 2
    )


async def test_transport_errors_are_counted_as_error(metrics: SchedulerMetrics) -> None:
    c = new_client(Configuration(host="http://127.0.0.1:1"), qps=100, burst=10, metrics=metrics)
    try:
        with pytest.raises(OSError):
            await c.request_bytes("GET", NODES)
    finally:
        await c.close()
    assert (
        metrics.registry.get_sample_value(
            "rest_client_requests_total", {"code": "<error>", "method": "GET", "host": "127.0.0.1:1"}
        )
        == 1
    )


async def test_kubeconfig_is_loaded_into_a_private_configuration(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:6443"}}]
users: [{name: u, user: {token: secret-token}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"""
    )
    cfg = await load_configuration(str(kubeconfig))
    assert cfg.host == "http://127.0.0.1:6443"
    assert cfg.api_key["BearerToken"] == "Bearer secret-token"
    assert Configuration.get_default().host != cfg.host  # the library's global default is untouched


async def test_missing_kubeconfig_and_no_cluster_are_config_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ClientConfigError, match="no such file"):
        await load_configuration(str(tmp_path / "nope"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ClientConfigError, match="in-cluster"):
        await load_configuration(None)


async def test_with_limiter_shares_the_pool_but_not_the_budget(
    api: FakeApiServer, client: KubeClient
) -> None:
    events = client.with_limiter(5, 1)
    assert events.api is client.api and events.limiter is not client.limiter
    await events.close()  # a view: the shared pool stays open
    await client.request_bytes("GET", NODES)


async def test_kubeconfig_path_with_a_colon_and_bad_files(tmp_path: Path) -> None:
    from koordsched.backends.kube.client import ClientConfigError, load_configuration

    folder = tmp_path / "ctx:e2e"
    folder.mkdir()
    (folder / "ca.crt").write_text("not really a certificate\n")
    kubeconfig = folder / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443', certificate-authority: ca.crt}}]\n"
        "users: [{name: u, user: {token: abc}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    cfg = await load_configuration(str(kubeconfig))
    assert cfg.host == "https://127.0.0.1:6443"
    assert cfg.ssl_ca_cert == str(folder / "ca.crt")  # relative to the kubeconfig's folder
    (folder / "broken").write_text("clusters: [unclosed\n")
    with pytest.raises(ClientConfigError, match="broken"):
        await load_configuration(str(folder / "broken"))
    with pytest.raises(ClientConfigError, match="no such file"):
        await load_configuration(str(folder / "missing"))


async def test_no_per_request_env_lookups_without_a_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    from koordsched.backends.kube.client import new_client

    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    cfg = Configuration()
    cfg.host = "https://127.0.0.1:1"
    client = new_client(cfg, qps=0, burst=0)
    try:
        assert client.api.rest_client.pool_manager.trust_env is False
    finally:
        await client.close()
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    client = new_client(cfg, qps=0, burst=0)
    try:
        assert client.api.rest_client.pool_manager.trust_env is True
    finally:
        await client.close()


class _Recorder:
    """A real HTTP server that records each request's method, path, query, headers and body."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, dict[str, str], bytes]] = []
        self.delay = 0.0

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.seen.append(
            (request.method, request.path, request.rel_url.raw_query_string, dict(request.headers), body)
        )
        if self.delay:
            await asyncio.sleep(self.delay)
        return web.json_response({"kind": "Status", "status": "Success", "code": 201}, status=201)


@pytest.fixture
async def recorder() -> AsyncIterator[tuple[_Recorder, str]]:
    rec = _Recorder()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", rec.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield rec, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_requests_carry_auth_agent_query_and_a_json_body(recorder: tuple[_Recorder, str]) -> None:
    rec, url = recorder
    cfg = Configuration(host=url)
    cfg.api_key = {"BearerToken": "first"}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    tokens = iter(["second", "third"])

    def rotate(c: Configuration) -> None:  # the library's refresh hook: a rotated token is used at once
        c.api_key["BearerToken"] = next(tokens)

    c = new_client(cfg, qps=0, burst=0)
    try:
        body = {"a": [1, "x", None], "b": {"c": True}}
        out = await c.request_bytes(
            "POST",
            "/api/v1/namespaces/n/pods/p/binding",
            query=[("fieldManager", "koord scheduler"), ("dryRun", "All")],
            body=body,
            request_timeout=5.0,
        )
        assert json.loads(out)["code"] == 201
        cfg.refresh_api_key_hook = rotate
        await c.request_bytes("PATCH", "/x", body={"k": "v"}, content_type=STRATEGIC_MERGE_PATCH)
        await c.request_bytes("GET", "/y")
    finally:
        await c.close()
    (m1, p1, q1, h1, b1), (m2, _, _, h2, _), (m3, _, _, h3, b3) = rec.seen
    assert (m1, p1, q1) == (
        "POST",
        "/api/v1/namespaces/n/pods/p/binding",
        "fieldManager=koord+scheduler&dryRun=All",
    )
    assert json.loads(b1) == body
    assert h1["Authorization"] == "Bearer first"
    assert h1["Content-Type"] == "application/json" and h1["Accept"] == "application/json"
    assert h1["User-Agent"].startswith("koordsched/")
    assert (m2, h2["Content-Type"], h2["Authorization"]) == ("PATCH", STRATEGIC_MERGE_PATCH, "Bearer second")
    assert (m3, h3["Authorization"], b3) == ("GET", "Bearer third", b"")


async def test_a_request_timeout_bounds_the_whole_request(recorder: tuple[_Recorder, str]) -> None:
    rec, url = recorder
    rec.delay = 2.0
    c = new_client(Configuration(host=url), qps=0, burst=0)
    try:
        t0 = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await c.request_bytes("POST", "/slow", body={}, request_timeout=0.2)
        assert time.monotonic() - t0 < 1.5
        rec.delay = 0.3
        await c.request_bytes("GET", "/no-limit")  # None: no limit at all, as kubernetes-asyncio's
    finally:
        await c.close()
