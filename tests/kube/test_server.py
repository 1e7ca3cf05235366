"""The HTTP endpoints: health in apiserver's format, Prometheus text, /configz."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from koordsched.backends.kube.server import HttpServer, build_app, configz
from koordsched.config.load import default_config
from koordsched.observability.health import HANDLER_SYNC, LEADER_ELECTION, HealthChecks
from koordsched.observability.metrics import SchedulerMetrics
from koordsched.plugins.registry import in_tree_registry


@pytest.fixture
async def served() -> AsyncIterator[tuple[str, HealthChecks, SchedulerMetrics]]:
    health = HealthChecks(leader_elect=True)
    metrics = SchedulerMetrics()
    config = default_config(in_tree_registry(), "koord-scheduler")
    server = HttpServer(build_app(health, metrics, lambda: configz(config.raw)), "127.0.0.1", 0)
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.port}", health, metrics
    finally:
        await server.close()


async def get(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        return r.status, r.headers["Content-Type"], await r.text()


async def test_health_endpoints(served: tuple[str, HealthChecks, SchedulerMetrics]) -> None:
    base, health, _ = served
    assert await get(f"{base}/livez") == (200, "text/plain; charset=utf-8", "ok")
    assert (await get(f"{base}/healthz"))[::2] == (200, "ok")
    code, _, body = await get(f"{base}/readyz")
    assert code == 500 and "[-]sched-handler-sync failed: reason withheld" in body
    assert await get(f"{base}/readyz/sched-handler-sync") == (
        500,
        "text/plain; charset=utf-8",
        "internal server error: handlers are not fully synchronized\n",
    )
    health.set_ready(HANDLER_SYNC, True)
    assert (await get(f"{base}/readyz"))[::2] == (200, "ok")
    code, _, body = await get(f"{base}/readyz?verbose")
    assert code == 200 and body.endswith("[+]sched-handler-sync ok\nreadyz check passed\n")
    health.set_check(LEADER_ELECTION, lambda: "failed election to renew leadership on lease x/y")
    assert (await get(f"{base}/healthz"))[0] == 500
    code, _, body = await get(f"{base}/readyz?exclude=leaderElection")
    assert code == 200
    assert (await get(f"{base}/readyz/nope"))[0] == 404
    assert (await get(f"{base}/nothing"))[0] == 404


async def test_metrics_are_prometheus_text(served: tuple[str, HealthChecks, SchedulerMetrics]) -> None:
    base, _, metrics = served
    metrics.observe_attempt("scheduled", "koord-scheduler", 0.01)
    code, ctype, body = await get(f"{base}/metrics")
    assert code == 200
    assert ctype == "text/plain; version=0.0.4; charset=utf-8"
    assert 'scheduler_schedule_attempts_total{profile="koord-scheduler",result="scheduled"} 1.0' in body


async def test_configz_shows_the_component_config(served: tuple[str, HealthChecks, SchedulerMetrics]) -> None:
    base, _, _ = served
    async with aiohttp.ClientSession() as s, s.get(f"{base}/configz") as r:
        assert r.status == 200
        data = await r.json()
    cc = data["componentconfig"]
    assert cc["kind"] == "KubeSchedulerConfiguration"
    assert cc["profiles"][0]["schedulerName"] == "koord-scheduler"
    assert cc["leaderElection"]["leaseDuration"] == "15s"


async def test_a_taken_port_fails_to_start() -> None:
    first = HttpServer(build_app(HealthChecks(), SchedulerMetrics()), "127.0.0.1", 0)
    await first.start()
    try:
        second = HttpServer(build_app(HealthChecks(), SchedulerMetrics()), "127.0.0.1", first.port)
        with pytest.raises(OSError):
            await second.start()
    finally:
        await first.close()
