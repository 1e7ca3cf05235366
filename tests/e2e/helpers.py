"""What the end-to-end tests share: a small API client, object builders, polling, the audit log,
scheduler profiles, and the scheduler run in-process or as a subprocess.

The API is driven with plain aiohttp and the admin token (no generated models: what we send and
read is exactly the JSON on the wire). Every wait polls with a deadline; nothing sleeps for a
fixed time to make a result true.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import yaml

from tests.e2e.apiserver import REPO_ROOT, KubeEnv, _die_with_parent, bin_dir_or_skip, free_ports
from tests.e2e.objects import node, pod

T = TypeVar("T")

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

LEASE_NAMESPACE = "koordinator-system"
DEFAULT_PROFILE = REPO_ROOT / "config" / "koord-scheduler.yaml"

#: Generous: the suite must pass on a slow, loaded 2-core machine.
TIMEOUT = 45.0


# --- polling -------------------------------------------------------------------------------------


async def wait_for(
    probe: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = TIMEOUT,
    interval: float = 0.2,
    what: str = "condition",
    detail: Callable[[], str] | None = None,
) -> T:
    """Call ``probe`` until it returns something truthy; return that, or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = await probe()
        if last:
            return last
        if time.monotonic() > deadline:
            extra = f"\n{detail()}" if detail is not None else ""
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r}){extra}")
        await asyncio.sleep(interval)


# --- the API -------------------------------------------------------------------------------------


class ApiError(Exception):
    def __init__(self, method: str, path: str, status: int, body: bytes) -> None:
        self.status = status
        self.body = body
        try:
            self.message = json.loads(body).get("message", "")
        except (ValueError, AttributeError):
            self.message = body[:500].decode(errors="replace")
        super().__init__(f"{method} {path}: {status}: {self.message}")


