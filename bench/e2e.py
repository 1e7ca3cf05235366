"""End-to-end scheduling throughput against a real kube-apiserver: the API server's ceiling,
koordsched and kube-scheduler 1.20.2, measured in the same run.

For every (size, scheduler) pair this starts a fresh etcd (on tmpfs) + kube-apiserver 1.20.2
(``tests/e2e/apiserver.py``), creates N nodes (32 CPU, 256Gi, 110 pods, Ready) and M pending pods
(100m CPU, 500Mi, ``schedulerName: koord-scheduler``) with many concurrent requests, and only
then starts the scheduler process. A watch on pods timestamps every bind; throughput is
``(M - 1) / (last bind - first bind)``, so start-up (cache sync, numba warm-up) is excluded.

Every scheduler gets the same client QPS/burst, leader election off and the same
percentageOfNodesToScore (0 = adaptive by default), from the profiles in ``bench/e2e_profiles/``.
The headline compares the first three; the other two may only be shown beside it, labelled:

- ``binder``: ``bench/e2e_binder.py``, no decision and no event: it lists/watches the pending
  pods and POSTs bindings round-robin over the nodes, ``--binder-in-flight`` at a time. Its
  pods/s is the API server's ceiling on this machine in this run;
- ``koordsched``: ``koordsched run`` with the bundled default profile,
  ``config/koord-scheduler.yaml`` (every kube and Koordinator plugin on), as it is now;
- ``kube-scheduler``: kube-scheduler 1.20.2 with its default plugins, one profile named
  ``koord-scheduler``;
- ``binder-events`` (labelled, a diagnostic): the binder writing kube-scheduler's ``Scheduled``
  event after each bind, the ceiling for a scheduler that writes every event;
- ``koordsched-reduced`` (labelled): ``bench/e2e_profiles/koordsched-reduced.yaml``, kube's
  default plugins only, no Koordinator plugin;
- ``kube-scheduler-matched`` (labelled): kube-scheduler 1.20.2 restricted to the plugin set
  koordsched had before issues 11-13.

The koordsched kinds run ``python -m koordsched`` from this checkout (``PYTHONPATH`` set to it).

Per run it records: pods/s, time-to-bind from scheduler start (p50/p90/p99, start-up included),
the scheduler's own ``scheduler_e2e_scheduling_duration_seconds`` and
``scheduler_scheduling_algorithm_duration_seconds`` percentiles from /metrics, the CPU seconds the
scheduler, kube-apiserver, etcd, this bench process and everything else on the machine used
between the first and the last bind (from /proc), the Scheduled events written, and it checks
that every pod was bound exactly once and that no node is over capacity. One JSON line per run
goes to stdout (and ``--json-out``), then markdown tables (``--table FILE`` re-renders saved
lines). Results and caveats: bench/README.md, "End-to-end throughput against a real API server".

    .venv/bin/python bench/e2e.py --quick                          # 100 nodes, 500 pods
    .venv/bin/python bench/e2e.py --nodes 1000,5000 --pods 5000    # binder, koordsched, kube-scheduler
    .venv/bin/python bench/e2e.py --nodes 5000 --schedulers koordsched --py-spy  # where its time goes
    .venv/bin/python bench/e2e.py --nodes 5000 --schedulers koordsched --cprofile  # the same, no py-spy

Needs ``scripts/kube-env install`` (etcd, kube-apiserver and kube-scheduler 1.20.2).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.e2e_measure import (  # noqa: E402
    CpuSample,
    configz_summary,
    counter_by,
    cpu_split,
    histogram_mean,
    histogram_quantiles,
    parse_metrics,
    scrape,
)
from bench.e2e_report import (  # noqa: E402
    BINDERS,
    KOORDSCHEDS,
    KUBE_SCHEDULERS,
    SCHEDULERS,
    markdown,
    summarize_cprofile,
    summarize_profile,
)
from tests.e2e.apiserver import KubeEnv, free_ports  # noqa: E402

PROFILES_DIR = Path(__file__).resolve().parent / "e2e_profiles"
BINDER_SCRIPT = Path(__file__).resolve().parent / "e2e_binder.py"
CPROFILE_SCRIPT = Path(__file__).resolve().parent / "e2e_cprofile.py"
PY_SPY_BIN = REPO_ROOT / ".venv" / "bin" / "py-spy"
BUNDLED_PROFILE = REPO_ROOT / "config" / "koord-scheduler.yaml"
SCHEDULER_NAME = "koord-scheduler"
NAMESPACE = "bench"

# The workload (kube-scheduler's scheduler_perf SchedulingBasic shape).
NODE_CPU_M = 32_000
NODE_MEM = 256 * 1024**3
NODE_PODS = 110
POD_CPU_M = 100
POD_MEM = 500 * 1024**2

# ---------------------------------------------------------------------------------------------
# objects


def node_body(name: str) -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    alloc = {"cpu": "32", "memory": "256Gi", "pods": str(NODE_PODS)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "spec": {},
        "status": {
            "capacity": alloc,
            "allocatable": alloc,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "bench node",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
        },
    }


def pod_body(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "bench"}},
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "containers": [
                {
                    "name": "pause",
                    "image": "registry.k8s.io/pause:3.2",
                    "resources": {"requests": {"cpu": f"{POD_CPU_M}m", "memory": "500Mi"}},
                }
            ],
        },
    }


# Just the fields the watch needs, so decoding stays cheap next to the scheduler under test.
class _Meta(msgspec.Struct):
    name: str = ""
    resourceVersion: str = ""


class _Spec(msgspec.Struct):
    nodeName: str = ""


class _Obj(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _Spec | None = None
    code: int = 0


class _Event(msgspec.Struct):
    type: str
    object: _Obj


class _List(msgspec.Struct):
    metadata: _Meta
    items: list[_Obj]


class _EventObj(msgspec.Struct):
    reason: str = ""


class _EventList(msgspec.Struct):
    items: list[_EventObj]
    metadata: _Meta = msgspec.field(default_factory=_Meta)


class _EventObjMeta(msgspec.Struct):
    name: str = ""
    resourceVersion: str = ""


class _WatchedEvent(msgspec.Struct):
    metadata: _EventObjMeta = msgspec.field(default_factory=_EventObjMeta)
    reason: str = ""


class _EventWatchLine(msgspec.Struct):
    type: str
    object: _WatchedEvent


_decode_event = msgspec.json.Decoder(_Event).decode
_decode_event_line = msgspec.json.Decoder(_EventWatchLine).decode
_decode_list = msgspec.json.Decoder(_List).decode
_decode_events = msgspec.json.Decoder(_EventList).decode


class Api:
    """A thin aiohttp client for the admin user (token auth, pinned CA)."""

    def __init__(self, env: KubeEnv, concurrency: int) -> None:
        self.base = env.url
        ctx = ssl.create_default_context(cafile=str(env.ca_file))
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ctx, limit=concurrency + 8),
            headers={"Authorization": f"Bearer {env.admin_token}", "Content-Type": "application/json"},
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
        )
        self.concurrency = concurrency

    async def close(self) -> None:
        await self.session.close()

    async def post(self, path: str, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        for attempt in range(20):
            async with self.session.post(self.base + path, data=data) as resp:
                if resp.status in (200, 201):
                    await resp.read()
                    return
                text = await resp.text()
                if resp.status in (429, 500, 503, 504) and attempt < 19:
                    await asyncio.sleep(0.05 * (attempt + 1))
                    continue
                raise RuntimeError(f"POST {path}: HTTP {resp.status}: {text[:300]}")

    async def create_all(self, path: str, bodies: list[dict[str, Any]]) -> float:
        """POST every body with ``concurrency`` requests in flight; returns the seconds it took."""
        t0 = time.monotonic()
        it = iter(bodies)

        async def worker() -> None:
            for body in it:
                await self.post(path, body)

        await asyncio.gather(*(worker() for _ in range(self.concurrency)))
        return time.monotonic() - t0

    async def get_bytes(self, path: str) -> bytes:
        async with self.session.get(self.base + path) as resp:
            body = await resp.read()
            if resp.status != 200:
                raise RuntimeError(f"GET {path}: HTTP {resp.status}: {body[:300]!r}")
            return body


def metrics_base(kind: str, port: int) -> str:
    """koordsched serves HTTPS on --secure-port; kube-scheduler here plain HTTP (metricsBindAddress)."""
    return f"https://127.0.0.1:{port}" if kind.startswith("koordsched") else f"http://127.0.0.1:{port}"


# ---------------------------------------------------------------------------------------------
# a run


def percentile(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    k = (len(sorted_vals) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (k - lo)


@dataclass
class BindWatch:
    """Timestamps each pod's first nodeName; counts anything that would mean a double bind."""

    expected: int
    pids: dict[str, int]
    bound_at: dict[str, float] = field(default_factory=dict)
    node_of: dict[str, str] = field(default_factory=dict)
    rebinds: int = 0
    deletes: int = 0
    relists: int = 0
    first: CpuSample | None = None
    last: CpuSample | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    on_first: Any = None

    def seen(self, name: str, node: str, now: float) -> None:
        if not node:
            return
        prev = self.node_of.get(name)
        if prev is None:
            self.node_of[name] = node
            self.bound_at[name] = now
            n = len(self.bound_at)
            if n == 1:
                self.first = CpuSample.take(self.pids)
                if self.on_first is not None:
                    self.on_first()
            if n == self.expected:
                self.last = CpuSample.take(self.pids)
                self.done.set()
        elif prev != node:
            self.rebinds += 1


