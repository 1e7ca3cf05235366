"""An unreachable API server: one warning for all informers, not one per informer per retry;
a failing lease: the first failure, a back-off note, then "recovered" (fake clocks, no sleeps)."""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio.client import Configuration

from koordsched.backends.kube.backoff import Backoff
from koordsched.backends.kube.client import KubeClient, new_client
from koordsched.backends.kube.kinds import NODES, PODS, PRIORITY_CLASSES
from koordsched.backends.kube.leaderelection import LeaderElector
from koordsched.backends.kube.reflector import Reflector, connection_errors
from koordsched.observability.log_ratelimit import RepeatedErrors
from koordsched.observability.metrics import SchedulerMetrics
from tests.kube.fake_apiserver import FakeApiServer
from tests.kube.helpers import eventually

NS, NAME = "koordinator-system", "koord-scheduler"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{NAME}"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Ignore:
    def on_add(self, obj: Any) -> None: ...
    def on_update(self, old: Any, new: Any) -> None: ...
    def on_delete(self, obj: Any) -> None: ...


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: nothing listens there


@pytest.fixture
async def dead_client(metrics: SchedulerMetrics) -> AsyncIterator[KubeClient]:
    c = new_client(
        Configuration(host=f"http://127.0.0.1:{free_port()}"), qps=1000, burst=1000, metrics=metrics
    )
    try:
        yield c
    finally:
        await c.close()


def warnings(caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelno == logging.WARNING]


async def test_an_unreachable_server_is_one_warning_for_every_informer(
    dead_client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    logger = "koordsched.backends.kube.reflector"
    caplog.set_level(logging.WARNING, logger=logger)
    clock = Clock()
    errors = RepeatedErrors(logging.getLogger(logger), clock=clock)
    fast = Backoff(initial=0.001, cap=0.002, jitter=0.0)
    reflectors = [
        Reflector(dead_client, kind, Ignore(), backoff=fast, errors=errors)
        for kind in (PODS, NODES, PRIORITY_CLASSES)
    ]
    source = f"API server {dead_client.host}"
    try:
        for r in reflectors:
            r.start()
        await eventually(lambda: errors._outages[source].failures >= 30 if errors.failing(source) else False)
        (first,) = warnings(caplog, logger)
        assert ": list failed: ClientConnectorError: Cannot connect to host" in first
        caplog.clear()
        failures = errors._outages[source].failures
        clock.now += 10.0
        await eventually(lambda: bool(warnings(caplog, logger)))
        (note,) = warnings(caplog, logger)
        assert "list failed: ClientConnectorError" in note
        # Every failure since the first line (at least those before the clock moved), in one note.
        m = re.search(r" \(repeated (\d+) times in the last 10s; next report in 20s\)$", note)
        assert m and int(m[1]) >= failures - 1, note
    finally:
        for r in reflectors:
            await r.stop()


async def test_reflectors_of_one_client_share_its_limiter(
    dead_client: KubeClient, client: KubeClient
) -> None:
    a = Reflector(dead_client, PODS, Ignore())
    b = Reflector(dead_client, NODES, Ignore())
    c = Reflector(client, NODES, Ignore())
    assert a.errors is b.errors is connection_errors(dead_client)
    assert c.errors is not a.errors


async def test_lease_failures_back_off_then_recover(
    api: FakeApiServer, client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    logger = "koordsched.backends.kube.leaderelection"
    caplog.set_level(logging.WARNING, logger=logger)
    clock = Clock()
    elector = LeaderElector(client, namespace=NS, name=NAME, identity="me", clock=clock)
    api.fail("GET", LEASE_PATH, 500, times=6)
    for _ in range(5):
        assert not await elector.try_acquire_or_renew()
    (first,) = warnings(caplog, logger)
    assert first.startswith(f"lease {NS}/{NAME}: GET {LEASE_PATH}: 500")
    caplog.clear()
    clock.now += 11.0
    assert not await elector.try_acquire_or_renew()
    (note,) = warnings(caplog, logger)
    assert note.startswith(first) and note.endswith(" (repeated 5 times in the last 11s; next report in 20s)")
    caplog.clear()
    assert await elector.try_acquire_or_renew()  # the server answers again: we take the free lease
    assert warnings(caplog, logger) == [f"lease {NS}/{NAME}: recovered after 6 failed attempts in 11s"]
