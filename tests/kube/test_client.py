"""The API client: status checks whatever kubernetes-asyncio does, throttling, metrics, config loading."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kubernetes_asyncio.client import Configuration

from koordsched.backends.kube.client import (
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
