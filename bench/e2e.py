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
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.e2e.apiserver import KubeEnv, free_ports  # noqa: E402
from tests.e2e.helpers import parse_metrics as parse_samples  # noqa: E402

PROFILES_DIR = Path(__file__).resolve().parent / "e2e_profiles"
BINDER_SCRIPT = Path(__file__).resolve().parent / "e2e_binder.py"
CPROFILE_SCRIPT = Path(__file__).resolve().parent / "e2e_cprofile.py"
PY_SPY_BIN = REPO_ROOT / ".venv" / "bin" / "py-spy"
SCHEDULER_NAME = "koord-scheduler"
NAMESPACE = "bench"
CLK_TCK = os.sysconf("SC_CLK_TCK")

# The workload (kube-scheduler's scheduler_perf SchedulingBasic shape).
NODE_CPU_M = 32_000
NODE_MEM = 256 * 1024**3
NODE_PODS = 110
POD_CPU_M = 100
POD_MEM = 500 * 1024**2

#: In the order the tables show them: the headline three, then the labelled extras.
SCHEDULERS = (
    "binder",
    "koordsched",
    "kube-scheduler",
    "binder-events",
    "koordsched-reduced",
    "kube-scheduler-matched",
    "koordsched-baseline",
)
BINDERS = ("binder", "binder-events")
HEADLINE = ("binder", "koordsched", "kube-scheduler")
KUBE_SCHEDULERS = ("kube-scheduler", "kube-scheduler-matched")
KOORDSCHEDS = ("koordsched", "koordsched-reduced", "koordsched-baseline")
BUNDLED_PROFILE = REPO_ROOT / "config" / "koord-scheduler.yaml"
#: Names older JSON lines used (before the binder; "koordsched" was the reduced profile then).
_OLD_KINDS = {"koordsched": "koordsched-reduced", "koordsched-bundled": "koordsched"}


def kind_of(r: dict[str, Any]) -> str:
    """A result's scheduler under today's names (lines without ``config`` predate the renaming)."""
    kind = str(r["scheduler"])
    return kind if "config" in r else _OLD_KINDS.get(kind, kind)


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


_decode_event = msgspec.json.Decoder(_Event).decode
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


# ---------------------------------------------------------------------------------------------
# /proc accounting


