"""Peak memory of ``koordsched simulate`` and ``koordsched run`` on a large SchedulingBasic-shaped cluster.

``simulate``: writes the cluster as one manifest file (N nodes of 32 CPU, 256Gi, 110 pods; P
pending pods of 100m CPU and 500Mi, the shapes ``bench/e2e.py`` creates) and runs
``python -m koordsched simulate FILE --output json`` in a child process, loading, scheduling and
report included; the peak is the child's own (``ru_maxrss`` from ``wait4``).

``run``: starts etcd (on tmpfs) and kube-apiserver 1.20.2 (``tests/e2e/apiserver.py``), creates
N nodes and P pods already bound round-robin to them (the cluster a scheduler restarts into),
then for each scheduler creates ``--pending`` more pods, starts it (``koordsched run`` with the
bundled profile, then kube-scheduler 1.20.2 with its default plugins), waits until it has
bound them, and reads its ``VmHWM`` (peak RSS) and ``VmRSS`` from /proc (5 s after the last
bind). Each scheduler after the first also holds the earlier ones' pending pods, now bound
(``pods_held``). ``server_cpu_s`` is the CPU kube-apiserver and etcd used from the scheduler's
start until its pods were bound, the cost of its lists (koordsched pages them from etcd;
kube-scheduler lists from the watch cache); ``synced_after_s`` is koordsched's own figure.
``--list-cost`` first lists every pod both ways, with the wall time, the servers' CPU and the
largest page of each (``--schedulers ""`` for that alone).

    .venv/bin/python bench/memory.py simulate --nodes 5000 --pods 150000 [--base ../old-tree]
    .venv/bin/python bench/memory.py run --nodes 5000 --pods 150000 --pending 1000 \
        [--schedulers koordsched-base,koordsched,kube-scheduler --base ../old-tree]
    .venv/bin/python bench/memory.py run --nodes 5000 --pods 150000 --schedulers "" --list-cost
    .venv/bin/python bench/memory.py write --nodes 5000 --pods 150000 --out cluster.yaml

One JSON line per measurement goes to stdout. Results: bench/README.md, "Memory".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

PYTHON = REPO_ROOT / ".venv" / "bin" / "python"
BUNDLED_PROFILE = REPO_ROOT / "config" / "koord-scheduler.yaml"
KUBE_PROFILE = REPO_ROOT / "bench" / "e2e_profiles" / "kube-scheduler.yaml"
SCHEDULER_NAME = "koord-scheduler"
NAMESPACE = "bench"
MIB = 1024 * 1024

_NODE = """---
apiVersion: v1
kind: Node
metadata:
  name: node-{i}
  labels:
    kubernetes.io/hostname: node-{i}
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
spec: {{}}
status:
  capacity: {{cpu: "32", memory: 256Gi, pods: "110"}}
  allocatable: {{cpu: "32", memory: 256Gi, pods: "110"}}
  conditions:
  - {{type: Ready, status: "True", reason: KubeletReady, message: bench node}}
"""
_POD = """---
apiVersion: v1
kind: Pod
metadata:
  name: pod-{i}
  namespace: bench
  uid: 6f1c2a3e-0000-4000-8000-{i:012d}
  labels: {{app: bench}}
spec:
  schedulerName: koord-scheduler
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.2
    resources:
      requests: {{cpu: 100m, memory: 500Mi}}
