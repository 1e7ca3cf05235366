"""`koordsched run` with and without the loop's collector settings, against a real API server.

The simulator (and so bench/decision.py) runs its loop with the loaded objects frozen and the
collector's thresholds raised (koordsched/scheduler/collector.py); `koordsched run` does the same
once its caches are synced. This measures what that buys in `run`: for each round it starts a
fresh etcd + kube-apiserver 1.20.2 (tests/e2e/apiserver.py), creates N nodes (32 CPU, 256Gi,
110 pods) and M pending pods (100m, 500Mi), starts `koordsched run` with the bundled profile in a
subprocess, and waits until every pod is bound. Two variants alternate:

- ``loop``: `run` as shipped (freeze after the sync, thresholds 50,000/20/100);
- ``default``: the same code with the collector left at Python's settings (the loop's
  ``loop_collector`` replaced by one that changes nothing).

In the scheduler process a ``gc.callbacks`` hook times every collection; the bench reads the
scheduler's CPU time from /proc between the first and the last bind a pod watch sees, and only
the collections made in that window count.

    .venv/bin/python bench/run_collector.py --nodes 1000 --pods 5000 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.apiserver import ADMIN_USER, KubeEnv, free_ports  # noqa: E402

NAMESPACE = "bench"
#: Runs in the scheduler process: times collections, optionally keeps Python's collector settings,
#: then runs the CLI; the totals are written at exit.
WRAPPER = r"""
import atexit, contextlib, gc, json, sys, time
variant, out_path = sys.argv[1], sys.argv[2]
log = []  # (wall time at the end, seconds, generation) per collection
started = [0.0]
def timer(phase, info):
    if phase == "start":
        started[0] = time.perf_counter()
        return
    log.append((time.time(), time.perf_counter() - started[0], info.get("generation")))
gc.callbacks.append(timer)
if variant == "default":
    import koordsched.backends.kube.runner as runner
    from koordsched.scheduler.collector import CollectorStats
    @contextlib.contextmanager
    def unchanged(*, full_collection=True):
        yield CollectorStats()
    runner.loop_collector = unchanged
def dump():
    with open(out_path, "w") as f:
        json.dump(log, f)