@dataclass
class ScheduledEvents:
    """Timestamps each Scheduled event as it is created: the end of a run is its last write."""

    expected: int
    pids: dict[str, int]
    at: list[float] = field(default_factory=list)
    last: CpuSample | None = None
    seen: set[str] = field(default_factory=set)

    def created(self, name: str, now: float) -> None:
        if name in self.seen:
            return
        self.seen.add(name)
        self.at.append(now)
        if len(self.at) == self.expected:
            self.last = CpuSample.take(self.pids)


async def watch_scheduled_events(api: Api, rv: str, w: ScheduledEvents) -> None:
    """Watch core/v1 Events (events.k8s.io/v1 ones included) in the bench namespace."""
    path = f"/api/v1/namespaces/{NAMESPACE}/events"
    while True:
        params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "3600"}
        async with api.session.get(
            api.base + path, params=params, timeout=aiohttp.ClientTimeout(total=None, sock_read=None)
        ) as resp:
            if resp.status != 200:
                raise RuntimeError(f"events watch: HTTP {resp.status}: {(await resp.text())[:300]}")
            async for line in resp.content:
                if not line.strip():
                    continue
                ev = _decode_event_line(line)
                if ev.type == "ERROR":  # expired: the count stays what was seen (a run reports it)
                    return
                rv = ev.object.metadata.resourceVersion or rv
                if ev.type == "ADDED" and ev.object.reason == "Scheduled":
                    w.created(ev.object.metadata.name, time.monotonic())


