"""A real control plane for end-to-end tests: etcd plus kube-apiserver 1.20, run as subprocesses.

The binaries come from ``scripts/kube-env install`` (Debian's etcd-server, and kube-apiserver /
kube-scheduler built from Debian's ``kubernetes`` source package, cached outside the repository).

    with KubeEnv(extra_users=[("koordsched", ["koordsched:scheduler"])]) as env:
        env.kubeconfig_path          # admin (system:masters) kubeconfig, token auth, pinned CA
        env.kubeconfig_for("koordsched")
        env.restart_apiserver()      # same etcd, same port, same certificate and tokens

Everything (etcd data, certificates, token file, logs) lives in one temporary work dir, removed on
``stop()`` unless the start failed or ``keep_workdir`` is set (or ``KOORDSCHED_KEEP_KUBE_ENV=1``).
Processes are killed on ``stop()``, at interpreter exit, and (when started from the main thread)
by the kernel if this Python process dies.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

REPO_ROOT = Path(__file__).resolve().parents[2]
KUBE_ENV_SCRIPT = REPO_ROOT / "scripts" / "kube-env"
REQUIRE_ENV = "KOORDSCHED_REQUIRE_E2E"
BIN_ENV = "KOORDSCHED_KUBE_BIN"
ADMIN_USER = "koordsched-e2e-admin"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
LOG_TAIL_LINES = 40

TokenUsers = Mapping[str, Sequence[str]] | Iterable[tuple[str, Sequence[str]]]


class KubeEnvUnavailable(RuntimeError):
    """The binaries are not installed (run ``scripts/kube-env install``)."""


class KubeEnvError(RuntimeError):
    """etcd or kube-apiserver failed to start or to become ready."""


def e2e_required() -> bool:
    """True when ``KOORDSCHED_REQUIRE_E2E`` is set (to anything but empty/0/false/no)."""
    return os.environ.get(REQUIRE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def find_bin_dir() -> Path:
    """The directory holding kube-apiserver and kube-scheduler.

    ``KOORDSCHED_KUBE_BIN`` wins; otherwise ``scripts/kube-env bin`` decides.
    """
    override = os.environ.get(BIN_ENV)
    if override:
        path = Path(override)
        if not (path / "kube-apiserver").is_file():
            raise KubeEnvUnavailable(f"{BIN_ENV}={override} holds no kube-apiserver")
        return path
    try:
        proc = subprocess.run(
            [str(KUBE_ENV_SCRIPT), "bin"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError as exc:
        raise KubeEnvUnavailable(f"cannot run {KUBE_ENV_SCRIPT}: {exc}") from exc
    if proc.returncode != 0:
        why = proc.stderr.strip() or f"exit status {proc.returncode}"
        raise KubeEnvUnavailable(f"scripts/kube-env bin failed: {why}")
    return Path(proc.stdout.strip().splitlines()[-1])


def bin_dir_or_skip() -> Path:
    """For pytest fixtures: the bin dir, else skip (or fail when ``KOORDSCHED_REQUIRE_E2E`` is set)."""
    import pytest

    try:
        return find_bin_dir()
    except KubeEnvUnavailable as exc:
        if e2e_required():
            pytest.fail(f"{REQUIRE_ENV} is set but the e2e control plane is unavailable: {exc}")
        pytest.skip(f"e2e control plane not installed: {exc}")


def find_etcd(bin_dir: Path | None = None) -> Path:
    if bin_dir is not None and (bin_dir / "etcd").is_file():
        return bin_dir / "etcd"
    found = shutil.which("etcd") or ("/usr/bin/etcd" if Path("/usr/bin/etcd").is_file() else None)
    if found is None:
        raise KubeEnvUnavailable("etcd not found on PATH (run scripts/kube-env install)")
    return Path(found)


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (held open together so they differ)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"<cannot read {path}: {exc}>"
    return "\n".join(text.splitlines()[-lines:])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class _Proc:
    def __init__(self, name: str, argv: list[str], log_path: Path) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self._log: IO[bytes] = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._log.write(f"\n==== {time.strftime('%H:%M:%S')} starting {name}\n".encode())
        self._log.flush()
        # PDEATHSIG fires when the creating *thread* exits: only safe from the main thread.
        main = threading.current_thread() is threading.main_thread()
        self.popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if main else None,
        )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)
        self._log.close()


class KubeEnv:
    """etcd + kube-apiserver on free loopback ports, with token auth and RBAC."""

    def __init__(
        self,
        *,
        bin_dir: Path | str | None = None,
        extra_users: TokenUsers = (),
        workdir: Path | str | None = None,
        keep_workdir: bool | None = None,
        etcd_on_tmpfs: bool = False,
        max_requests_inflight: int = 3000,
        max_mutating_requests_inflight: int = 1000,
        extra_apiserver_args: Sequence[str] = (),
        ready_timeout: float = 60.0,
        verbosity: int = 1,
    ) -> None:
        self._bin_dir = Path(bin_dir) if bin_dir is not None else None
        self._workdir_arg = Path(workdir) if workdir is not None else None
        if keep_workdir is None:
            keep_workdir = os.environ.get("KOORDSCHED_KEEP_KUBE_ENV", "") not in ("", "0")
        self.keep_workdir = keep_workdir
        self.etcd_on_tmpfs = etcd_on_tmpfs
        self.max_requests_inflight = max_requests_inflight
        self.max_mutating_requests_inflight = max_mutating_requests_inflight
        self.extra_apiserver_args = list(extra_apiserver_args)
        self.ready_timeout = ready_timeout
        self.verbosity = verbosity

        self.admin_token = secrets.token_hex(24)
        # name -> (token, groups); the admin is a system:masters member, RBAC does the rest.
        self._users: dict[str, tuple[str, tuple[str, ...]]] = {
            ADMIN_USER: (self.admin_token, ("system:masters",))
        }
        items = extra_users.items() if isinstance(extra_users, Mapping) else extra_users
        for name, groups in items:
            self._register_user(name, groups)

        self.workdir: Path | None = None
        self.etcd_port = 0
        self.etcd_peer_port = 0
        self.port = 0
        self._etcd: _Proc | None = None
        self._apiserver: _Proc | None = None
        self._etcd_data: Path | None = None
        self._ca_pem: bytes | None = None
        self._start_failed = False
        self._atexit_registered = False

    # ---- public surface -------------------------------------------------------------------

    @property
    def bin_dir(self) -> Path:
        if self._bin_dir is None:
            self._bin_dir = find_bin_dir()
        return self._bin_dir

    @property
    def scheduler_binary(self) -> Path:
        return self.bin_dir / "kube-scheduler"

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def kubeconfig_path(self) -> Path:
        return self._kubeconfig_file(ADMIN_USER)

    @property
    def apiserver_log(self) -> Path:
        return self._dir / "kube-apiserver.log"

    @property
    def etcd_log(self) -> Path:
        return self._dir / "etcd.log"

    @property
    def ca_file(self) -> Path:
        """PEM bundle that verifies the apiserver's self-signed serving certificate."""
        return self._dir / "ca.crt"

    @property
    def running(self) -> bool:
        return self._apiserver is not None and self._apiserver.alive()

    @property
    def users(self) -> dict[str, tuple[str, ...]]:
        return {name: groups for name, (_, groups) in self._users.items()}

    def token(self, name: str) -> str:
        return self._users[name][0]

    def add_token_user(self, name: str, groups: Sequence[str] = ()) -> str:
        """Register a token user and return its token.

        The token file is only read at apiserver start: before ``start()`` this is free, while
        running it rewrites the file and restarts the apiserver (which drops open watches).
        """
        token = self._register_user(name, groups)
        if self._apiserver is not None:
            self._write_token_file()
            self.restart_apiserver()
            self._write_kubeconfig(name)
        return token

    def kubeconfig_for(self, name: str) -> Path:
        """A kubeconfig authenticating as the token user ``name`` (written on demand)."""
        if name not in self._users:
            raise KeyError(f"unknown token user {name!r}; pass it in extra_users")
        path = self._kubeconfig_file(name)
        if not path.exists():
            self._write_kubeconfig(name)
        return path

    def start(self) -> KubeEnv:
        if self._apiserver is not None:
            raise RuntimeError("KubeEnv already started")
        bin_dir = self.bin_dir
        etcd_bin = find_etcd(bin_dir)
        apiserver_bin = bin_dir / "kube-apiserver"
        if not apiserver_bin.is_file():
            raise KubeEnvUnavailable(f"{apiserver_bin} missing (run scripts/kube-env install)")
        self._start_failed = False
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True
        try:
            self._prepare_workdir()
            self.etcd_port, self.etcd_peer_port, self.port = free_ports(3)
            self._start_etcd(etcd_bin)
            self._start_apiserver(apiserver_bin)
            self._ca_pem = self._read_ca()
            self.ca_file.write_bytes(self._ca_pem)
            for name in self._users:
                self._write_kubeconfig(name)
            self._wait_for_default_namespace()
        except BaseException:
            self._start_failed = True
            self.stop()
            raise
        return self

    def restart_apiserver(self) -> None:
        """Stop and start kube-apiserver only: same etcd, port, certificate and token file."""
        if self._apiserver is None:
            raise RuntimeError("KubeEnv not started")
        self._apiserver.stop()
        self._apiserver = None
        try:
            self._start_apiserver(self.bin_dir / "kube-apiserver")
        except BaseException:
            self._start_failed = True
            self.stop()
            raise

    def stop(self) -> None:
        for attr in ("_apiserver", "_etcd"):
            proc: _Proc | None = getattr(self, attr)
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.stop()
                setattr(self, attr, None)
        if self._atexit_registered:
            atexit.unregister(self.stop)
            self._atexit_registered = False
        if self.workdir is not None:
            keep = self.keep_workdir or self._start_failed
            if keep:
                print(f"KubeEnv: work dir with logs kept at {self.workdir}")
            else:
                shutil.rmtree(self.workdir, ignore_errors=True)
                if self._etcd_data is not None and not self._etcd_data.is_relative_to(self.workdir):
                    shutil.rmtree(self._etcd_data, ignore_errors=True)
            self.workdir = None

    def __enter__(self) -> KubeEnv:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def request(self, path: str, *, token: str | None = None, timeout: float = 5.0) -> tuple[int, bytes]:
        """A plain GET against the apiserver (admin token unless given), for probes and tests."""
        req = urllib.request.Request(
            self.url + path, headers={"Authorization": f"Bearer {token or self.admin_token}"}
        )
        ctx = ssl.create_default_context()
        if self._ca_pem is not None:
            ctx.load_verify_locations(cadata=self._ca_pem.decode())
        else:  # before the certificate exists (first start): do not verify
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def apiserver_args(self) -> list[str]:
        d = self._dir
        return [
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--cert-dir={d / 'pki'}",
            f"--token-auth-file={d / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--anonymous-auth=false",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={d / 'sa.key'}",
            f"--service-account-signing-key-file={d / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            "--allow-privileged=true",
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--enable-priority-and-fairness=false",
            f"--max-requests-inflight={self.max_requests_inflight}",
            f"--max-mutating-requests-inflight={self.max_mutating_requests_inflight}",
            "--profiling=false",
            f"--v={self.verbosity}",
            *self.extra_apiserver_args,
        ]

    def etcd_args(self) -> list[str]:
        assert self._etcd_data is not None
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        return [
            "--name=koordsched-e2e",
            f"--data-dir={self._etcd_data}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=koordsched-e2e={peer}",
            "--initial-cluster-state=new",
            "--logger=zap",
            "--log-outputs=stderr",
            "--quota-backend-bytes=4294967296",
        ]

    # ---- internals ------------------------------------------------------------------------

    @property
    def _dir(self) -> Path:
        if self.workdir is None:
            raise RuntimeError("KubeEnv not started")
        return self.workdir

    def _register_user(self, name: str, groups: Sequence[str]) -> str:
        if isinstance(groups, str):
            groups = [groups]
        for field in (name, *groups):
            if not field or any(c in field for c in ',"\n'):
                raise ValueError(f"invalid user/group name {field!r}")
        if name in self._users:
            raise ValueError(f"token user {name!r} already exists")
        token = secrets.token_hex(24)
        self._users[name] = (token, tuple(groups))
        return token

    def _kubeconfig_file(self, name: str) -> Path:
        return self._dir / ("kubeconfig" if name == ADMIN_USER else f"kubeconfig-{name}")

    def _prepare_workdir(self) -> None:
        if self._workdir_arg is not None:
            self._workdir_arg.mkdir(parents=True, exist_ok=True)
            self.workdir = Path(tempfile.mkdtemp(prefix="kube-env-", dir=self._workdir_arg))
        else:
            self.workdir = Path(tempfile.mkdtemp(prefix="koordsched-kube-env-"))
        if self.etcd_on_tmpfs and Path("/dev/shm").is_dir():
            self._etcd_data = Path(tempfile.mkdtemp(prefix="koordsched-etcd-", dir="/dev/shm"))
        else:
            self._etcd_data = self.workdir / "etcd"
        (self.workdir / "pki").mkdir()
        self._write_token_file()
        key = self.workdir / "sa.key"
        proc = subprocess.run(
            ["openssl", "genrsa", "-out", str(key), "2048"], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise KubeEnvError(f"openssl genrsa failed: {proc.stderr.strip()}")

    def _write_token_file(self) -> None:
        lines = [
            f'{token},{name},{name},"{",".join(groups)}"' if groups else f"{token},{name},{name}"
            for name, (token, groups) in self._users.items()
        ]
        path = self._dir / "tokens.csv"
        tmp = path.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        tmp.chmod(0o600)
        tmp.replace(path)

    def _start_etcd(self, etcd_bin: Path) -> None:
        self._etcd = _Proc("etcd", [str(etcd_bin), *self.etcd_args()], self.etcd_log)
        deadline = time.monotonic() + 30
        while True:
            if not self._etcd.alive():
                raise KubeEnvError(
                    f"etcd exited with status {self._etcd.popen.returncode}; "
                    f"last lines of {self.etcd_log}:\n{_tail(self.etcd_log)}"
                )
            try:
                with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as resp:
                    if json.loads(resp.read()).get("health") in ("true", True):
                        return
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise KubeEnvError(f"etcd not healthy after 30 s; last lines:\n{_tail(self.etcd_log)}")
            time.sleep(0.1)

    def _start_apiserver(self, apiserver_bin: Path) -> None:
        self._apiserver = _Proc(
            "kube-apiserver", [str(apiserver_bin), *self.apiserver_args()], self.apiserver_log
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        assert self._apiserver is not None
        deadline = time.monotonic() + self.ready_timeout
        last = "no answer yet"
        while True:
            if not self._apiserver.alive():
                raise KubeEnvError(
                    f"kube-apiserver exited with status {self._apiserver.popen.returncode}; "
                    f"last lines of {self.apiserver_log}:\n{_tail(self.apiserver_log)}"
                )
            if self._etcd is not None and not self._etcd.alive():
                raise KubeEnvError(f"etcd died; last lines of {self.etcd_log}:\n{_tail(self.etcd_log)}")
            try:
                status, body = self.request("/readyz", timeout=2)
                if status == 200 and body.strip() == b"ok":
                    return
                last = f"HTTP {status}: {body.decode(errors='replace')[-500:]}"
            except (OSError, ssl.SSLError) as exc:
                last = repr(exc)
            if time.monotonic() > deadline:
                raise KubeEnvError(
                    f"kube-apiserver not ready after {self.ready_timeout:.0f} s ({last}); "
                    f"last lines of {self.apiserver_log}:\n{_tail(self.apiserver_log)}"
                )
            time.sleep(0.2)

    def _read_ca(self) -> bytes:
        # The apiserver writes its self-signed serving cert followed by the CA that signed it.
        pki = self._dir / "pki"
        crt = pki / "apiserver.crt"
        if not crt.is_file():
            raise KubeEnvError(f"kube-apiserver wrote no {crt}: {sorted(p.name for p in pki.iterdir())}")
        return crt.read_bytes()

    def _write_kubeconfig(self, name: str) -> None:
        assert self._ca_pem is not None
        token = self._users[name][0]
        cfg: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "koordsched-e2e",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority-data": base64.b64encode(self._ca_pem).decode(),
                    },
                }
            ],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": "koordsched-e2e", "user": name}}],
            "current-context": name,
        }
        path = self._kubeconfig_file(name)
        path.write_text(json.dumps(cfg, indent=2) + "\n")  # JSON is valid YAML
        path.chmod(0o600)

    def _wait_for_default_namespace(self) -> None:
        # /readyz can answer before the bootstrap controller has created namespace "default".
        deadline = time.monotonic() + 30
        while True:
            status, _ = self.request("/api/v1/namespaces/default")
            if status == 200:
                return
            if time.monotonic() > deadline:
                raise KubeEnvError(f"namespace default not created after 30 s (HTTP {status})")
            time.sleep(0.1)