atexit.register(dump)
from koordsched.cli import main
sys.argv = ["koordsched", *sys.argv[3:]]
sys.exit(main())
"""


def _node(name: str) -> dict[str, Any]:
    alloc = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": alloc,
            "capacity": alloc,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}
            ],
        },
    }


class Api:
    def __init__(self, env: KubeEnv) -> None:
        self.url = env.url
        self.headers = {"Authorization": f"Bearer {env.token(ADMIN_USER)}"}
        self.ssl = ssl.create_default_context(cafile=str(env.ca_file))
        self.session = aiohttp.ClientSession(headers=self.headers)

    async def post(self, path: str, body: dict[str, Any]) -> None:
        async with self.session.post(self.url + path, json=body, ssl=self.ssl) as resp:
            if resp.status >= 300:
                raise RuntimeError(f"POST {path}: {resp.status} {await resp.text()}")

    async def get(self, path: str) -> Any:
        async with self.session.get(self.url + path, ssl=self.ssl) as resp:
            resp.raise_for_status()
            return await resp.json()

    async def create_all(self, path: str, bodies: list[dict[str, Any]], concurrency: int = 64) -> None:
        sem = asyncio.Semaphore(concurrency)

        async def one(body: dict[str, Any]) -> None:
            async with sem:
                await self.post(path, body)

        await asyncio.gather(*(one(b) for b in bodies))

    async def watch_binds(self, resource_version: str, pods: int, bound: dict[str, float]) -> None:
        """Note each pod's first bind (wall time) from a watch, until ``pods`` are bound."""
        path = f"/api/v1/namespaces/{NAMESPACE}/pods?watch=1&resourceVersion={resource_version}"
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        async with self.session.get(self.url + path, ssl=self.ssl, timeout=timeout) as resp:
            resp.raise_for_status()
            async for line in resp.content:
                event = json.loads(line)
                obj = event.get("object", {})
                name = obj.get("metadata", {}).get("name")
                if obj.get("spec", {}).get("nodeName") and name not in bound:
                    bound[name] = time.time()
                    if len(bound) >= pods:
                        return


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one_round(variant: str, nodes: int, pods: int, workdir: Path) -> dict[str, Any]:
    env = KubeEnv(etcd_on_tmpfs=True, verbosity=0)
    env.start()
    api = Api(env)
    proc: subprocess.Popen[bytes] | None = None
    try:
        await api.post(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        await api.create_all("/api/v1/nodes", [_node(f"node-{i}") for i in range(nodes)])
        await api.create_all(f"/api/v1/namespaces/{NAMESPACE}/pods", [_pod(f"pod-{i}") for i in range(pods)])
        rv = (await api.get(f"/api/v1/namespaces/{NAMESPACE}/pods?limit=1"))["metadata"]["resourceVersion"]
        cfg = yaml.safe_load((ROOT / "config" / "koord-scheduler.yaml").read_text())
        cfg["clientConnection"] = {"kubeconfig": str(env.kubeconfig_path), "qps": 5000, "burst": 5000}
        cfg["leaderElection"] = {"leaderElect": False}
        config = workdir / f"{variant}.yaml"
        config.write_text(yaml.safe_dump(cfg))
        totals = workdir / f"{variant}.json"
        (port,) = free_ports(1)
        argv = [sys.executable, "-c", WRAPPER, variant, str(totals), "run", "--config", str(config)]
        argv += [
            "--kubeconfig",
            str(env.kubeconfig_path),
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            str(port),
        ]
        log = open(workdir / f"{variant}.log", "wb")  # noqa: SIM115, ASYNC230 - before anything is timed
        proc = subprocess.Popen(  # noqa: ASYNC220 - fork/exec, nothing to await
            argv, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONPATH=str(ROOT))
        )
        bound: dict[str, float] = {}
        watcher = asyncio.ensure_future(api.watch_binds(rv, pods, bound))
        cpu_first: float | None = None
        deadline = time.monotonic() + 900
        while not watcher.done():
            if cpu_first is None and bound:
                cpu_first = _cpu_seconds(proc.pid)
            if proc.poll() is not None or time.monotonic() > deadline:
                watcher.cancel()
                raise RuntimeError(f"{variant}: {len(bound)}/{pods} bound; scheduler status {proc.poll()}")
            await asyncio.wait({watcher}, timeout=0.05)
        watcher.result()
        assert cpu_first is not None
        cpu = _cpu_seconds(proc.pid) - cpu_first
        first, last = min(bound.values()), max(bound.values())
        wall = last - first
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        # Collections in the bind window only (start-up, the sync and the shutdown left out).
        window = [(t, secs, gen) for t, secs, gen in json.loads(totals.read_text()) if first <= t <= last]
        return {
            "variant": variant,
            "nodes": nodes,
            "pods": pods,
            "bind_window_s": round(wall, 2),
            "sched_cpu_s": round(cpu, 3),
            "sched_cpu_ms_per_pod": round(1e3 * cpu / pods, 3),
            "gc_seconds": round(sum(secs for _, secs, _ in window), 3),
            "gc_collections": len(window),
            "gc_full_collections": sum(1 for *_, gen in window if gen == 2),
        }
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        await api.session.close()
        env.stop()


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="koordsched-gc-") as tmp:
        rows = []
        for r in range(args.rounds):
            order = ("default", "loop") if r % 2 == 0 else ("loop", "default")
            for variant in order:
                rows.append(await one_round(variant, args.nodes, args.pods, Path(tmp)))
                print(json.dumps(rows[-1]), flush=True)
        for variant in ("default", "loop"):
            mine = [x for x in rows if x["variant"] == variant]
            print(
                f"{variant}: sched CPU ms/pod {[x['sched_cpu_ms_per_pod'] for x in mine]}, "
                f"gc s {[x['gc_seconds'] for x in mine]}, "
                f"full collections {[x['gc_full_collections'] for x in mine]}"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument(
        "--rounds", type=int, default=2, help="rounds of both variants, alternating which goes first"
    )
    asyncio.run(main_async(ap.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