async def watch_pods(api: Api, rv: str, w: BindWatch) -> None:
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    while not w.done.is_set():
        params = {
            "watch": "1",
            "resourceVersion": rv,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": "3600",
        }
        expired = False
        async with api.session.get(
            api.base + path, params=params, timeout=aiohttp.ClientTimeout(total=None, sock_read=None)
        ) as resp:
            if resp.status != 200:
                raise RuntimeError(f"watch: HTTP {resp.status}: {(await resp.text())[:300]}")
            async for line in resp.content:
                if not line.strip():
                    continue
                ev = _decode_event(line)
                now = time.monotonic()
                if ev.type == "ERROR":
                    expired = True
                    break
                rv = ev.object.metadata.resourceVersion or rv
                if ev.type == "BOOKMARK":
                    continue
                if ev.type == "DELETED":
                    w.deletes += 1
                    continue
                if ev.object.spec is not None:
                    w.seen(ev.object.metadata.name, ev.object.spec.nodeName, now)
                if w.done.is_set():
                    return
        if expired:  # 410 Gone: relist (binds in the gap get the relist's time), then watch again
            w.relists += 1
            listed = _decode_list(await api.get_bytes(path))
            now = time.monotonic()
            for obj in listed.items:
                if obj.spec is not None:
                    w.seen(obj.metadata.name, obj.spec.nodeName, now)
            rv = listed.metadata.resourceVersion


class SocketCounter:
    """Samples a process's open sockets (fd -> socket inode) to count the connections it opens."""

    def __init__(self, pid: int, period: float = 0.05) -> None:
        self.pid, self.period = pid, period
        self.seen: set[str] = set()
        self.max_open = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join(5)
        return {"sockets_seen": len(self.seen), "max_open_sockets": self.max_open}

    def _loop(self) -> None:
        fd_dir = f"/proc/{self.pid}/fd"
        while not self._stop.wait(self.period):
            try:
                fds = os.listdir(fd_dir)
            except OSError:
                return
            now = set()
            for fd in fds:
                try:
                    target = os.readlink(f"{fd_dir}/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:"):
                    now.add(target)
            self.seen |= now
            self.max_open = max(self.max_open, len(now))


