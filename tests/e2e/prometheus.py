"""A real Prometheus for end-to-end tests: it scrapes targets the way the shipped ServiceMonitor does.

``deploy/prometheus-operator/servicemonitor.yaml`` makes the Operator generate a scrape job that
talks HTTPS to every endpoint of the Service, sends the Prometheus ServiceAccount's token from a
file as a bearer token, skips certificate verification and labels each target with ``job`` (the
Service's name), ``namespace``, ``service``, ``pod``, ``container`` and ``endpoint`` (the port's
name), ``honor_labels`` off (so a scraped ``namespace`` or ``pod`` label becomes
``exported_namespace`` / ``exported_pod``). :class:`PrometheusServer` runs Debian's
``prometheus`` binary with such a job, its targets from a ``file_sd`` file so that a test can add
targets after start-up, and evaluates PromQL through the HTTP API.

    with PrometheusServer(tmp_path, token_file) as prom:
        prom.set_targets([ScrapeTarget(f"127.0.0.1:{sched.port}", pod="koordsched-0")])
        await prom.wait_for_targets_up()
        samples = await prom.wait_for_data('sum(scheduler_pending_pods)')

:func:`dashboard_queries` lists every PromQL query of a Grafana dashboard JSON (panels nested
in rows included) and :meth:`PrometheusServer.expand` resolves its template variables the way
Grafana does with "All" selected, so a test can evaluate each query exactly as shipped.

The binary is ``$KOORDSCHED_PROMETHEUS`` or ``prometheus`` on PATH (``scripts/kube-env install``
installs Debian's package). Without it the fixture skips, or fails with ``KOORDSCHED_REQUIRE_E2E``.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import aiohttp
import yaml

from tests.e2e.apiserver import REQUIRE_ENV, _die_with_parent, e2e_required, free_ports

PROMETHEUS_ENV = "KOORDSCHED_PROMETHEUS"
#: Where a pod's projected ServiceAccount token lies; the ServiceMonitor's ``bearerTokenFile``.
SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
START_TIMEOUT = 60.0
#: Generous, as tests/e2e/helpers.TIMEOUT: the suite runs on small, loaded machines.
POLL_TIMEOUT = 60.0
LOG_TAIL_LINES = 40


class PrometheusUnavailable(RuntimeError):
    """No prometheus binary (install Debian's ``prometheus`` package: scripts/kube-env install)."""


class PrometheusError(RuntimeError):
    """Prometheus failed to start, or answered a query with an error."""


def find_prometheus() -> Path:
    """The prometheus binary: ``$KOORDSCHED_PROMETHEUS``, else ``prometheus`` on PATH."""
    override = os.environ.get(PROMETHEUS_ENV)
    if override:
        path = Path(override)
        if not path.is_file():
            raise PrometheusUnavailable(f"{PROMETHEUS_ENV}={override} is not a file")
        return path
    found = shutil.which("prometheus")
    if found is None:
        raise PrometheusUnavailable("prometheus not found on PATH (run scripts/kube-env install)")
    return Path(found)


def prometheus_or_skip() -> Path:
    """For fixtures: the binary, else skip (or fail when ``KOORDSCHED_REQUIRE_E2E`` is set)."""
    import pytest

    try:
        return find_prometheus()
    except PrometheusUnavailable as exc:
        if e2e_required():
            pytest.fail(f"{REQUIRE_ENV} is set but Prometheus is unavailable: {exc}")
        pytest.skip(f"Prometheus not installed: {exc}")


@dataclass(frozen=True)
class ScrapeTarget:
    """One endpoint of the Service, labelled as the Operator's kubernetes_sd relabelling labels it."""

    address: str
    pod: str = "koordsched-0"
    namespace: str = "koordinator-system"
    service: str = "koordsched-metrics"
    endpoint: str = "metrics"
    container: str = "koordsched"

    def labels(self) -> dict[str, str]:
        # ServiceMonitor without jobLabel: job is the Service's name.
        return {
            "job": self.service,
            "namespace": self.namespace,
            "service": self.service,
            "pod": self.pod,
            "container": self.container,
            "endpoint": self.endpoint,
        }


@dataclass(frozen=True)
class Sample:
    """One element of an instant query's vector (or a scalar, with no labels)."""

    labels: dict[str, str]
    value: float


@dataclass
class PrometheusServer:
    """A Prometheus process scraping ``targets`` over HTTPS with the bearer token in ``token_file``.

    ``token_file`` plays the role of ``SERVICE_ACCOUNT_TOKEN``: write a ServiceAccount's token
    from the TokenRequest API there. ``scrape_interval`` is short so a test needs few seconds.
    """

    work_dir: Path
    token_file: Path
    targets: Sequence[ScrapeTarget] = ()
    scrape_interval: str = "2s"
    metrics_path: str = "/metrics"
    job_name: str = "serviceMonitor/koordinator-system/koordsched/0"
    binary: Path | None = None
    port: int = 0
    _popen: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _log: IO[bytes] | None = field(default=None, init=False, repr=False)

    # --- lifecycle --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.work_dir / "prometheus.log"

    @property
    def _sd_file(self) -> Path:
        return self.work_dir / "targets.json"

    def config(self) -> dict[str, Any]:
        """The scrape configuration: what the Operator generates for the ServiceMonitor's endpoint."""
        return {
            "global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.scrape_interval},
            "scrape_configs": [
                {
                    "job_name": self.job_name,
                    "honor_labels": False,
                    "honor_timestamps": True,
                    "scrape_interval": self.scrape_interval,
                    "scrape_timeout": self.scrape_interval,
                    "metrics_path": self.metrics_path,
                    "scheme": "https",
                    "authorization": {"type": "Bearer", "credentials_file": str(self.token_file)},
                    "tls_config": {"insecure_skip_verify": True},
                    "file_sd_configs": [{"files": [str(self._sd_file)], "refresh_interval": "1s"}],
                }
            ],
        }

    def set_targets(self, targets: Iterable[ScrapeTarget]) -> None:
        """Replace the scraped endpoints (Prometheus re-reads the file on change)."""
        self.targets = tuple(targets)
        groups = [{"targets": [t.address], "labels": t.labels()} for t in self.targets]
        tmp = self._sd_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(groups))
        tmp.replace(self._sd_file)  # atomic: Prometheus never reads half a file

    def start(self) -> PrometheusServer:
        binary = self.binary or find_prometheus()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.set_targets(self.targets)
        config_file = self.work_dir / "prometheus.yml"
        config_file.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        if not self.port:
            self.port = free_ports(1)[0]
        argv = [
            str(binary),
            f"--config.file={config_file}",
            f"--storage.tsdb.path={self.work_dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=info",
        ]
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        main = threading.current_thread() is threading.main_thread()
        self._popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if main else None,
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        import urllib.error
        import urllib.request

        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self._popen is not None
            if self._popen.poll() is not None:
                raise PrometheusError(f"prometheus exited with {self._popen.returncode}\n{self.tail()}")
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise PrometheusError(f"prometheus not ready after {START_TIMEOUT:.0f}s\n{self.tail()}")

    def stop(self) -> None:
        if self._popen is not None and self._popen.poll() is None:
            self._popen.terminate()
            try:
                self._popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._popen.kill()
                self._popen.wait()
        self._popen = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"<cannot read {self.log_path}: {exc}>"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- HTTP API ---------------------------------------------------------------------------

    async def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>; the ``data`` of a successful answer, else PrometheusError."""
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s,
            s.get(f"{self.url}/api/v1/{path}", params=params) as resp,
        ):
            body = await resp.json(content_type=None)
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    async def query(self, expr: str) -> list[Sample]:
        """Evaluate ``expr`` now: the vector's samples (a scalar is one sample without labels)."""
        data = await self.api("query", query=expr)
        kind, result = data["resultType"], data["result"]
        if kind == "vector":
            return [Sample(dict(r["metric"]), float(r["value"][1])) for r in result]
        if kind == "scalar":
            return [Sample({}, float(result[1]))]
        raise PrometheusError(f"{expr}: a {kind} result; expected an instant vector or scalar")

    async def label_values(self, label: str, match: str | None = None) -> list[str]:
        params = {"match[]": match} if match else {}
        values: list[str] = await self.api(f"label/{label}/values", **params)
        return values

    async def targets_health(self) -> list[dict[str, Any]]:
        """The active targets with their ``health`` ("up", "down", "unknown") and ``lastError``."""
        data = await self.api("targets", state="active")
        active: list[dict[str, Any]] = data["activeTargets"]
        return active

    async def wait_for_targets_up(self, timeout: float = POLL_TIMEOUT) -> list[dict[str, Any]]:
        """Until every target in the file is discovered and its last scrape succeeded."""
        want = {t.address for t in self.targets}
        last: list[dict[str, Any]] = []

        async def probe() -> bool:
            nonlocal last
            last = await self.targets_health()
            up = {t["labels"].get("instance") for t in last if t["health"] == "up"}
            return bool(want) and want <= up

        await self._poll(probe, timeout, lambda: f"targets up {sorted(want)}; last: {_brief(last)}")
        return last

    async def wait_for_data(self, expr: str, timeout: float = POLL_TIMEOUT) -> list[Sample]:
        """Poll until ``expr`` yields at least one finite sample (Grafana shows NaN as no data)."""
        last: list[Sample] = []

        async def probe() -> bool:
            nonlocal last
            last = await self.query(expr)
            return any(math.isfinite(s.value) for s in last)

        await self._poll(probe, timeout, lambda: f"data for {expr!r}; last: {last!r}")
        return [s for s in last if math.isfinite(s.value)]

    async def _poll(self, probe: Any, timeout: float, what: Any) -> None:
        import asyncio

        deadline = time.monotonic() + timeout
        while not await probe():
            if self._popen is None or self._popen.poll() is not None:
                raise PrometheusError(f"prometheus is not running\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what()}\n{self.tail()}")
            await asyncio.sleep(0.5)

    # --- Grafana dashboards -----------------------------------------------------------------

    async def expand(self, expr: str, dashboard: dict[str, Any], *, window: str = "10m") -> str:
        """``expr`` with the dashboard's variables as Grafana resolves them with "All" selected.

        A query variable's ``label_values(selector, label)`` is answered by this Prometheus, and
        "All" becomes the regex alternation of the values (escaped), as Grafana writes it for a
        multi-value variable; ``$__rate_interval``, ``$__interval`` and ``$__range`` become
        ``window``, which a test makes cover the whole scheduling round.
        """
        variables: dict[str, str] = {}
        for var in dashboard.get("templating", {}).get("list", []):
            if var.get("type") != "query":
                continue
            definition = var.get("definition") or var.get("query", {}).get("query", "")
            parsed = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", definition)
            if parsed is None:
                raise PrometheusError(f"variable {var.get('name')}: unsupported query {definition!r}")
            selector = _substitute(parsed.group(1), variables, window)
            values = await self.label_values(parsed.group(2), selector)
            # Grafana's "All" for a regex matcher: (a|b|c), each value regex-escaped.
            variables[var["name"]] = "(" + "|".join(_regex_escape(v) for v in values) + ")" if values else ""
        return _substitute(expr, variables, window)


