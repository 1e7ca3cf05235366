"""Fixtures for the kube backend: a fake API server on 127.0.0.1 and a client pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio.client import Configuration

from koordsched.backends.kube.client import KubeClient, new_client
from koordsched.observability.metrics import SchedulerMetrics
from tests.kube.fake_apiserver import FakeApiServer


@pytest.fixture
async def api() -> AsyncIterator[FakeApiServer]:
    server = FakeApiServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
def metrics() -> SchedulerMetrics:
    return SchedulerMetrics()


@pytest.fixture
async def client(api: FakeApiServer, metrics: SchedulerMetrics) -> AsyncIterator[KubeClient]:
    c = new_client(Configuration(host=api.url), qps=1000, burst=1000, metrics=metrics)
    try:
        yield c
    finally:
        await c.close()