"""


def write_cluster(path: Path, nodes: int, pods: int) -> None:
    """The cluster as one multi-document manifest (written as text: a list of dicts this size
    would cost the bench more memory than it measures)."""
    with open(path, "w") as f:
        for i in range(nodes):
            f.write(_NODE.format(i=i))
        for i in range(pods):
            f.write(_POD.format(i=i))


def _python() -> str:
    return str(PYTHON if PYTHON.exists() else Path(sys.executable))


def measure_simulate(
    nodes: int, pods: int, workdir: Path, profile: Path | None, tree: Path = REPO_ROOT
) -> dict[str, Any]:
    path = workdir / f"basic-{nodes}n-{pods}p.yaml"
    write_cluster(path, nodes, pods)
    out_path = workdir / "report.json"
    argv = [_python(), "-m", "koordsched", "simulate", str(path), "--output", "json"]
    if profile is not None:
        argv += ["--config", str(profile)]
    env = dict(os.environ, PYTHONPATH=str(tree))
    t0 = time.monotonic()
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, env=env, cwd=tree)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    code = os.waitstatus_to_exitcode(status)
    result: dict[str, Any] = {
        "what": "simulate",
        "nodes": nodes,
        "pods": pods,
        "tree": str(tree),
        "profile": str(profile or "bundled"),
        "file_mib": round(path.stat().st_size / MIB, 1),
        "exit": code,
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),  # ru_maxrss is in KiB on Linux
        "wall_s": round(wall, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
    }
    if code == 0:
        summary = json.loads(out_path.read_bytes())["summary"]
        result["scheduled"] = summary["scheduled"]
        result["scheduling_s"] = round(summary["wallSeconds"], 1)
    out_path.unlink(missing_ok=True)
    path.unlink(missing_ok=True)
    return result


# ---------------------------------------------------------------------------------------------
# run


def proc_memory(pid: int) -> dict[str, float]:
    """VmHWM (peak RSS) and VmRSS of a process, in MiB."""
    out: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmHWM:", "VmRSS:")):
                key, value = line.split(":", 1)
                out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


def proc_cpu_s(pid: int) -> float:
    """User plus system CPU seconds a process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu_s(env: Any) -> float:
    """CPU seconds kube-apiserver and etcd have used so far: what a scheduler's lists cost them."""
    procs = (env._apiserver, env._etcd)  # the bench reads its own child processes
    return sum(proc_cpu_s(p.popen.pid) for p in procs if p is not None)


def _synced_after(log_path: Path) -> float | None:
    """koordsched's "caches synced after N s" from its log, if it logged one."""
    marker = "caches synced after "
    for line in log_path.read_text(errors="replace").splitlines():
        if marker in line:
            return float(line.split(marker, 1)[1].split("s", 1)[0])
    return None


def _node_body(i: int) -> dict[str, Any]:
    alloc = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    name = f"node-{i}"
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {
            "capacity": alloc,
            "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "bench"}],
        },
    }


def _pod_body(name: str, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME,
        "containers": [
            {
                "name": "pause",
                "image": "registry.k8s.io/pause:3.2",
                "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
            }
        ],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "bench"}},
        "spec": spec,
    }


class _Api:
    """POSTs and GETs as the admin user, ``concurrency`` requests in flight."""

    def __init__(self, env: Any, concurrency: int) -> None:
        import aiohttp

        ctx = ssl.create_default_context(cafile=str(env.ca_file))
        self.base = env.url
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ctx, limit=concurrency + 4),
            headers={"Authorization": f"Bearer {env.admin_token}", "Content-Type": "application/json"},
            timeout=aiohttp.ClientTimeout(total=120),
        )
        self.concurrency = concurrency

    async def post(self, path: str, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        for attempt in range(30):
            async with self.session.post(self.base + path, data=data) as resp:
                if resp.status in (200, 201):
                    await resp.read()
                    return
                text = await resp.text()
                if resp.status in (429, 500, 503, 504) and attempt < 29:
                    await asyncio.sleep(0.05 * (attempt + 1))
                    continue
                raise RuntimeError(f"POST {path}: HTTP {resp.status}: {text[:300]}")

    async def create_all(self, path: str, bodies: Any) -> float:
        t0 = time.monotonic()
        it = iter(bodies)

        async def worker() -> None:
            for body in it:
                await self.post(path, body)

        await asyncio.gather(*(worker() for _ in range(self.concurrency)))
        return time.monotonic() - t0

    async def pending(self) -> int:
        """Pods of the bench namespace not bound yet."""
        url = f"{self.base}/api/v1/namespaces/{NAMESPACE}/pods?fieldSelector=spec.nodeName%3D"
        async with self.session.get(url) as resp:
            body = await resp.json()
            if resp.status != 200:
                raise RuntimeError(f"GET pending pods: HTTP {resp.status}: {body}")
            return len(body.get("items") or [])

    async def close(self) -> None:
        await self.session.close()


class _ListHead(msgspec.Struct):
    metadata: dict[str, Any] = {}
    items: list[msgspec.Raw] = []


async def list_cost(api: _Api, env: Any, page_size: int) -> list[dict[str, Any]]:
    """One list of every pod as the pod reflector asks for it, both ways: at resourceVersion 0
    (the watch cache, which ignores ``limit``: client-go's first list) and as a consistent read
    in pages (koordsched's). Wall time, the API server's and etcd's CPU, pages and the largest."""
    selector = "fieldSelector=" + quote("status.phase!=Succeeded,status.phase!=Failed")
    out = []
    for how, first in (("watch cache (resourceVersion=0)", "&resourceVersion=0"), ("consistent, paged", "")):
        cpu0, t0 = server_cpu_s(env), time.monotonic()
        pages = items = largest = 0
        cont = ""
        while True:
            query = f"{selector}&limit={page_size}" + (f"&continue={quote(cont)}" if cont else first)
            async with api.session.get(f"{api.base}/api/v1/pods?{query}") as resp:
                body = await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"list pods: HTTP {resp.status}: {body[:300]!r}")
            page = msgspec.json.decode(body, type=_ListHead)
            pages, items, largest = pages + 1, items + len(page.items), max(largest, len(body))
            cont = page.metadata.get("continue") or ""
            del body, page
            if not cont:
                break
        out.append(
            {
                "what": "list",
                "how": how,
                "pods": items,
                "pages": pages,
                "largest_page_mib": round(largest / MIB, 1),
                "wall_s": round(time.monotonic() - t0, 1),
                "server_cpu_s": round(server_cpu_s(env) - cpu0, 1),
            }
        )
    return out


