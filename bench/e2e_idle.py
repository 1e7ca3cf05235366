"""What a running but idle ``koordsched run`` costs the API server and etcd, per second.

``bench/e2e.py`` charges the API server's and etcd's CPU between the first and the last write to
the pods bound; any cost per second of run time (the scheduler's watches, its bookmarks, the API
server's own housekeeping) therefore weighs more on a slower run. This measures that part apart:
etcd + kube-apiserver 1.20.2 with N nodes and M pending pods that belong to another scheduler
(so nothing is bound), the API server's and etcd's CPU over ``--window`` seconds before
koordsched starts, then again (after ``--warmup`` seconds) while it runs with the bundled
profile, its watches open and nothing to do.

    .venv/bin/python bench/e2e_idle.py --nodes 1000 --pods 5000 --window 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.e2e import NAMESPACE, Api, node_body, pod_body, scheduler_argv, stop_scheduler, write_config  # noqa: E402
from bench.e2e_measure import proc_cpu  # noqa: E402
from tests.e2e.apiserver import KubeEnv, free_ports  # noqa: E402

OTHER_SCHEDULER = "someone-else"


async def window(pids: dict[str, int], seconds: float) -> dict[str, float]:
    """CPU cores (CPU seconds per second) each pid used over ``seconds``."""
    before = {k: proc_cpu(p) for k, p in pids.items()}
    t0 = time.monotonic()
    await asyncio.sleep(seconds)
    wall = time.monotonic() - t0
    return {k: round((proc_cpu(p) - before[k]) / wall, 4) for k, p in pids.items()}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    env = KubeEnv(etcd_on_tmpfs=True, verbosity=0)
    env.start()
    api = Api(env, 64)
    sched: subprocess.Popen[bytes] | None = None
    try:
        assert env.workdir is not None and env._apiserver is not None and env._etcd is not None
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        await api.post("/api/v1/namespaces", ns)
        await api.create_all("/api/v1/nodes", [node_body(f"node-{i}") for i in range(args.nodes)])
        pods = []
        for i in range(args.pods):
            body = pod_body(f"pod-{i}")
            body["spec"]["schedulerName"] = OTHER_SCHEDULER
            pods.append(body)
        await api.create_all(f"/api/v1/namespaces/{NAMESPACE}/pods", pods)
        pids = {"apiserver": env._apiserver.popen.pid, "etcd": env._etcd.popen.pid}
        await asyncio.sleep(args.warmup)
        result: dict[str, Any] = {"nodes": args.nodes, "pods": args.pods, "window_s": args.window}
        result["without_scheduler"] = await window(pids, args.window)
        (port,) = free_ports(1)
        config = write_config("koordsched", env.workdir, env, args, port)
        child_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        log_path = Path(args.log)
        log = open(log_path, "wb")  # noqa: ASYNC230, SIM115 - before the measured part; closed below
        sched = subprocess.Popen(  # noqa: ASYNC220 - fork/exec, nothing to await
            scheduler_argv("koordsched", config, env, port, args, None),
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        await asyncio.sleep(args.warmup)  # start-up, lists and cache sync done
        if sched.poll() is not None:
            raise RuntimeError(f"koordsched exited with {sched.returncode}; see {log_path}")
        result["with_idle_koordsched"] = await window({**pids, "scheduler": sched.pid}, args.window)
        bound = json.loads(await api.get_bytes(f"/api/v1/namespaces/{NAMESPACE}/pods"))["items"]
        assert not any(p["spec"].get("nodeName") for p in bound), "koordsched bound another scheduler's pod"
        return result
    finally:
        if sched is not None:
            stop_scheduler(sched)
            log.close()
        await api.close()
        env.stop()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--pods", type=int, default=5000)
    p.add_argument("--window", type=float, default=10.0, help="seconds measured each way (default 10)")
    p.add_argument("--warmup", type=float, default=10.0, help="seconds let settle before each (default 10)")
    p.add_argument("--log", default="/tmp/koordsched-e2e-idle.log", help="koordsched's log")
    args = p.parse_args()
    # write_config and scheduler_argv read these, as bench/e2e.py's options.
    args.qps, args.burst, args.percentage, args.baseline_tree = 5000, 5000, 0, None
    print(json.dumps(asyncio.run(run(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
