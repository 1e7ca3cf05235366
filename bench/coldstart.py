"""Cold start of ``koordsched run`` against a real kube-apiserver: when /livez and /readyz first answer 200.

Starts etcd (on tmpfs) + kube-apiserver 1.20.2 (``tests/e2e/apiserver.py``), creates N nodes, then
starts ``python -m koordsched run`` (bundled profile, leader election off) several times, each
with NUMBA_CACHE_DIR either empty (a fresh directory: every kernel compiles) or warm (the
directory the first run filled, as the image ships it). A thread polls /livez and /readyz every
10 ms from the moment the process is spawned. Per run it prints the first 200 of each, and the
phases the scheduler logs itself (``start-up:`` lines, seconds since the process started:
serving, plugins imported, kernels warm, caches synced, ready).

    .venv/bin/python bench/coldstart.py                        # 1,000 nodes, 3 runs per cache state
    .venv/bin/python bench/coldstart.py --nodes 5000 --runs 5 --cache warm

Needs ``scripts/kube-env install``. Results: bench/README.md, "Cold start".
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import re
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.e2e.apiserver import KubeEnv, free_ports  # noqa: E402
from tests.e2e.helpers import Api, node  # noqa: E402

PROFILE = REPO_ROOT / "config" / "koord-scheduler.yaml"
POLL = 0.01
_PHASE = re.compile(r"start-up: (.+) after ([\d.]+)s \(cpu ([\d.]+)s\)")


class Prober(threading.Thread):
    """Polls /livez and /readyz over HTTPS (self-signed: unverified) until both answered 200."""

    def __init__(self, port: int, t0: float, limit: float) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.t0 = t0
        self.limit = limit
        self.first: dict[str, float] = {}
        self._ctx = ssl.create_default_context()
        self._ctx.check_hostname = False
        self._ctx.verify_mode = ssl.CERT_NONE

    def _status(self, path: str) -> int | None:
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=1.0, context=self._ctx)
        try:
            conn.request("GET", path)
            return conn.getresponse().status
        except (OSError, http.client.HTTPException):
            return None
        finally:
            conn.close()

    def run(self) -> None:
        while len(self.first) < 2 and time.monotonic() - self.t0 < self.limit:
            for path in ("/livez", "/readyz"):
                if path not in self.first and self._status(path) == 200:
                    self.first[path] = time.monotonic() - self.t0
            time.sleep(POLL)


def phases(log_text: str) -> dict[str, list[float]]:
    """The scheduler's own ``start-up:`` log lines: phase -> [seconds since its process started, CPU s]."""
    out: dict[str, list[float]] = {}
    for line in log_text.splitlines():
        m = _PHASE.search(line)
        if m:
            out[m.group(1)] = [float(m.group(2)), float(m.group(3))]
    return out


def one_run(env: KubeEnv, profile: Path, cache_dir: Path, limit: float, workdir: Path) -> dict[str, Any]:
    port = free_ports(1)[0]
    log_path = workdir / f"koordsched-{port}.log"
    argv = [
        sys.executable,
        "-m",
        "koordsched",
        "--log-level",
        "info",
        "run",
        "--config",
        str(profile),
        "--kubeconfig",
        str(env.kubeconfig_path),
        "--bind-address",
        "127.0.0.1",
        "--secure-port",
        str(port),
    ]
    penv = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir), PYTHONPATH=str(REPO_ROOT))
    with open(log_path, "wb") as log:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=penv, stdout=log, stderr=subprocess.STDOUT)
        prober = Prober(port, t0, limit)
        prober.start()
        prober.join(limit + 5)
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
    text = log_path.read_text(errors="replace")
    return {
        "livez_s": prober.first.get("/livez"),
        "readyz_s": prober.first.get("/readyz"),
        "phases": phases(text),
        "exit": rc,
        "log": str(log_path),
    }


async def create_nodes(env: KubeEnv, count: int) -> None:
    async with Api(env) as api:
        sem = asyncio.Semaphore(32)

        async def one(i: int) -> None:
            async with sem:
                await api.create_node(node(f"cold-{i:05d}", cpu="32", memory="256Gi"))

        await asyncio.gather(*(one(i) for i in range(count)))


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3, help="runs per cache state")
    ap.add_argument("--limit", type=float, default=120.0, help="give up on a run after this many seconds")
    ap.add_argument("--cache", choices=("both", "empty", "warm"), default="both", help="cache states to run")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args()
    states = ("empty", "warm") if args.cache == "both" else (args.cache,)

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="coldstart-", ignore_cleanup_errors=True) as tmp:
        workdir = Path(tmp)
        cfg = yaml.safe_load(PROFILE.read_text())
        cfg.setdefault("leaderElection", {})["leaderElect"] = False
        profile = workdir / "profile.yaml"
        profile.write_text(yaml.safe_dump(cfg, sort_keys=False))
        warm = workdir / "numba-warm"
        if states == ("warm",):
            # Fill it as the image build does: import every plugin, warm the kernels up.
            warmup = "from koordsched.plugins.registry import in_tree_registry as r; r().warm_up()"
            penv = dict(os.environ, NUMBA_CACHE_DIR=str(warm), PYTHONPATH=str(REPO_ROOT))
            subprocess.run([sys.executable, "-c", warmup], env=penv, check=True)
        env = KubeEnv(etcd_on_tmpfs=True, verbosity=0).start()
        try:
            asyncio.run(create_nodes(env, args.nodes))
            for i in range(args.runs):
                # Alternate, so the machine's load drifts over both states alike. The first
                # empty run fills the warm directory.
                for state in states:
                    if state == "empty":
                        cache = workdir / f"numba-empty-{i}"
                        cache.mkdir()
                    else:
                        cache = warm
                    r = one_run(env, profile, cache, args.limit, workdir)
                    if state == "empty" and not warm.exists():
                        shutil.copytree(cache, warm)
                    r.update(cache=state, run=i, nodes=args.nodes)
                    results.append(r)
                    print(json.dumps(r), flush=True)
        finally:
            env.stop()
    if args.json_out:
        args.json_out.write_text("".join(json.dumps(r) + "\n" for r in results))
    names: list[str] = []
    for r in results:
        names.extend(n for n in r["phases"] if n not in names)
    print(f"\n{args.nodes} nodes; medians over {args.runs} runs, seconds since the process was spawned")
    print(f"(load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    print("| numba cache | /livez 200 | /readyz 200 | " + " | ".join(names) + " |")
    print("|---" * (3 + len(names)) + "|")
    for state in states:
        rs = [r for r in results if r["cache"] == state]

        def med(vals: list[float | None]) -> float | None:
            got = [v for v in vals if v is not None]
            return statistics.median(got) if got else None

        cells = [_fmt(med([r["livez_s"] for r in rs])), _fmt(med([r["readyz_s"] for r in rs]))]
        for n in names:
            got = [r["phases"][n] for r in rs if n in r["phases"]]
            wall = med([g[0] for g in got])
            cpu = med([g[1] for g in got])
            cells.append(f"{_fmt(wall)} (cpu {_fmt(cpu)})")
        print(f"| {state} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