def _scheduler_config(kind: str, env: Any, workdir: Path, port: int, tree: Path) -> Path:
    import yaml

    template = tree / "config" / "koord-scheduler.yaml" if kind.startswith("koordsched") else KUBE_PROFILE
    cfg = yaml.safe_load(template.read_text())
    cfg["clientConnection"] = {"kubeconfig": str(env.kubeconfig_path), "qps": 5000, "burst": 5000}
    cfg["leaderElection"] = {"leaderElect": False}
    if kind == "kube-scheduler":
        cfg["healthzBindAddress"] = cfg["metricsBindAddress"] = f"127.0.0.1:{port}"
    path = workdir / f"{kind}-memory.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _argv(kind: str, config: Path, env: Any, port: int) -> list[str]:
    if kind.startswith("koordsched"):
        return [
            _python(),
            "-m",
            "koordsched",
            "run",
            "--config",
            str(config),
            "--kubeconfig",
            str(env.kubeconfig_path),
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            str(port),
            "--log-level",
            "info",  # for its "caches synced after" line
        ]
    return [str(env.scheduler_binary), f"--config={config}", "--secure-port=0", "--v=1"]


async def _one_scheduler(
    kind: str, api: _Api, env: Any, batch: int, args: argparse.Namespace
) -> dict[str, Any]:
    from tests.e2e.apiserver import free_ports

    pending, timeout, log_dir = args.pending, args.timeout, args.log_dir
    tree: Path = args.base if kind == "koordsched-base" else REPO_ROOT
    await api.create_all(
        f"/api/v1/namespaces/{NAMESPACE}/pods", (_pod_body(f"pending-{batch}-{i}") for i in range(pending))
    )
    (port,) = free_ports(1)
    config = _scheduler_config(kind, env, env.workdir, port, tree)
    cpu0 = server_cpu_s(env)
    log_path = log_dir / f"memory-{kind}.log"
    with open(log_path, "wb") as log:  # noqa: ASYNC230 - before the measured part
        proc = subprocess.Popen(  # noqa: ASYNC220 - fork/exec, nothing to await
            _argv(kind, config, env, port),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(os.environ, PYTHONPATH=str(tree)),
            cwd=tree,
        )
    result: dict[str, Any] = {"what": "run", "scheduler": kind, "pending": pending, "log": str(log_path)}
    if kind.startswith("koordsched"):
        result["tree"] = str(tree)
    t0 = time.monotonic()
    try:
        left = pending
        while left:
            if proc.poll() is not None:
                result["error"] = f"{kind} exited with status {proc.returncode}; see {log_path}"
                return result
            if time.monotonic() - t0 > timeout:
                result["error"] = f"timeout: {left} pods still pending after {timeout:.0f} s"
                break
            await asyncio.sleep(2.0)
            left = await api.pending()
        result["bound_after_s"] = round(time.monotonic() - t0, 1)
        # The API server's and etcd's CPU from the scheduler's start until its pods were bound
        # (its lists, its watches, the 1,000 binds and status writes, and this bench's polling).
        result["server_cpu_s"] = round(server_cpu_s(env) - cpu0, 1)
        synced = _synced_after(log_path)
        if synced is not None:
            result["synced_after_s"] = synced
        await asyncio.sleep(5.0)  # what it holds once the work is done
        result.update(proc_memory(proc.pid))
        result["peak_rss_mib"] = result.pop("VmHWM", None)
        result["rss_mib"] = result.pop("VmRSS", None)
        return result
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


