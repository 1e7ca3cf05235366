"""Fault figures for docs/reliability.md: the e2e fault tests, repeated, and SIGTERM after a big burst.

Two modes (both need ``scripts/kube-env install``):

``tests`` runs ``tests/e2e/test_faults.py`` ``--repeat`` times and collects the ``FAULT-FIGURES``
line each test prints (pods, bound, lost, bound twice, GPUs/CPUs held twice, timings), then prints
a table: totals of the counts, min / median / max of the timings.

``burst`` is the report's scenario: a fresh etcd (tmpfs) + kube-apiserver, ``--nodes`` nodes and
``--pods`` pending pods (bench/e2e.py's shapes), ``koordsched run`` with QPS/burst 5000 and leader
election off; once ``--at`` of the pods are bound it sends SIGTERM and measures how long the
process takes to exit and to free its port, then checks that every pod is either bound or still
pending (none lost, none bound twice per the watch of nodeName changes).

    .venv/bin/python bench/faults.py tests --repeat 3
    .venv/bin/python bench/faults.py burst --nodes 1000 --pods 5000 --at 0.95 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.e2e import NAMESPACE, PROFILES_DIR, Api, node_body, pod_body  # noqa: E402
from tests.e2e.apiserver import KubeEnv, free_ports  # noqa: E402

MARK = "FAULT-FIGURES "
COUNTS = ("pods", "bound", "lost", "bound_twice", "double_allocated_gpus", "double_allocated_cpus")


# --- mode "tests" ------------------------------------------------------------------------------------


def run_tests(repeat: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    env = dict(os.environ, KOORDSCHED_REQUIRE_E2E="1")
    for i in range(repeat):
        print(f"# run {i + 1}/{repeat}: pytest tests/e2e/test_faults.py", file=sys.stderr, flush=True)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-s",
                "-p",
                "no:cacheprovider",
                "tests/e2e/test_faults.py",
            ],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        # pytest's progress dots may precede a line: find the mark anywhere in it.
        found = [
            json.loads(line[line.index(MARK) + len(MARK) :])
            for line in proc.stdout.splitlines()
            if MARK in line
        ]
        if proc.returncode != 0 or len(found) != 5:
            print(proc.stdout[-5000:], proc.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"run {i + 1}: pytest exit status {proc.returncode}, {len(found)} figure lines")
        rows.extend(found)
    return rows


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:g}"
    return f"{min(values):g} / {statistics.median(values):g} / {max(values):g}"


def tests_table(rows: list[dict[str, Any]]) -> str:
    by_test: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_test.setdefault(r["test"], []).append(r)
    out = [
        "| fault | runs | pods | lost | bound twice | GPUs / CPUs held twice "
        "| figures (min / median / max) |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for test, rs in by_test.items():
        timings: dict[str, list[float]] = {}
        for r in rs:
            for k, v in r["extra"].items():
                if isinstance(v, int | float) and not isinstance(v, bool):
                    timings.setdefault(k, []).append(float(v))
        figures = "; ".join(f"{k} {_spread(v)}" for k, v in timings.items() if k != "binding_requests")
        gpus = sum(r["double_allocated_gpus"] for r in rs)
        cpus = sum(r["double_allocated_cpus"] for r in rs)
        out.append(
            f"| {test} | {len(rs)} | {sum(r['pods'] for r in rs)} | {sum(r['lost'] for r in rs)} "
            f"| {sum(r['bound_twice'] for r in rs)} | {gpus} / {cpus} | {figures} |"
        )
    return "\n".join(out)


# --- mode "burst" ------------------------------------------------------------------------------------


class _Spec(msgspec.Struct):
    nodeName: str = ""


class _Meta(msgspec.Struct):
    name: str = ""
    resourceVersion: str = ""


class _Obj(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _Spec | None = None


class _List(msgspec.Struct):
    metadata: _Meta
    items: list[_Obj]


class _Event(msgspec.Struct):
    type: str
    object: _Obj


_decode_list = msgspec.json.Decoder(_List).decode
_decode_event = msgspec.json.Decoder(_Event).decode


async def _listed(api: Api) -> _List:
    return _decode_list(await api.get_bytes(f"/api/v1/namespaces/{NAMESPACE}/pods"))


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


async def one_burst(
    nodes: int, pods: int, at: float, log_dir: Path, grace: str | None, source: Path
) -> dict[str, Any]:
    env = KubeEnv(etcd_on_tmpfs=True, verbosity=0)
    env.start()
    api = Api(env, 64)
    sched: subprocess.Popen[bytes] | None = None
    result: dict[str, Any] = {"nodes": nodes, "pods": pods, "sigterm_at": at, "source": str(source)}
    try:
        assert env.workdir is not None
        await api.post(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        await api.create_all("/api/v1/nodes", [node_body(f"node-{i}") for i in range(nodes)])
        await api.create_all(
            f"/api/v1/namespaces/{NAMESPACE}/pods", [pod_body(f"pod-{i}") for i in range(pods)]
        )
        listed = await _listed(api)
        cfg = yaml.safe_load((PROFILES_DIR / "koordsched.yaml").read_text())
        cfg["clientConnection"] = {"kubeconfig": str(env.kubeconfig_path), "qps": 5000, "burst": 5000}
        cfg["leaderElection"] = {"leaderElect": False}
        config = Path(env.workdir) / "koordsched.yaml"
        config.write_text(yaml.safe_dump(cfg))
        (port,) = free_ports(1)
        argv = [sys.executable, "-m", "koordsched", "--log-level", "info", "run", "--config", str(config)]
        argv += ["--bind-address", "127.0.0.1", "--secure-port", str(port)]
        if grace is not None:
            argv += ["--shutdown-grace-period", grace]
        log_path = log_dir / f"burst-{nodes}n-{pods}p-{time.strftime('%H%M%S')}.log"
        result["log"] = str(log_path)

        # Every nodeName change, from before the scheduler starts: a pod seen on two nodes is bound twice.
        node_of: dict[str, str] = {}
        rebinds = 0

        async def watch(rv: str) -> None:
            nonlocal rebinds
            params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "3600"}
            async with api.session.get(
                f"{api.base}/api/v1/namespaces/{NAMESPACE}/pods", params=params
            ) as resp:
                async for line in resp.content:
                    if not line.strip():
                        continue
                    ev = _decode_event(line)
                    node = ev.object.spec.nodeName if ev.object.spec else ""
                    if node:
                        prev = node_of.setdefault(ev.object.metadata.name, node)
                        rebinds += prev != node

        watcher = asyncio.ensure_future(watch(listed.metadata.resourceVersion))
        with open(log_path, "wb") as out:  # noqa: ASYNC230 - before the timed part
            env_vars = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
            sched = subprocess.Popen(  # noqa: ASYNC220
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO_ROOT,
                env=env_vars,
                start_new_session=True,
            )
        t_start = time.monotonic()
        while len(node_of) < at * pods:
            if sched.poll() is not None or time.monotonic() - t_start > 600:
                raise RuntimeError(
                    f"{len(node_of)}/{pods} bound; scheduler status {sched.poll()}; see {log_path}"
                )
            await asyncio.sleep(0.01)
        result["bound_at_sigterm"] = len(node_of)
        sched.send_signal(signal.SIGTERM)
        t_term = time.monotonic()
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(sched.wait, 60)
        exited = time.monotonic() - t_term
        if sched.poll() is None:
            sched.kill()
            sched.wait()
            result["error"] = "still running 60 s after SIGTERM (killed)"
        result["exit_status"] = sched.returncode
        result["exit_s"] = round(exited, 2)
        result["port_free_after_exit"] = _port_free(port)
        await asyncio.sleep(1.0)  # let the watch catch up with what landed
        final = await _listed(api)
        bound = sum(1 for o in final.items if o.spec and o.spec.nodeName)
        result.update(
            pods_after=len(final.items),
            bound_after=bound,
            pending_after=len(final.items) - bound,
            lost=pods - len(final.items),
            bound_twice=rebinds,
        )
        watcher.cancel()
        result["ok"] = (
            "error" not in result
            and result["exit_status"] == 0
            and result["lost"] == 0
            and result["bound_twice"] == 0
            and result["port_free_after_exit"]
        )
        return result
    finally:
        if sched is not None and sched.poll() is None:
            os.killpg(sched.pid, signal.SIGKILL)
            sched.wait()
        await api.close()
        env.stop()


def burst_table(rows: list[dict[str, Any]]) -> str:
    head = [
        "| nodes | pods | bound at SIGTERM | exit status | exit s | port free "
        "| bound / pending after | lost | bound twice |",
        "|---:|---:|---:|---:|---:|---|---|---:|---:|",
    ]
    return "\n".join(
        head
        + [
            f"| {r['nodes']:,} | {r['pods']:,} | {r.get('bound_at_sigterm', '-')} "
            f"| {r.get('exit_status', '-')} | {r.get('exit_s', '-')} | {r.get('port_free_after_exit', '-')} "
            f"| {r.get('bound_after', '-')} / {r.get('pending_after', '-')} | {r.get('lost', '-')} "
            f"| {r.get('bound_twice', '-')} |"
            for r in rows
        ]
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    t = sub.add_parser("tests", help="repeat tests/e2e/test_faults.py and collect its figures")
    t.add_argument("--repeat", type=int, default=1)
    b = sub.add_parser("burst", help="SIGTERM koordsched run after a big burst of binds")
    b.add_argument("--nodes", type=int, default=1000)
    b.add_argument("--pods", type=int, default=5000)
    b.add_argument("--at", type=float, default=0.95, help="fraction of the pods bound when SIGTERM is sent")
    b.add_argument("--repeat", type=int, default=1)
    b.add_argument("--grace", help="pass --shutdown-grace-period (default: not passed, i.e. 10s)")
    b.add_argument(
        "--source",
        type=Path,
        default=REPO_ROOT,
        help="the koordsched tree to run (default this one; another checkout to compare)",
    )
    p.add_argument("--json-out", help="also append the JSON lines to this file")
    args = p.parse_args()

    if args.mode == "tests":
        rows = run_tests(args.repeat)
        table = tests_table(rows)
    else:
        log_dir = Path(tempfile.mkdtemp(prefix="koordsched-faults-"))
        rows = []
        for i in range(args.repeat):
            print(
                f"# burst {i + 1}/{args.repeat}: {args.nodes} nodes, {args.pods} pods",
                file=sys.stderr,
                flush=True,
            )
            rows.append(
                asyncio.run(one_burst(args.nodes, args.pods, args.at, log_dir, args.grace, args.source))
            )
            print(json.dumps(rows[-1]), flush=True)
        table = burst_table(rows)
    if args.json_out:
        with open(args.json_out, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    print()
    print(table)
    return 0 if all(r.get("ok", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