class Api:
    """An authenticated session to the test apiserver (admin unless ``token`` is given)."""

    def __init__(self, env: KubeEnv, token: str | None = None) -> None:
        self.env = env
        self.token = token or env.admin_token
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Api:
        ctx = ssl.create_default_context(cafile=str(self.env.ca_file))
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ctx),
            headers={"Authorization": f"Bearer {self.token}", "Accept": JSON},
            timeout=aiohttp.ClientTimeout(total=30),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def reconnect(self) -> None:
        """Drop pooled connections (they died with a restarted apiserver) and open a new session."""
        await self.close()
        await self.__aenter__()

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, str] | None = None,
        content_type: str = JSON,
    ) -> Any:
        assert self._session is not None, "use Api as an async context manager"
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": content_type} if data is not None else {}
        async with self._session.request(
            method, self.env.url + path, data=data, params=params, headers=headers
        ) as resp:
            raw = await resp.read()
            if resp.status >= 300:
                raise ApiError(method, path, resp.status, raw)
            return json.loads(raw) if raw else None

    async def get(self, path: str, **params: str) -> Any:
        return await self.request("GET", path, params=params or None)

    async def get_or_none(self, path: str) -> Any:
        try:
            return await self.get(path)
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    async def post(self, path: str, body: Any) -> Any:
        return await self.request("POST", path, body)

    async def put(self, path: str, body: Any) -> Any:
        return await self.request("PUT", path, body)

    async def patch(self, path: str, body: Any, content_type: str = MERGE_PATCH) -> Any:
        return await self.request("PATCH", path, body, content_type=content_type)

    async def delete(self, path: str, *, grace: int | None = 0, missing_ok: bool = True) -> Any:
        params = {"gracePeriodSeconds": str(grace)} if grace is not None else None
        try:
            return await self.request("DELETE", path, params=params)
        except ApiError as err:
            if missing_ok and err.status == 404:
                return None
            raise

    # --- shortcuts ---

    async def pod(self, namespace: str, name: str) -> dict[str, Any]:
        pod: dict[str, Any] = await self.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        return pod

    async def pods(self, namespace: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = (await self.get(f"/api/v1/namespaces/{namespace}/pods"))["items"]
        return items

    async def create_pod(self, pod: dict[str, Any]) -> dict[str, Any]:
        ns = pod["metadata"]["namespace"]
        created: dict[str, Any] = await self.post(f"/api/v1/namespaces/{ns}/pods", pod)
        return created

    async def create_node(self, node: dict[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = await self.post("/api/v1/nodes", node)
        return created

    async def bind(self, namespace: str, name: str, node: str) -> None:
        await self.post(
            f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            },
        )

    async def events(self, namespace: str) -> list[dict[str, Any]]:
        """events.k8s.io/v1 Events in ``namespace``."""
        items: list[dict[str, Any]] = (
            await self.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
        )["items"]
        return items

    async def lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        lease: dict[str, Any] | None = await self.get_or_none(
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        )
        return lease

    async def ensure_namespace(self, name: str) -> None:
        try:
            await self.post("/api/v1/namespaces", {"metadata": {"name": name}})
        except ApiError as err:
            if err.status != 409:
                raise


# --- objects -------------------------------------------------------------------------------------


def condition(obj: dict[str, Any], type_: str = "PodScheduled") -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return dict(c)
    return None


def condition_message(obj: dict[str, Any], type_: str = "PodScheduled") -> str:
    c = condition(obj, type_)
    assert c is not None, f"no {type_} condition: {obj.get('status')}"
    return str(c.get("message", ""))


def node_of(obj: dict[str, Any]) -> str | None:
    name: str | None = (obj.get("spec") or {}).get("nodeName")
    return name


def events_for(
    events: list[dict[str, Any]], pod_obj: dict[str, Any], reason: str | None = None
) -> list[dict[str, Any]]:
    """The events regarding exactly this pod (by uid), optionally of one reason."""
    uid = pod_obj["metadata"]["uid"]
    return [
        e
        for e in events
        if (e.get("regarding") or {}).get("uid") == uid and (reason is None or e.get("reason") == reason)
    ]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


class Cluster:
    """One test's objects: its own namespace, and nodes named after it; all removed by :meth:`cleanup`."""

    def __init__(self, api: Api, namespace: str) -> None:
        self.api = api
        self.ns = namespace
        self.nodes: list[str] = []
        self.leases: list[tuple[str, str]] = []

    async def setup(self) -> Cluster:
        await self.api.post("/api/v1/namespaces", {"metadata": {"name": self.ns}})
        return self

    def node_name(self, short: str) -> str:
        return f"{self.ns}-{short}"

    async def add_node(self, short: str, cpu: str = "4", memory: str = "16Gi") -> str:
        name = self.node_name(short)
        await self.api.create_node(node(name, cpu, memory))
        self.nodes.append(name)
        return name

    async def delete_node(self, name: str) -> None:
        await self.api.delete(f"/api/v1/nodes/{name}")

    async def add_pod(self, name: str, **kw: Any) -> dict[str, Any]:
        return await self.api.create_pod(pod(self.ns, name, **kw))

    async def delete_pod(self, name: str) -> None:
        await self.api.delete(f"/api/v1/namespaces/{self.ns}/pods/{name}", grace=0)

    async def get_pod(self, name: str) -> dict[str, Any]:
        return await self.api.pod(self.ns, name)

    async def pods(self) -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in await self.api.pods(self.ns)}

    async def events(self) -> list[dict[str, Any]]:
        return await self.api.events(self.ns)

    async def wait_bound(self, names: list[str], timeout: float = TIMEOUT) -> dict[str, dict[str, Any]]:
        """Wait until every pod in ``names`` has a node; returns all pods by name."""
        seen: dict[str, dict[str, Any]] = {}

        async def probe() -> dict[str, dict[str, Any]] | None:
            nonlocal seen
            seen = await self.pods()
            return seen if all(node_of(seen.get(n, {})) for n in names) else None

        def detail() -> str:
            missing = [n for n in names if not node_of(seen.get(n, {}))]
            return "not bound: " + ", ".join(
                f"{n} ({json.dumps(condition(seen[n]))})" if n in seen else f"{n} (missing)" for n in missing
            )

        return await wait_for(probe, timeout=timeout, what=f"pods {names} to be bound", detail=detail)

    async def wait_condition(
        self, name: str, status: str, reason: str | None = None, timeout: float = TIMEOUT
    ) -> dict[str, Any]:
        async def probe() -> dict[str, Any] | None:
            p = await self.get_pod(name)
            c = condition(p)
            if c and c.get("status") == status and (reason is None or c.get("reason") == reason):
                return p
            return None

        return await wait_for(probe, timeout=timeout, what=f"pod {name} PodScheduled={status} {reason or ''}")

    async def cleanup(self) -> None:
        api = self.api
        with contextlib.suppress(ApiError):
            for p in await api.pods(self.ns):
                await api.delete(f"/api/v1/namespaces/{self.ns}/pods/{p['metadata']['name']}", grace=0)
        for name in self.nodes:
            with contextlib.suppress(ApiError):
                await api.delete(f"/api/v1/nodes/{name}")
        for ns, name in self.leases:
            with contextlib.suppress(ApiError):
                await api.delete(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}")
        with contextlib.suppress(ApiError):
            await api.request("DELETE", f"/apis/events.k8s.io/v1/namespaces/{self.ns}/events")
        # No namespace controller runs here: drop the "kubernetes" finalizer ourselves once empty.
        with contextlib.suppress(ApiError):
            await api.delete(f"/api/v1/namespaces/{self.ns}", grace=None)
            ns = await api.get_or_none(f"/api/v1/namespaces/{self.ns}")
            if ns is not None:
                ns["spec"]["finalizers"] = []
                await api.put(f"/api/v1/namespaces/{self.ns}/finalize", ns)


# --- the audit log -------------------------------------------------------------------------------

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    users: ["system:apiserver"]
  - level: None
    verbs: ["watch"]
  - level: Metadata
"""


@dataclass
class AuditEvent:
    user: str
    verb: str
    code: int
    resource: str
    subresource: str
    namespace: str
    name: str
    uri: str
    stage: str
    raw: dict[str, Any] = field(repr=False)


class AuditLog:
    """kube-apiserver's JSON audit log, read from an offset (so each test sees only its own part)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def events(self, since: int = 0) -> list[AuditEvent]:
        try:
            with open(self.path, "rb") as f:
                f.seek(since)
                data = f.read()
        except FileNotFoundError:
            return []
        out = []
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except ValueError:
                continue  # a line being written
            if raw.get("stage") != "ResponseComplete":
                continue
            ref = raw.get("objectRef") or {}
            out.append(
                AuditEvent(
                    user=(raw.get("user") or {}).get("username", ""),
                    verb=raw.get("verb", ""),
                    code=int((raw.get("responseStatus") or {}).get("code") or 0),
                    resource=ref.get("resource", ""),
                    subresource=ref.get("subresource", ""),
                    namespace=ref.get("namespace", ""),
                    name=ref.get("name", ""),
                    uri=raw.get("requestURI", ""),
                    stage=raw.get("stage", ""),
                    raw=raw,
                )
            )
        return out

    def bindings(self, namespace: str, since: int = 0, user: str | None = None) -> list[AuditEvent]:
        return [
            e
            for e in self.events(since)
            if e.resource == "pods"
            and e.subresource == "binding"
            and e.verb == "create"
            and e.namespace == namespace
            and (user is None or e.user == user)
        ]


def audited_kube_env(work_dir: Path, audit_log: AuditLog, users: dict[str, list[str]]) -> KubeEnv:
    """An etcd + kube-apiserver (to be entered) writing :data:`AUDIT_POLICY`'s requests to ``audit_log``."""
    bin_dir = bin_dir_or_skip()
    policy = work_dir / "audit-policy.yaml"
    policy.write_text(AUDIT_POLICY)
    return KubeEnv(
        bin_dir=bin_dir,
        extra_users=users,
        extra_apiserver_args=[
            f"--audit-policy-file={policy}",
            f"--audit-log-path={audit_log.path}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
        ],
    )


# --- profiles ------------------------------------------------------------------------------------


def write_profile(
    path: Path,
    *,
    lease_name: str,
    lease_namespace: str = LEASE_NAMESPACE,
    lease_duration: str = "4s",
    renew_deadline: str = "3s",
    retry_period: str = "1s",
    leader_elect: bool = True,
) -> Path:
    """The shipped profile (config/koord-scheduler.yaml) with this test's leader election settings."""
    cfg = yaml.safe_load(DEFAULT_PROFILE.read_text())
    le = cfg.setdefault("leaderElection", {})
    le.update(
        leaderElect=leader_elect,
        resourceName=lease_name,
        resourceNamespace=lease_namespace,
        leaseDuration=lease_duration,
        renewDeadline=renew_deadline,
        retryPeriod=retry_period,
    )
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


# --- metrics -------------------------------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def parse_metrics(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def metric(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def kubeconfig_token(kubeconfig: Path) -> str | None:
    """The bearer token of a kubeconfig's first user (the e2e kubeconfigs have one)."""
    try:
        cfg = yaml.safe_load(kubeconfig.read_text())
        token = cfg["users"][0]["user"].get("token")
    except (OSError, yaml.YAMLError, KeyError, IndexError, TypeError, AttributeError):
        return None
    return token if isinstance(token, str) else None


async def serving_request(
    port: int, path: str, *, token: str | None = None, method: str = "GET"
) -> tuple[int, bytes] | None:
    """A request to the scheduler's HTTPS port (its certificate is self-signed: not verified)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as s,
            s.request(method, f"https://127.0.0.1:{port}{path}", headers=headers, ssl=False) as resp,
        ):
            return resp.status, await resp.read()
    except (TimeoutError, aiohttp.ClientError, OSError):
        return None


async def scrape(
    port: int, token: str | None = None
) -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
    """The scheduler's /metrics (read with ``token``), or None when it does not answer 200."""
    answer = await serving_request(port, "/metrics", token=token)
    if answer is None or answer[0] != 200:
        return None
    return parse_metrics(answer[1].decode())


async def http_status(port: int, path: str, token: str | None = None) -> int | None:
    answer = await serving_request(port, path, token=token)
    return None if answer is None else answer[0]


# --- the scheduler, in this process ----------------------------------------------------------------


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class InProcessScheduler:
    task: asyncio.Task[int]
    stop: asyncio.Event
    port: int
    log: _Collect
    #: The scheduler's own token: it may read its /metrics (the e2e identities are system:masters).
    token: str | None = None

    def assert_running(self) -> None:
        if self.task.done():
            exc = None if self.task.cancelled() else self.task.exception()
            rc = None if exc is not None or self.task.cancelled() else self.task.result()
            raise AssertionError(
                f"the scheduler stopped early (exit status {rc}, {exc!r})\n{self.log_text()}"
            )

    def log_text(self, level: int = logging.DEBUG) -> str:
        fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
        return "\n".join(fmt.format(r) for r in self.log.records if r.levelno >= level)

    def problems(self, expected: tuple[str, ...] = ()) -> list[str]:
        """ERROR records and anything logged with a traceback, less the ERROR lines (without a
        traceback) whose message is in ``expected``: a test that provokes a failure kube-scheduler
        logs at error level (a 409 on bind: "Error scheduling pod; retrying") names it there."""
        return [
            f"{r.levelname} {r.name}: {r.getMessage()}" + (" (with traceback)" if r.exc_info else "")
            for r in self.log.records
            if (r.levelno >= logging.ERROR or r.exc_info) and (r.exc_info or r.getMessage() not in expected)
        ]

    def messages(self, level: int = logging.DEBUG) -> list[str]:
        return [r.getMessage() for r in self.log.records if r.levelno >= level]

    async def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
        return await scrape(self.port, self.token)


@contextlib.asynccontextmanager
async def scheduler_in_process(
    config: Path, kubeconfig: Path, flags: Any = None
) -> AsyncIterator[InProcessScheduler]:
    """``run_scheduler`` in a task; stopped gracefully (exit status 0 asserted) on the way out;
    ``flags``: kube-scheduler's and koord-scheduler's flags (a ``RunFlags``), as ``run`` gives them."""
    from koordsched.backends.kube.app import run_scheduler

    handler = _Collect()
    logger = logging.getLogger("koordsched")
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    stop = asyncio.Event()
    port = free_ports(1)[0]
    task = asyncio.create_task(
        run_scheduler(
            str(config),
            kubeconfig=str(kubeconfig),
            bind_address="127.0.0.1",
            port=port,
            stop=stop,
            flags=flags,
        ),
        name="e2e-scheduler",
    )
    sched = InProcessScheduler(task, stop, port, handler, kubeconfig_token(kubeconfig))
    ok = False
    try:
        await wait_for(
            lambda: _ready_or_dead(sched),
            what="the scheduler to be ready (/readyz)",
            detail=sched.log_text,
        )
        sched.assert_running()
        yield sched
        ok = True
    finally:
        stop.set()
        try:
            rc = await asyncio.wait_for(asyncio.shield(task), 30)
        except BaseException:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            raise
        finally:
            logger.removeHandler(handler)
            logger.setLevel(old_level)
        if ok:
            assert rc == 0, f"the scheduler exited with status {rc}\n{sched.log_text()}"


async def _ready_or_dead(sched: InProcessScheduler) -> bool:
    if sched.task.done():
        return True
    return await http_status(sched.port, "/readyz") == 200


# --- the scheduler, as a subprocess ----------------------------------------------------------------

_IDENTITY = re.compile(r"attempting to acquire as (\S+)")


class SchedulerProcess:
    """``python -m koordsched run`` with its log in a file; stop() always reaps it."""

    def __init__(
        self, name: str, config: Path, kubeconfig: Path, log_dir: Path, extra_args: Sequence[str] = ()
    ) -> None:
        self.name = name
        self.port = free_ports(1)[0]
        self.token = kubeconfig_token(kubeconfig)
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        argv = [
            sys.executable,
            "-m",
            "koordsched",
            "--log-level",
            "info",
            "run",
            "--config",
            str(config),
            "--kubeconfig",
            str(kubeconfig),
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            str(self.port),
            *extra_args,
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        self.popen = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )

    def __repr__(self) -> str:
        return f"<SchedulerProcess {self.name} pid={self.popen.pid} port={self.port}>"

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    @property
    def identity(self) -> str | None:
        m = _IDENTITY.search(self.log_text())
        return m.group(1) if m else None

    def signal(self, sig: signal.Signals) -> None:
        if self.alive:
            os.kill(self.popen.pid, sig)

    async def wait_exit(self, timeout: float = TIMEOUT) -> int:
        async def probe() -> int | None:
            rc = self.popen.poll()
            return None if rc is None else rc + 1000  # truthy even for 0

        rc = await wait_for(probe, timeout=timeout, what=f"{self.name} to exit", detail=self.tail)
        return rc - 1000

    def tail(self, lines: int = 60) -> str:
        return f"--- {self.name} log ---\n" + "\n".join(self.log_text().splitlines()[-lines:])

    async def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
        return await scrape(self.port, self.token)

    async def scheduled(self) -> float:
        samples = await self.metrics()
        if samples is None:
            return -1.0
        return metric(samples, "scheduler_schedule_attempts_total", result="scheduled")

    async def wait_ready(self, timeout: float = TIMEOUT) -> None:
        async def probe() -> bool:
            if not self.alive:
                raise AssertionError(f"{self.name} exited with {self.popen.returncode}\n{self.tail()}")
            return await http_status(self.port, "/healthz") == 200 and self.identity is not None

        await wait_for(probe, timeout=timeout, what=f"{self.name} to serve /healthz", detail=self.tail)

    def stop(self, grace: float = 15.0) -> int | None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)
        self._log.close()
        return self.popen.returncode


@contextlib.contextmanager
def scheduler_processes() -> Iterator[list[SchedulerProcess]]:
    """Collects processes started in the block and stops every one of them on the way out."""
    procs: list[SchedulerProcess] = []
    try:
        yield procs
    finally:
        for p in procs:
            p.stop()


def forbidden_lines(text: str) -> list[str]:
    # Not a log timestamp's milliseconds ("16:03:52,403").
    return [line for line in text.splitlines() if re.search(r"(?<![,.:])\b403\b|[Ff]orbidden", line)]