def proc_cpu(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds; NaN once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return float("nan")
    fields = stat.rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_busy() -> tuple[float, float]:
    """CPU seconds the whole machine spent busy (all cores), and the part of it in irq/softirq."""
    with open("/proc/stat") as f:
        parts = f.readline().split()
    vals = [int(v) for v in parts[1:9]]  # user nice system idle iowait irq softirq steal
    return (sum(vals) - vals[3] - vals[4]) / CLK_TCK, (vals[5] + vals[6]) / CLK_TCK


def all_procs() -> dict[int, tuple[str, float, int]]:
    """pid -> (comm, cpu seconds, start time) for every process, to name the "other" CPU users."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        head, _, rest = stat.rpartition(")")
        fields = rest.split()
        cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK
        out[int(entry.name)] = (head.partition("(")[2], cpu, int(fields[19]))
    return out


@dataclass
class CpuSample:
    t: float
    procs: dict[str, float]
    machine: float
    irq: float
    everyone: dict[int, tuple[str, float, int]]

    @staticmethod
    def take(pids: dict[str, int]) -> CpuSample:
        busy, irq = machine_busy()
        return CpuSample(time.monotonic(), {k: proc_cpu(p) for k, p in pids.items()}, busy, irq, all_procs())


def cpu_split(a: CpuSample, b: CpuSample, pids: dict[str, int]) -> dict[str, Any]:
    """CPU seconds and cores (CPU seconds per wall second) per process between two samples.

    ``irq`` is the kernel's irq+softirq time (loopback TCP, mostly), ``other`` every other
    process on the machine (other users' work included), ``top_other`` the biggest of those.
    """
    wall = max(b.t - a.t, 1e-9)
    secs = {k: round(b.procs[k] - a.procs.get(k, 0.0), 2) for k in b.procs}
    machine = b.machine - a.machine
    secs["irq"] = round(b.irq - a.irq, 2)
    secs["other"] = round(machine - sum(secs.values()), 2)
    ours = set(pids.values())
    others: dict[str, float] = defaultdict(float)
    for pid, (comm, cpu, started) in b.everyone.items():
        if pid in ours:
            continue
        before = a.everyone.get(pid)  # the same process only if it started at the same time
        used = cpu - (before[1] if before and before[2] == started else 0.0)
        if used > 0:
            others[f"{comm}[{pid}]"] += used
    return {
        "wall_s": round(wall, 2),
        "cpu_s": secs,
        "cores": {k: round(v / wall, 2) for k, v in secs.items()},
        "machine_cores_busy": round(machine / wall, 2),
        "top_other": [(k, round(v, 2)) for k, v in sorted(others.items(), key=lambda kv: -kv[1])[:4]],
    }


# ---------------------------------------------------------------------------------------------
# metrics


def parse_metrics(text: str) -> list[tuple[str, dict[str, str], float]]:
    """The samples of a /metrics text as (name, labels, value), the e2e tests' parser reshaped."""
    return [(name, dict(labels), value) for (name, labels), value in parse_samples(text).items()]


def histogram_quantiles(
    samples: list[tuple[str, dict[str, str], float]],
    name: str,
    qs: tuple[float, ...] = (0.5, 0.9, 0.99),
    **match: str,
) -> dict[str, Any] | None:
    """Prometheus ``histogram_quantile`` (linear within a bucket) over every matching series summed."""
    buckets: dict[float, float] = defaultdict(float)
    total_sum = 0.0
    for metric, labels, value in samples:
        if any(labels.get(k) != v for k, v in match.items()):
            continue
        if metric == name + "_bucket":
            buckets[float(labels["le"])] += value
        elif metric == name + "_sum":
            total_sum += value
    if not buckets:
        return None
    bounds = sorted(buckets)
    count = buckets[bounds[-1]]
    if count <= 0:
        return None
    result: dict[str, Any] = {"count": int(count), "mean_ms": round(1000 * total_sum / count, 2)}
    for q in qs:
        rank = q * count
        lo_bound, lo_count = 0.0, 0.0
        value = bounds[-2] if len(bounds) > 1 else 0.0
        for b in bounds:
            c = buckets[b]
            if c >= rank:
                if b == float("inf"):
                    value = lo_bound  # as Prometheus does: the highest finite bound
                else:
                    value = lo_bound + (b - lo_bound) * ((rank - lo_count) / max(c - lo_count, 1e-12))
                break
            lo_bound, lo_count = b, c
        result[f"p{round(q * 100):d}_ms"] = round(1000 * value, 2)
    return result


def histogram_mean(samples: list[tuple[str, dict[str, str], float]], name: str) -> float | None:
    total = sum(v for m, _, v in samples if m == name + "_sum")
    count = sum(v for m, _, v in samples if m == name + "_count")
    return round(total / count, 1) if count else None


def counter_by(samples: list[tuple[str, dict[str, str], float]], name: str, label: str) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for metric, labels, value in samples:
        if metric == name:
            out[labels.get(label, "")] += int(value)
    return dict(out)


def _ci(d: Any, key: str) -> Any:
    """``d[key]`` ignoring case (``qps``/``QPS``, ``clientConnection``/``ClientConnection``)."""
    if isinstance(d, dict):
        for k, v in d.items():
            if k.lower() == key.lower():
                return v
    return None


def configz_summary(cfg: dict[str, Any]) -> dict[str, Any]:
    cc = _ci(cfg, "clientConnection") or {}
    le = _ci(cfg, "leaderElection") or {}
    profiles = _ci(cfg, "profiles") or []
    return {
        "qps": _ci(cc, "qps"),
        "burst": _ci(cc, "burst"),
        "leaderElect": _ci(le, "leaderElect"),
        "percentageOfNodesToScore": _ci(cfg, "percentageOfNodesToScore"),
        "profiles": [_ci(p, "schedulerName") for p in profiles],
    }


def scrape(url: str, token: str | None = None) -> str:
    """GET ``url``; koordsched's port is HTTPS with a self-signed certificate and wants a token."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    req = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
        return str(resp.read().decode())


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


#: Where a GIL-holding sample belongs: the first rule (in this order) with a frame in the stack.
PROFILE_CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("scheduling cycle (Scheduler.schedule_one)", ("Scheduler.schedule_one",)),
    ("bind request (KubePort.bind: kubernetes_asyncio + aiohttp)", ("KubePort.bind",)),
    ("event/status writes (BackgroundWriter)", ("BackgroundWriter.",)),
    ("watch streams (Reflector: decode + handlers)", ("Reflector.",)),
    ("aiohttp trust_env proxy/netrc lookup (thread pool)", ("get_env_proxy_for_url", "netrc_from_env")),
    ("other scheduler-loop code (Scheduler.*)", ("Scheduler.",)),
    ("metrics/health HTTP server", ("HttpServer.", "web_protocol")),
)
TRANSPORT = "HTTP/TLS transport callbacks (aiohttp protocol, ssl, asyncio transports)"
LOOP = "event loop and the rest"


def _categorize(funcs: list[str], leaf_module: str) -> str:
    for label, needles in PROFILE_CATEGORIES:
        if any(n in f for f in funcs for n in needles):
            return label
    if leaf_module.split(".")[0] in ("aiohttp", "ssl", "yarl", "multidict") or leaf_module in (
        "asyncio.sslproto",
        "asyncio.selector_events",
    ):
        return TRANSPORT
    return LOOP


def summarize_profile(path: Path, top: int = 25) -> dict[str, Any]:
    """Categories, self time by leaf function and package, inclusive time by koordsched function."""
    self_fn: Counter[str] = Counter()
    self_pkg: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    cats: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        count = int(n)
        frames = [f for f in stack.split(";") if " (" in f]
        if not frames:
            continue
        total += count
        names = [_frame_name(f) for f in frames]
        self_fn[names[-1]] += count
        self_pkg[_package(frames[-1])] += count
        cats[_categorize([f.partition(" (")[0] for f in frames], names[-1].split(":")[0])] += count
        for name in set(names):
            if name.startswith("koordsched"):
                incl[name] += count

    def pct(c: Counter[str], n: int = top) -> list[tuple[str, float]]:
        return [(k, round(100 * v / total, 1)) for k, v in c.most_common(n)] if total else []

    return {
        "samples": total,
        "categories": pct(cats, len(cats)),
        "self_by_package": pct(self_pkg),
        "self_by_function": pct(self_fn),
        "inclusive_koordsched": pct(incl),
    }


def _frame_name(frame: str) -> str:
    func, _, where = frame.partition(" (")
    file = where.rstrip(")").rpartition(":")[0]
    return f"{_module(file)}:{func}"


def _module(file: str) -> str:
    for marker in ("/site-packages/", "/lib/python3.11/", f"{REPO_ROOT}/", "/work/main/"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    return file.removesuffix(".py").replace("/", ".")


def _package(frame: str) -> str:
    mod = _frame_name(frame).split(":")[0]
    parts = mod.split(".")
    if parts[0] == "koordsched":
        return ".".join(parts[:3]) if parts[1] == "backends" else ".".join(parts[:2])
    return parts[0]


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


def summarize_cprofile(path: Path, top: int = 30) -> dict[str, Any]:
    """The functions with the most own time and the koordsched ones with the most cumulative time.

    The whole run is profiled (start-up too): read the shares of ``Scheduler.run`` and the write
    path against each other, not against the total.
    """
    import pstats

    stats = pstats.Stats(str(path))
    rows = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for (_, _, tt, _, _) in rows.values()) or 1e-9

    def name(fn: tuple[str, int, str]) -> str:
        file, line, func = fn
        return f"{_module(file)}:{func}:{line}" if file != "~" else func

    by_tt = sorted(rows.items(), key=lambda kv: -kv[1][2])[:top]
    by_ct = sorted(((fn, v) for fn, v in rows.items() if "koordsched" in fn[0]), key=lambda kv: -kv[1][3])[
        :top
    ]
    return {
        "file": str(path),
        "total_s": round(total, 2),
        "self": [(name(fn), round(v[2], 2), v[1]) for fn, v in by_tt],
        "cumulative_koordsched": [(name(fn), round(v[3], 2), v[1]) for fn, v in by_ct],
    }


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
        watcher.cancel()
        with contextlib.suppress(BaseException):
            await watcher
        return result
    finally:
        if spy is not None:
            spy.stop()
        if sched is not None:
            stop_scheduler(sched)
        await api.close()
        env.stop()


# ---------------------------------------------------------------------------------------------
# report


def _median(vals: list[float]) -> float:
    vals = sorted(vals)
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def _fmt(v: float | None) -> str:
    if v is None or v != v:  # None or NaN
        return "-"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def _verdict(r: dict[str, Any]) -> str:
    return "yes" if r.get("ok") else "NO: " + str(r.get("error", r.get("checks")))


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def markdown(results: list[dict[str, Any]]) -> str:
    """The headline (binder, koordsched's bundled profile, kube-scheduler: medians over repeats and
    the ratios), the labelled reduced profiles beside it, scheduler CPU per pod, then each run."""
    rate: dict[tuple[int, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    cpu: dict[tuple[int, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    total: dict[tuple[int, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        kind = kind_of(r)
        if r.get("pods_per_s"):
            rate[(r["nodes"], r["pods"])][kind].append(r["pods_per_s"])
        if r.get("cpu_ms_per_pod"):
            ms = r["cpu_ms_per_pod"]
            cpu[(r["nodes"], r["pods"])][kind].append(ms["scheduler"])
            total[(r["nodes"], r["pods"])][kind].append(ms["scheduler"] + ms["apiserver"] + ms["etcd"])
    present = [k for k in SCHEDULERS if any(k in g for g in rate.values())]
    lines = [
        "| nodes | pods | binder pods/s (ceiling) | koordsched pods/s (bundled profile) "
        "| kube-scheduler pods/s (default profile) | koordsched / binder | kube-scheduler / binder "
        "| koordsched / kube-scheduler |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (nodes, pods), by_kind in rate.items():
        med = {k: _median(v) for k, v in by_kind.items()}
        cells = [f"{_fmt(med.get(k))} (n={len(by_kind.get(k, []))})" for k in HEADLINE]
        b, k, ks = med.get("binder"), med.get("koordsched"), med.get("kube-scheduler")
        cells += [f"**{_ratio(k, b)}**", _ratio(ks, b), _ratio(k, ks)]
        lines.append(f"| {nodes:,} | {pods:,} | " + " | ".join(cells) + " |")
    extras = [k for k in present if k not in HEADLINE]
    if extras:
        lines += [
            "",
            "Beside it, labelled (not the headline): reduced profiles and the binder writing events",
            "",
            f"| nodes | pods | {' | '.join(f'{k} pods/s | {k} / binder' for k in extras)}"
            + (" | koordsched / binder-events |" if "binder-events" in extras else " |"),
            "|---:|---:|" + "---:|---:|" * len(extras) + ("---:|" if "binder-events" in extras else ""),
        ]
        for (nodes, pods), by_kind in rate.items():
            med = {k: _median(v) for k, v in by_kind.items()}
            cells = []
            for k in extras:
                cells += [
                    f"{_fmt(med.get(k))} (n={len(by_kind.get(k, []))})",
                    _ratio(med.get(k), med.get("binder")),
                ]
            if "binder-events" in extras:
                cells.append(_ratio(med.get("koordsched"), med.get("binder-events")))
            lines.append(f"| {nodes:,} | {pods:,} | " + " | ".join(cells) + " |")
    # CPU per pod is less sensitive than pods/s to what else the machine runs. Where the scheduler,
    # the API server and etcd share a CPU-bound machine, pods/s goes as 1 / their CPU per pod
    # together, so the binder's total over another's is the ratio that machine would show.
    lines += [
        "",
        "CPU ms per pod bound, scheduler and scheduler + kube-apiserver + etcd; "
        "CPU-bound ratio = binder's total / this one's",
        "",
        f"| nodes | pods | {' | '.join(f'{k} sched / total | CPU-bound ratio' for k in present)} |",
        "|---:|---:|" + "---:|---:|" * len(present),
    ]
    for (nodes, pods), by_kind in cpu.items():
        med = {k: _median(v) for k, v in by_kind.items()}
        tot = {k: _median(v) for k, v in total[(nodes, pods)].items()}
        cells = [
            f"{_fmt(med.get(k))} / {_fmt(tot.get(k))} | {_ratio(tot.get('binder'), tot.get(k))}"
            for k in present
        ]
        lines.append(f"| {nodes:,} | {pods:,} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| nodes | pods | scheduler | pods/s (10-90%) | attempt p50/p90/p99 ms | algorithm p50/p99 ms "
        "| time-to-bind from start p50/p99 s | start-up s | CPU ms/pod: sched / apiserver / etcd "
        "| CPU cores: sched / apiserver / etcd / bench / irq / other | sockets | Scheduled events | ok |",
        "|---:|---:|---|---:|---|---|---|---:|---|---|---:|---:|---|",
    ]
    for r in results:
        e2e, alg = r.get("e2e_scheduling_ms") or {}, r.get("algorithm_ms") or {}
        ttb = r.get("time_to_bind_from_start_ms") or {}
        busy = (r.get("cpu_bind_window") or {}).get("cores")
        cores = (
            " / ".join(_fmt(busy.get(k)) for k in ("scheduler", "apiserver", "etcd", "bench", "irq", "other"))
            if busy
            else "-"
        )
        ms = r.get("cpu_ms_per_pod")
        per_pod = " / ".join(_fmt(ms[k]) for k in ("scheduler", "apiserver", "etcd")) if ms else "-"
        attempt = " / ".join(_fmt(e2e.get(f"p{q}_ms")) for q in (50, 90, 99))
        algorithm = " / ".join(_fmt(alg.get(f"p{q}_ms")) for q in (50, 99))
        to_bind = " / ".join(_fmt(ttb[f"p{q}"] / 1000) if f"p{q}" in ttb else "-" for q in (50, 99))
        socks = (r.get("scheduler_sockets") or {}).get("sockets_seen", "-")
        events = (r.get("checks") or {}).get("events_by_reason")
        scheduled_events = events.get("Scheduled", 0) if events is not None else "-"
        lines.append(
            f"| {r['nodes']:,} | {r['pods']:,} | {kind_of(r)} "
            f"| {_fmt(r.get('pods_per_s'))} ({_fmt(r.get('pods_per_s_10_90'))}) | {attempt} | {algorithm} "
            f"| {to_bind} | {_fmt(r.get('startup_s'))} | {per_pod} | {cores} | {socks} "
            f"| {scheduled_events} | {_verdict(r)} |"
        )
    return "\n".join(lines)


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