async def measure_run(args: argparse.Namespace) -> list[dict[str, Any]]:
    from tests.e2e.apiserver import KubeEnv

    env = KubeEnv(etcd_on_tmpfs=True, verbosity=0)
    env.start()
    api = _Api(env, args.concurrency)
    out: list[dict[str, Any]] = []
    try:
        await api.post(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        t_nodes = await api.create_all("/api/v1/nodes", (_node_body(i) for i in range(args.nodes)))
        bodies = (_pod_body(f"pod-{i}", f"node-{i % args.nodes}") for i in range(args.pods))
        t_pods = await api.create_all(f"/api/v1/namespaces/{NAMESPACE}/pods", bodies)
        created = {"nodes": args.nodes, "bound_pods": args.pods, "create_s": [round(t_nodes), round(t_pods)]}
        print(json.dumps({"what": "cluster", **created}), file=sys.stderr, flush=True)
        if args.list_cost:
            for r in await list_cost(api, env, 500):
                out.append(r)
                print(json.dumps(r), flush=True)
        for batch, kind in enumerate(k for k in args.schedulers.split(",") if k):
            r = await _one_scheduler(kind, api, env, batch, args)
            r.update(nodes=args.nodes, pods_held=args.pods + args.pending * (batch + 1))
            out.append(r)
            print(json.dumps(r), flush=True)
        return out
    finally:
        await api.close()
        env.stop()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write the cluster manifest only")
    s = sub.add_parser("simulate", help="peak RSS of koordsched simulate")
    r = sub.add_parser("run", help="peak RSS of koordsched run and kube-scheduler against a real API server")
    for p in (w, s, r):
        p.add_argument("--nodes", type=int, default=5000)
        p.add_argument("--pods", type=int, default=150_000)
    w.add_argument("--out", type=Path, required=True)
    s.add_argument("--config", type=Path, default=None, help="a profile (default: the bundled one)")
    s.add_argument("--base", type=Path, default=None, help="also measure this source tree, first")
    r.add_argument("--pending", type=int, default=1000, help="pods each scheduler must bind (default 1000)")
    r.add_argument(
        "--schedulers",
        default="koordsched,kube-scheduler",
        help="in order, from koordsched, koordsched-base (the tree --base names) and kube-scheduler",
    )
    r.add_argument("--base", type=Path, default=None, help="another source tree, for koordsched-base")
    r.add_argument(
        "--list-cost",
        action="store_true",
        help="first list every pod from the watch cache and as a paged consistent read, and report both",
    )
    r.add_argument("--concurrency", type=int, default=64)
    r.add_argument("--timeout", type=float, default=900.0)
    r.add_argument("--log-dir", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    if getattr(args, "base", None) is not None:
        args.base = args.base.resolve()
    if args.command == "write":
        write_cluster(args.out, args.nodes, args.pods)
        return 0
    if args.command == "simulate":
        trees = [args.base, REPO_ROOT] if args.base is not None else [REPO_ROOT]
        codes = []
        for tree in trees:
            with tempfile.TemporaryDirectory(prefix="koordsched-memory-") as tmp:
                result = measure_simulate(args.nodes, args.pods, Path(tmp), args.config, tree)
            print(json.dumps(result), flush=True)
            codes.append(result["exit"])
        return 0 if not any(codes) else 1
    results = asyncio.run(measure_run(args))
    return 0 if results and all("error" not in x for x in results) else 1


if __name__ == "__main__":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(4096, hard)), hard))
    sys.exit(main())
