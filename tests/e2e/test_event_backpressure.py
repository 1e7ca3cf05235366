"""Scheduled events are never dropped on a real API server: when the events writer falls behind,
binds wait for it (KubePort.bind waits while the events queue is half full) instead of events
being lost to a full queue."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest

from koordsched.api.core import Pod
from koordsched.backends.kube.client import build_client
from koordsched.backends.kube.port import KubePort
from koordsched.framework.types import BindingPlan
from tests.e2e.helpers import Cluster

pytestmark = pytest.mark.e2e

PODS = 40


async def test_a_slow_events_writer_holds_binds_back_and_loses_no_event(
    cluster: Cluster, scheduler_kubeconfig: Path
) -> None:
    node = await cluster.add_node("n1", cpu="64", memory="64Gi")
    for i in range(PODS):
        await cluster.add_pod(f"p{i}", cpu="10m", memory="10Mi", scheduler="nobody")  # no scheduler's
    pods = [msgspec.convert(p, Pod) for p in (await cluster.pods()).values()]
    client = await build_client(str(scheduler_kubeconfig), qps=1000, burst=1000)
    # Events at 20 a second against binds at up to 1,000: the writer's 32 slots fill, then the
    # queue (4, half of it the soft limit) and the binds must wait for it.
    port = KubePort(client, events_client=client.with_limiter(20, 1), queue_size=4, hostname="e2e")
    try:

        async def bind(pod: Pod) -> None:
            await port.bind(pod, node, BindingPlan())
            port.scheduled(pod, node)

        await asyncio.wait_for(asyncio.gather(*(bind(p) for p in pods)), 60)
        await asyncio.wait_for(port.flush(), 60)
        writer = port.events.writer
        assert writer.dropped == 0 and writer.failed == 0
        assert writer.waits >= 1  # the binds did wait for the events writer
    finally:
        await port.close()
        await client.close()
    bound = await cluster.pods()
    assert {p["spec"].get("nodeName") for p in bound.values()} == {node}
    scheduled = [e for e in await cluster.events() if e.get("reason") == "Scheduled"]
    assert len(scheduled) == PODS
    assert {e["note"] for e in scheduled} == {
        f"Successfully assigned {cluster.ns}/p{i} to {node}" for i in range(PODS)
    }
