"""bench/e2e_binder.py, the no-decision binder that measures the API server's ceiling, on a real
kube-apiserver: it binds every pending pod of its schedulerName exactly once, round-robin over the
nodes, listed and watched alike; with ``--events`` each bind gets kube-scheduler's Scheduled event.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.apiserver import KubeEnv, bin_dir_or_skip
from tests.e2e.helpers import Api, node, pod, wait_for

pytestmark = pytest.mark.e2e

BINDER = Path(__file__).resolve().parents[2] / "bench" / "e2e_binder.py"
NS = "binder"


@pytest.fixture(scope="module")
def own_env() -> Iterator[KubeEnv]:
    # Its own control plane: the binder binds every pending pod of its schedulerName to any node,
    # which would disturb the other tests' nodes in the shared one.
    with KubeEnv(bin_dir=bin_dir_or_skip(), etcd_on_tmpfs=True) as env:
        yield env


@pytest.fixture
async def api(own_env: KubeEnv) -> AsyncIterator[Api]:
    async with Api(own_env) as a:
        yield a


async def _pods(api: Api) -> list[dict[str, Any]]:
    return list((await api.get(f"/api/v1/namespaces/{NS}/pods"))["items"])


async def test_binds_each_pending_pod_once_round_robin_with_its_event(own_env: KubeEnv, api: Api) -> None:
    await api.post("/api/v1/namespaces", {"metadata": {"name": NS}})
    for i in range(3):
        await api.post("/api/v1/nodes", node(f"n{i}"))
    for i in range(12):
        await api.post(f"/api/v1/namespaces/{NS}/pods", pod(NS, f"p{i}", cpu="10m", memory="10Mi"))
    await api.post(f"/api/v1/namespaces/{NS}/pods", pod(NS, "other", scheduler="someone-else"))

    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, str(BINDER), "--server", own_env.url, "--ca", str(own_env.ca_file)),
        *("--in-flight", "4", "--events"),
        env={**os.environ, "BINDER_TOKEN": own_env.admin_token},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:

        async def bound(want: int) -> list[dict[str, Any]] | None:
            pods = [p for p in await _pods(api) if p["spec"].get("nodeName")]
            return pods if len(pods) >= want else None

        listed = await wait_for(lambda: bound(12), what="the listed pods bound")
        # Pods created after its list come through its watch.
        for i in range(12, 15):
            await api.post(f"/api/v1/namespaces/{NS}/pods", pod(NS, f"p{i}", cpu="10m", memory="10Mi"))
        everything = await wait_for(lambda: bound(15), what="the watched pods bound")
        await asyncio.sleep(0.5)  # nothing more may come
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 0, err.decode()
    assert "15 bound, 0 failed" in err.decode()

    assert Counter(p["spec"]["nodeName"] for p in listed) == {"n0": 4, "n1": 4, "n2": 4}
    pods = {p["metadata"]["name"]: p for p in await _pods(api)}
    assert {n for n, p in pods.items() if p["spec"].get("nodeName")} == {f"p{i}" for i in range(15)}
    assert "nodeName" not in pods["other"]["spec"]  # another scheduler's pod is left alone
    assert len(everything) == 15

    events = (await api.get(f"/apis/events.k8s.io/v1/namespaces/{NS}/events"))["items"]
    scheduled = [e for e in events if e["reason"] == "Scheduled"]
    assert len(scheduled) == 15
    for e in scheduled:
        target = pods[e["regarding"]["name"]]
        assert e["regarding"]["uid"] == target["metadata"]["uid"]
        assert (e["type"], e["action"], e["reportingController"]) == ("Normal", "Binding", "koord-scheduler")
        assert (
            e["note"]
            == f"Successfully assigned {NS}/{target['metadata']['name']} to {target['spec']['nodeName']}"
        )
