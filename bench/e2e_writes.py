"""koordsched's write path alone against a real kube-apiserver: a bind and its Scheduled event per pod.

Starts etcd + kube-apiserver 1.20.2 (``tests/e2e/apiserver.py``), creates nodes and pending pods,
then binds them in rounds that alternate two writers with the same concurrency:

- ``raw``: the least a Python client can do: aiohttp, one POST ``pods/binding`` and one POST
  events.k8s.io/v1 ``Scheduled`` event per pod, bodies as kube-scheduler's;
- ``port``: koordsched's ``KubePort.bind`` then ``KubePort.scheduled`` (the event recorder and its
  background writer), through ``KubeClient`` built from a kubeconfig as ``koordsched run`` does.

For each round it reports this process's CPU per pod (the client side of the writes) and the
API server's, so the write path's cost is measured without the scheduling cycle or the watches,
and ``port / raw`` is a ratio taken side by side in one run. ``--tree`` imports koordsched from
another checkout (e.g. the commit before a change) for a before/after in one process per tree.

    .venv/bin/python bench/e2e_writes.py --pods 1500 --rounds 2
    .venv/bin/python bench/e2e_writes.py --tree /tmp/before --pods 1500 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]


def _paths(tree: str | None) -> None:
    # This checkout's bench helpers and tests/e2e first, then the tree under test ahead of it, for
    # koordsched alone (nothing imported here before that imports koordsched).
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    import bench.e2e  # noqa: F401  (and bench.e2e_measure with it)
    import tests.e2e.apiserver  # noqa: F401

    assert "koordsched" not in sys.modules or not tree
    if tree:
        sys.path.insert(0, tree)


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    import aiohttp
    import msgspec

    from bench.e2e import NAMESPACE, Api, node_body, pod_body
    from bench.e2e_measure import proc_cpu
    from bench.e2e_write_forms import scheduled_event
    from koordsched.api.core import Pod
    from koordsched.backends.kube.client import build_client
    from koordsched.backends.kube.port import KubePort
    from koordsched.backends.kube.wire import ObjectList
    from koordsched.framework.types import BindingPlan
    from tests.e2e.apiserver import KubeEnv

    n, nodes, width = args.pods, args.nodes, args.concurrency
    kinds = ["raw", "port"] * args.rounds
    env = KubeEnv(etcd_on_tmpfs=True, verbosity=0)
    env.start()
    api = Api(env, 32)
    results: list[dict[str, Any]] = []
    try:
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        await api.post("/api/v1/namespaces", ns)
        await api.create_all("/api/v1/nodes", [node_body(f"node-{i}") for i in range(nodes)])
        total = n * len(kinds)
        await api.create_all(
            f"/api/v1/namespaces/{NAMESPACE}/pods", [pod_body(f"pod-{i}") for i in range(total)]
        )
        listed = await api.get_bytes(f"/api/v1/namespaces/{NAMESPACE}/pods")
        pods = {p.metadata.name: p for p in msgspec.json.decode(listed, type=ObjectList[Pod]).items or ()}
        await asyncio.sleep(2.0)
        assert env._apiserver is not None
        apiserver = env._apiserver.popen.pid
        ctx = ssl.create_default_context(cafile=str(env.ca_file))

        async def raw(names: list[str]) -> None:
            headers = {"Authorization": f"Bearer {env.admin_token}", "Content-Type": "application/json"}
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=ctx, limit=width), headers=headers
            )
            it = iter(names)

            async def worker() -> None:
                for name in it:
                    p, node = pods[name], f"node-{int(name[4:]) % nodes}"
                    binding = {
                        "apiVersion": "v1",
                        "kind": "Binding",
                        "metadata": {"name": name, "namespace": NAMESPACE, "uid": p.metadata.uid},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
                    }
                    url = f"{env.url}/api/v1/namespaces/{NAMESPACE}/pods/{name}/binding"
                    async with session.post(url, data=json.dumps(binding)) as r:
                        await r.read()
                        assert r.status == 201, r.status
                    event = scheduled_event(name, node)[0]
                    url = f"{env.url}/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events"
                    async with session.post(url, data=json.dumps(event)) as r:
                        await r.read()
                        assert r.status == 201, r.status

            await asyncio.gather(*(worker() for _ in range(width)))
            await session.close()

        async def port(names: list[str]) -> None:
            client = await build_client(str(env.kubeconfig_path), qps=5000, burst=5000)
            kp = KubePort(client, events_client=client.with_limiter(5000, 5000), hostname="bench")
            it = iter(names)

            async def worker() -> None:
                for name in it:
                    node = f"node-{int(name[4:]) % nodes}"
                    await kp.bind(pods[name], node, BindingPlan())
                    kp.scheduled(pods[name], node)

            await asyncio.gather(*(worker() for _ in range(width)))
            await kp.flush()  # every event written: the round's cost includes them
            await kp.close()
            await client.close()

        for i, kind in enumerate(kinds):
            names = [f"pod-{j}" for j in range(i * n, (i + 1) * n)]
            cpu0, api0, t0 = time.process_time(), proc_cpu(apiserver), time.monotonic()
            await (raw if kind == "raw" else port)(names)
            cpu1, api1, t1 = time.process_time(), proc_cpu(apiserver), time.monotonic()
            r = {
                "writer": kind,
                "pods": n,
                "client_cpu_ms_per_pod": round(1000 * (cpu1 - cpu0) / n, 3),
                "apiserver_cpu_ms_per_pod": round(1000 * (api1 - api0) / n, 3),
                "pods_per_s": round(n / (t1 - t0), 1),
            }
            print(json.dumps(r), flush=True)
            results.append(r)
        events = await api.get_bytes(f"/api/v1/namespaces/{NAMESPACE}/events")
        written = sum(1 for e in json.loads(events)["items"] if e.get("reason") == "Scheduled")
        assert written == total, f"{written} Scheduled events for {total} pods"
    finally:
        await api.close()
        env.stop()
    return results


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=1500, help="pods per round (default 1500)")
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--rounds", type=int, default=2, help="raw/port pairs (default 2)")
    p.add_argument("--concurrency", type=int, default=64, help="pods in flight (default 64)")
    p.add_argument("--tree", help="import koordsched from this checkout instead")
    args = p.parse_args()
    _paths(args.tree)
    results = asyncio.run(run(args))
    med: dict[str, list[float]] = {}
    for r in results:
        med.setdefault(r["writer"], []).append(r["client_cpu_ms_per_pod"])
    raw, port = (statistics.median(med[k]) for k in ("raw", "port"))
    print(f"client CPU ms/pod: raw {raw:.3f}, port {port:.3f}, port / raw {port / raw:.2f}")
    print(f"koordsched from {os.path.dirname(os.path.dirname(__import__('koordsched').__file__))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