def dashboard_queries(path: Path) -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target of every panel in a Grafana dashboard JSON."""
    dashboard = json.loads(path.read_text())
    return list(_panel_queries(dashboard.get("panels", [])))


def _panel_queries(panels: Sequence[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    for panel in panels:
        yield from _panel_queries(panel.get("panels", []))  # a collapsed row holds its panels
        for target in panel.get("targets", []):
            expr = target.get("expr")
            if expr and not target.get("hide"):
                yield str(panel.get("title", "")), str(expr)


_BUILTINS = ("__rate_interval", "__interval", "__range")


def _substitute(expr: str, variables: dict[str, str], window: str) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name in _BUILTINS:
            return window
        if name not in variables:
            raise PrometheusError(f"{expr!r}: unknown variable ${name}")
        return variables[name]

    # ``$1`` is label_replace's group reference, which Grafana leaves alone (no variable is named by
    # digits): a variable name starts with a letter or underscore.
    return re.sub(r"\$\{([A-Za-z_]\w*)(?::\w+)?\}|\$([A-Za-z_]\w*)", one, expr)


def _regex_escape(value: str) -> str:
    # Inside a PromQL string the regex's backslashes must be doubled.
    return re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\\\1", value)


def _brief(targets: list[dict[str, Any]]) -> list[tuple[Any, Any, Any]]:
    return [(t["labels"].get("instance"), t.get("health"), t.get("lastError")) for t in targets]