class PySpy:
    """``py-spy record`` attached to a pid from the first bind to the last (SIGINT stops it)."""

    def __init__(self, pid: int, out: Path, rate: int) -> None:
        self.pid, self.out, self.rate = pid, out, rate
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            # --gil: only the thread holding the GIL is sampled, i.e. where the interpreter's time
            # goes (idle thread-pool workers otherwise show up as busy under --nonblocking).
            [
                str(PY_SPY_BIN),
                "record",
                "--pid",
                str(self.pid),
                "--format",
                "raw",
                "--rate",
                str(self.rate),
                "--nonblocking",
                "--gil",
                "--output",
                str(self.out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(str(self.out) + ".log", "wb"),  # noqa: SIM115
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def tree_of(kind: str, args: argparse.Namespace) -> Path:
    """The checkout a koordsched kind runs from: this one, or ``--baseline-tree`` for the baseline."""
    return Path(args.baseline_tree).resolve() if kind == "koordsched-baseline" else REPO_ROOT


def profile_file(kind: str, args: argparse.Namespace) -> Path | None:
    if kind in BINDERS:
        return None
    if kind in ("koordsched", "koordsched-baseline"):
        return tree_of(kind, args) / BUNDLED_PROFILE.relative_to(REPO_ROOT)
    return PROFILES_DIR / f"{kind}.yaml"


def write_config(kind: str, workdir: Path, env: KubeEnv, args: argparse.Namespace, port: int) -> Path:
    template = profile_file(kind, args)
    if template is None:
        return workdir / "no-config"
    cfg = yaml.safe_load(template.read_text())
    cfg["clientConnection"] = {"kubeconfig": str(env.kubeconfig_path), "qps": args.qps, "burst": args.burst}
    cfg["leaderElection"] = {"leaderElect": False}
    cfg["percentageOfNodesToScore"] = args.percentage
    if kind in KUBE_SCHEDULERS:
        cfg["healthzBindAddress"] = cfg["metricsBindAddress"] = f"127.0.0.1:{port}"
    path = workdir / f"{kind}-config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def scheduler_argv(
    kind: str, config: Path, env: KubeEnv, port: int, args: argparse.Namespace, prof_out: Path | None
) -> list[str]:
    if kind in BINDERS:
        return [
            sys.executable,
            str(BINDER_SCRIPT),
            *(["--events"] if kind == "binder-events" else []),
            "--server",
            env.url,
            "--ca",
            str(env.ca_file),
            "--scheduler-name",
            SCHEDULER_NAME,
            "--in-flight",
            str(args.binder_in_flight),
        ]
    if kind in KOORDSCHEDS:
        # cProfile sees only the thread it starts in: the asyncio loop's, which is the one that
        # matters (the scheduling cycles, the watches and the writes all run there).
        prog = [str(CPROFILE_SCRIPT), str(prof_out)] if prof_out is not None else ["-m", "koordsched"]
        return [
            sys.executable,
            *prog,
            "run",
            "--config",
            str(config),
            "--kubeconfig",
            str(env.kubeconfig_path),
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            str(port),
        ]
    return [str(env.scheduler_binary), f"--config={config}", "--secure-port=0", "--v=1"]


#: Entries of ``checks`` that describe rather than pass or fail.
INFO_CHECKS = ("nodes_used", "max_pods_on_a_node", "watch_relists", "events_by_reason")


def source_version(root: Path = REPO_ROOT) -> dict[str, Any]:
    """Which koordsched ran: HEAD, whether koordsched/ or config/ differ from it, and a hash of them.

    Others may edit the tree between runs; the hash tells runs on different code apart.
    """

    def git(*argv: str) -> str:
        proc = subprocess.run(["git", *argv], cwd=root, capture_output=True, text=True, check=False)
        return proc.stdout.strip()

    digest = hashlib.sha256()
    for path in sorted([*root.glob("koordsched/**/*.py"), *root.glob("config/*.yaml")]):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return {
        "git_head": git("rev-parse", "--short", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--", "koordsched", "config")),
        "src_sha256": digest.hexdigest()[:12],
    }


async def scheduler_view(kind: str, port: int, token: str) -> dict[str, Any]:
    """The scheduler's own view: latency histograms and attempts from /metrics, and /configz."""
    out: dict[str, Any] = {}
    try:
        text = await asyncio.to_thread(scrape, f"{metrics_base(kind, port)}/metrics", token)
        samples = parse_metrics(text)
        out["e2e_scheduling_ms"] = histogram_quantiles(
            samples, "scheduler_e2e_scheduling_duration_seconds", result="scheduled"
        )
        out["algorithm_ms"] = histogram_quantiles(samples, "scheduler_scheduling_algorithm_duration_seconds")
        out["attempts"] = counter_by(samples, "scheduler_schedule_attempts_total", "result")
        # koordsched only (kube-scheduler 1.20 has no such histogram): checks the percentage.
        out["evaluated_nodes_mean"] = histogram_mean(samples, "scheduler_pod_scheduling_evaluated_nodes")
    except Exception as exc:
        out["metrics_error"] = repr(exc)
    try:  # what the scheduler says it runs with (kube-scheduler 1.20 uses Go field names here)
        cz = json.loads(await asyncio.to_thread(scrape, f"{metrics_base(kind, port)}/configz", token))
        out["configz"] = configz_summary(cz.get("componentconfig", cz))
    except Exception as exc:
        out["configz_error"] = repr(exc)
    return out


async def apiserver_requests(api: Api) -> Counter[str]:
    """``apiserver_request_total`` by ``VERB resource[/subresource] code``: what clients asked for."""
    out: Counter[str] = Counter()
    for name, labels, value in parse_metrics((await api.get_bytes("/metrics")).decode()):
        if name == "apiserver_request_total":
            res = labels.get("resource", "") + (
                f"/{labels['subresource']}" if labels.get("subresource") else ""
            )
            out[f"{labels.get('verb', '')} {res} {labels.get('code', '')}"] += int(value)
    return out


def stop_scheduler(sched: subprocess.Popen[bytes]) -> None:
    if sched.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sched.pid, signal.SIGTERM)
        try:
            sched.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(sched.pid, signal.SIGKILL)
            sched.wait()


async def one_run(
    kind: str, nodes: int, pods: int, args: argparse.Namespace, log_dir: Path
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "scheduler": kind,
        "nodes": nodes,
        "pods": pods,
        "qps": args.qps,
        "burst": args.burst,
        "percentageOfNodesToScore": args.percentage or "adaptive",
        "ok": False,
    }
    template = profile_file(kind, args)
    result["config"] = (
        str(template.relative_to(REPO_ROOT) if template.is_relative_to(REPO_ROOT) else template)
        if template is not None
        else None
    )
    if kind in KOORDSCHEDS:
        result["koordsched_source"] = {
            "tree": str(tree_of(kind, args)),
            **source_version(tree_of(kind, args)),
        }
    tag = f"{kind}-{nodes}n-{pods}p-{time.strftime('%H%M%S')}"
    env = KubeEnv(etcd_on_tmpfs=True, verbosity=0)
    env.start()
    result["kube_bin"] = str(env.bin_dir)  # kube-apiserver (and kube-scheduler) build used
    sched: subprocess.Popen[bytes] | None = None
    spy: PySpy | None = None
    api = Api(env, args.concurrency)
    try:
        assert env.workdir is not None and env._apiserver is not None and env._etcd is not None
        await api.post(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        t_nodes = await api.create_all("/api/v1/nodes", [node_body(f"node-{i}") for i in range(nodes)])
        t_pods = await api.create_all(
            f"/api/v1/namespaces/{NAMESPACE}/pods", [pod_body(f"pod-{i}") for i in range(pods)]
        )
        result["create_s"] = {"nodes": round(t_nodes, 1), "pods": round(t_pods, 1)}
        listed = _decode_list(await api.get_bytes(f"/api/v1/namespaces/{NAMESPACE}/pods"))
        assert len(listed.items) == pods and not any(o.spec and o.spec.nodeName for o in listed.items)
        await asyncio.sleep(args.settle)  # let the apiserver and etcd finish the creation burst

        (port,) = free_ports(1)
        config = write_config(kind, env.workdir, env, args, port)
        log_path = log_dir / f"{tag}.log"
        pids = {"apiserver": env._apiserver.popen.pid, "etcd": env._etcd.popen.pid, "bench": os.getpid()}
        watch = BindWatch(expected=pods, pids=pids)
        watcher = asyncio.ensure_future(watch_pods(api, listed.metadata.resourceVersion, watch))
        events_rv = _decode_events(await api.get_bytes(f"/api/v1/namespaces/{NAMESPACE}/events")).metadata
        scheduled_events = ScheduledEvents(expected=pods, pids=pids)
        event_watcher = asyncio.ensure_future(
            watch_scheduled_events(api, events_rv.resourceVersion, scheduled_events)
        )
        await asyncio.sleep(0.5)
        result["loadavg_before"] = [round(x, 2) for x in os.getloadavg()]
        requests_before = await apiserver_requests(api)
        prof_out = log_dir / f"{tag}.cprofile" if args.cprofile and kind in KOORDSCHEDS else None
        child_env = dict(os.environ)
        if kind in BINDERS:
            child_env["BINDER_TOKEN"] = env.admin_token  # not on the command line, where ps shows it
        else:
            child_env["PYTHONPATH"] = os.pathsep.join(
                [str(tree_of(kind, args)), *filter(None, [os.environ.get("PYTHONPATH")])]
            )
        with open(log_path, "wb") as log:  # noqa: ASYNC230 - before the timed part
            t_start = time.monotonic()
            sched = subprocess.Popen(  # noqa: ASYNC220 - fork/exec, nothing to await
                scheduler_argv(kind, config, env, port, args, prof_out),
                env=child_env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        pids["scheduler"] = sched.pid
        start_sample = CpuSample.take(pids)
        sockets = SocketCounter(sched.pid)
        sockets.start()
        if args.py_spy and kind in KOORDSCHEDS:
            spy = PySpy(sched.pid, log_dir / f"{tag}.pyspy.txt", args.py_spy_rate)
            watch.on_first = spy.start
        # Wait for the last bind, the scheduler's death, or the timeout.
        deadline = t_start + args.timeout
        while not watch.done.is_set():
            if watcher.done():
                watcher.result()
                break
            if sched.poll() is not None:
                result["error"] = f"scheduler exited with status {sched.returncode}; see {log_path}"
                break
            if time.monotonic() > deadline:
                result["error"] = f"timeout: {len(watch.bound_at)}/{pods} bound after {args.timeout:.0f} s"
                break
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(watch.done.wait()), 1.0)
        if spy is not None:
            spy.stop()
        end_sample = watch.last or CpuSample.take(pids)
        result["scheduler_sockets"] = sockets.stop()  # start to last bind: all the connections it opened
        result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]

        bound = sorted(watch.bound_at.values())
        result["bound"] = len(bound)
        if len(bound) >= 2:
            span = bound[-1] - bound[0]
            result["pods_per_s"] = round((len(bound) - 1) / span, 1) if span > 0 else None
            result["bind_span_s"] = round(span, 2)
            i10, i90 = int(0.1 * (len(bound) - 1)), int(0.9 * (len(bound) - 1))
            if bound[i90] > bound[i10]:
                result["pods_per_s_10_90"] = round((i90 - i10) / (bound[i90] - bound[i10]), 1)
        if bound:
            since = [b - t_start for b in bound]
            result["startup_s"] = round(since[0], 2)  # scheduler start -> first bind
            result["time_to_bind_from_start_ms"] = {
                f"p{q}": round(1000 * percentile(since, q / 100), 0) for q in (50, 90, 99)
            }
        if watch.first is not None:
            result["cpu_bind_window"] = window = cpu_split(watch.first, end_sample, pids)
            if len(bound) >= 2:  # CPU per pod bound in the window: comparable on a contended machine
                result["cpu_ms_per_pod"] = {
                    k: round(1000 * window["cpu_s"][k] / (len(bound) - 1), 2)
                    for k in ("scheduler", "apiserver", "etcd")
                }
        result["cpu_from_start"] = cpu_split(start_sample, end_sample, pids)

        if kind not in BINDERS:  # the binder serves no /metrics
            # kube-scheduler records a pod's e2e latency after its bind call returns, which can
            # be after the watch saw the bind: wait a moment.
            await asyncio.sleep(1.0)
            result.update(await scheduler_view(kind, port, env.admin_token))

        # Verification, from a fresh list.
        final = _decode_list(await api.get_bytes(f"/api/v1/namespaces/{NAMESPACE}/pods"))
        per_node: Counter[str] = Counter(o.spec.nodeName for o in final.items if o.spec and o.spec.nodeName)
        node_names = {f"node-{i}" for i in range(nodes)}
        over = {
            n: c
            for n, c in per_node.items()
            if c > NODE_PODS or c * POD_CPU_M > NODE_CPU_M or c * POD_MEM > NODE_MEM
        }
        mismatched = sum(
            1
            for o in final.items
            if o.spec
            and o.spec.nodeName
            and watch.node_of.get(o.metadata.name) not in (None, o.spec.nodeName)
        )
        checks: dict[str, Any] = {
            "all_bound": sum(per_node.values()) == pods and len(final.items) == pods,
            "bound_once": watch.rebinds == 0 and mismatched == 0 and watch.deletes == 0,
            "known_nodes": set(per_node) <= node_names,
            "no_node_over_capacity": not over,
            "nodes_used": len(per_node),
            "max_pods_on_a_node": max(per_node.values(), default=0),
            "watch_relists": watch.relists,
        }
        # Events the scheduler wrote (core/v1 view of events.k8s.io/v1), once its writes settle
        # (a backlog may still be draining): kube-scheduler writes one Scheduled event per pod.
        by_reason: dict[str, int] = {}
        for _ in range(30):
            events = _decode_events(await api.get_bytes(f"/api/v1/namespaces/{NAMESPACE}/events"))
            now_by_reason = dict(Counter(e.reason for e in events.items))
            if (
                now_by_reason.get("Scheduled", 0) >= pods
                and bound
                and "events_after_last_bind_s" not in result
            ):
                # How far the events trail the binds (polled each second; the scrapes above
                # took about a second too).
                result["events_after_last_bind_s"] = round(time.monotonic() - bound[-1], 1)
            if now_by_reason == by_reason:
                break
            by_reason = now_by_reason
            await asyncio.sleep(1.0)
        checks["events_by_reason"] = by_reason
        if kind != "binder":  # every other kind writes kube-scheduler's Scheduled event per pod
            checks["scheduled_event_per_pod"] = by_reason.get("Scheduled", 0) == pods
        # Every request the API server served from the scheduler's start until its writes settled
        # (the bench's own list, watch and these scrapes included): what each pod cost in requests.
        requests = await apiserver_requests(api) - requests_before
        result["apiserver_requests"] = dict(requests.most_common(12))
        if "attempts" in result:
            checks["scheduled_attempts_eq_pods"] = result["attempts"].get("scheduled", 0) == pods
        result["checks"] = checks
        result["ok"] = "error" not in result and all(v for k, v in checks.items() if k not in INFO_CHECKS)
        if spy is not None and spy.out.exists():
            result["profile"] = {"file": str(spy.out), **summarize_profile(spy.out)}
        if prof_out is not None:
            await asyncio.to_thread(stop_scheduler, sched)  # cProfile writes its file on exit
            if prof_out.exists():
                result["cprofile"] = summarize_cprofile(prof_out)
        result["log"] = str(log_path)
        # To the last write: the bind window, or longer when the Scheduled events trail the binds
        # (a scheduler that defers its events would otherwise look faster than the work it does).
        last_event = max(scheduled_events.at, default=None)
        if len(bound) >= 2 and watch.first is not None:
            end = max(bound[-1], last_event or bound[-1])
            result["scheduled_events_seen"] = len(scheduled_events.at)
            result["events_trail_s"] = round(max(0.0, (last_event or bound[-1]) - bound[-1]), 2)
            result["pods_per_s_all_writes"] = round((len(bound) - 1) / (end - bound[0]), 1)
            last_sample = scheduled_events.last if last_event and last_event > bound[-1] else end_sample
            if last_sample is not None:
                full = cpu_split(watch.first, last_sample, pids)
                result["cpu_ms_per_pod_all_writes"] = {
                    k: round(1000 * full["cpu_s"][k] / (len(bound) - 1), 2)
                    for k in ("scheduler", "apiserver", "etcd")
                }
        for task in (watcher, event_watcher):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        return result
    finally:
        if spy is not None:
            spy.stop()
        if sched is not None:
            stop_scheduler(sched)
        await api.close()
        env.stop()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", default="1000,5000", help="comma-separated node counts (default 1000,5000)")
    p.add_argument("--pods", type=int, default=5000, help="pending pods per run (default 5000)")
    p.add_argument("--quick", action="store_true", help="100 nodes, 500 pods")
    p.add_argument(
        "--schedulers",
        default="binder,koordsched,kube-scheduler,binder-events",
        help=f"comma-separated, run in this order per size; any of {', '.join(SCHEDULERS)}",
    )
    p.add_argument("--qps", type=float, default=5000, help="client QPS for both schedulers (default 5000)")
    p.add_argument("--burst", type=int, default=5000, help="client burst for both schedulers (default 5000)")
    p.add_argument(
        "--percentage",
        type=int,
        default=0,
        help="percentageOfNodesToScore for both (default 0 = adaptive; 100 = every node)",
    )
    p.add_argument("--concurrency", type=int, default=64, help="concurrent create requests (default 64)")
    p.add_argument(
        "--settle", type=float, default=3.0, help="seconds between creating and starting (default 3)"
    )
    p.add_argument("--timeout", type=float, default=900, help="seconds a run may take to bind all pods")
    p.add_argument("--repeat", type=int, default=1, help="runs per (size, scheduler)")
    p.add_argument(
        "--py-spy",
        action="store_true",
        help="profile koordsched with py-spy from first to last bind (slows it: report apart)",
    )
    p.add_argument("--py-spy-rate", type=int, default=100)
    p.add_argument(
        "--cprofile",
        action="store_true",
        help="run koordsched under cProfile, timed by its loop thread's CPU clock "
        "(the whole run; slows it: report apart)",
    )
    p.add_argument(
        "--baseline-tree",
        help="another checkout (e.g. before a change): adds it as koordsched-baseline, its bundled profile",
    )
    p.add_argument(
        "--binder-in-flight", type=int, default=64, help="the binder's bindings in flight (default 64)"
    )
    p.add_argument("--log-dir", help="scheduler logs (default: a new /tmp/koordsched-e2e-* dir)")
    p.add_argument("--json-out", help="also append the JSON lines to this file")
    p.add_argument("--table", metavar="JSONL", help="only print the tables for JSON lines saved earlier")
    args = p.parse_args()

    if args.table:
        with open(args.table) as f:
            print(markdown([json.loads(line) for line in f if line.startswith("{")]))
        return 0

    sizes = [(100, 500)] if args.quick else [(int(n), args.pods) for n in args.nodes.split(",")]
    kinds = [k.strip() for k in args.schedulers.split(",") if k.strip()]
    for k in kinds:
        if k not in SCHEDULERS:
            p.error(f"unknown scheduler {k!r}; choose from {', '.join(SCHEDULERS)}")
    if ("koordsched-baseline" in kinds) != bool(args.baseline_tree):
        p.error("--baseline-tree and koordsched-baseline in --schedulers go together")
    if args.py_spy and not PY_SPY_BIN.exists():
        p.error(f"--py-spy needs {PY_SPY_BIN} (.venv/bin/pip install py-spy)")
    log_dir = Path(args.log_dir) if args.log_dir else Path(tempfile.mkdtemp(prefix="koordsched-e2e-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"# logs in {log_dir}; {os.cpu_count()} CPUs; loadavg {os.getloadavg()}", file=sys.stderr)

    results = []
    for nodes, pods in sizes:
        for _ in range(args.repeat):
            for kind in kinds:
                print(f"# {kind}: {nodes} nodes, {pods} pods ...", file=sys.stderr, flush=True)
                try:
                    r = asyncio.run(one_run(kind, nodes, pods, args, log_dir))
                except Exception as exc:
                    r = {"scheduler": kind, "nodes": nodes, "pods": pods, "ok": False, "error": repr(exc)}
                results.append(r)
                line = json.dumps(r)
                print(line, flush=True)
                if args.json_out:
                    with open(args.json_out, "a") as f:
                        f.write(line + "\n")
    print()
    print(markdown(results))
    if args.json_out:
        print(
            f"# results appended to {args.json_out}; re-render with --table {args.json_out}", file=sys.stderr
        )
    return 0 if all(r.get("ok") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
