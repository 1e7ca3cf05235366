"""A stop ends ``koordsched run`` within its grace in every state, whatever the API server does.

In-process (``run_scheduler`` with a stop event) for the states the event loop handles; as a
subprocess for what only the process can show: a worker thread that does not stop, the hard
deadline, and a second SIGTERM.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from koordsched.backends.kube.app import run_scheduler
from koordsched.backends.kube.shutdown import Shutdown
from tests.kube.fake_apiserver import NODES, PODS, FakeApiServer, node_json, pod_json
from tests.kube.helpers import eventually
from tests.kube.test_app import answer, free_port, no_numba_warm_up, write_files

__all__ = ["no_numba_warm_up"]  # the autouse fixture: no numba warm-up in-process

REPO = Path(__file__).resolve().parents[2]
NS, NAME = "koordinator-system", "koord-scheduler"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
LEASE = f"{LEASES}/{NAME}"

#: kube-scheduler's defaults: every lease request may take renewDeadline (10 s).
DEFAULT_LEASE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  leaseDuration: 15s
  renewDeadline: 10s
  retryPeriod: 100ms
  resourceName: koord-scheduler
  resourceNamespace: koordinator-system
clientConnection:
  qps: 1000
  burst: 1000
profiles:
  - schedulerName: koord-scheduler
"""


def default_lease_config(tmp_path: Path, api: FakeApiServer) -> tuple[str, str]:
    config, kubeconfig = write_files(tmp_path, api)
    Path(config).write_text(DEFAULT_LEASE)
    return config, kubeconfig


async def start(
    config: str, kubeconfig: str, stop: asyncio.Event, shutdown: Shutdown | None = None
) -> asyncio.Task[int]:
    return asyncio.ensure_future(
        run_scheduler(
            config,
            kubeconfig=kubeconfig,
            bind_address="127.0.0.1",
            port=free_port(),
            stop=stop,
            shutdown=shutdown,
        )
    )


async def stopped_within(task: asyncio.Task[int], stop: asyncio.Event, seconds: float) -> int:
    t0 = time.monotonic()
    stop.set()
    done, _ = await asyncio.wait({task}, timeout=30)
    took = time.monotonic() - t0
    assert done, "the run did not stop within 30 s"
    assert took < seconds, f"the run took {took:.1f}s to stop (allowed {seconds}s)"
    return task.result()


async def test_a_standby_stops_with_its_acquire_in_flight(api: FakeApiServer, tmp_path: Path) -> None:
    """The lease GET hangs: the stop cancels it (it used to wait out renewDeadline, 10 s)."""
    api.add(NODES, node_json("n1"))
    api.stall("GET", LEASE, times=100)
    config, kubeconfig = default_lease_config(tmp_path, api)
    stop = asyncio.Event()
    task = await start(config, kubeconfig, stop)
    await eventually(lambda: task.done() or bool(api.requests_to("GET", LEASE)), within=10)
    assert await stopped_within(task, stop, 3.0) == 0


async def test_a_leader_stops_within_the_grace_when_the_server_hangs(
    api: FakeApiServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Leading, with pods bound and events queued, then every write hangs: the release and the
    flush are abandoned when the grace is spent, and the exit status is still 0."""
    caplog.set_level(logging.INFO, logger="koordsched")
    api.add(NODES, node_json("n1", cpu="64"))
    config, kubeconfig = default_lease_config(tmp_path, api)
    stop = asyncio.Event()
    task = await start(config, kubeconfig, stop, Shutdown(grace=2.0))
    await eventually(lambda: task.done() or api.watchers(PODS) == 1, within=10)
    await eventually(lambda: task.done() or bool(api.leases), within=10)
    for i in range(20):
        api.add(PODS, pod_json(f"p{i}"))
    await eventually(lambda: task.done() or len(api.events) >= 5, within=10)
    api.stall("PUT", LEASE, times=1000)
    api.stall("POST", "/apis/events.k8s.io/v1/namespaces/default/events", times=1000)
    for i in range(20, 40):
        api.add(PODS, pod_json(f"p{i}"))
    await asyncio.sleep(0.2)
    assert await stopped_within(task, stop, 3.0) == 0
    assert "shutdown: abandoned" in caplog.text


async def test_a_stop_during_the_cache_sync_with_a_hanging_server(api: FakeApiServer, tmp_path: Path) -> None:
    api.stall("GET", NODES, times=100)
    config, kubeconfig = default_lease_config(tmp_path, api)
    stop = asyncio.Event()
    task = await start(config, kubeconfig, stop)
    await eventually(lambda: task.done() or bool(api.requests_to("GET", NODES)), within=10)
    assert await stopped_within(task, stop, 3.0) == 0


async def test_losing_the_lease_exits_1_within_the_grace_when_the_server_hangs(
    api: FakeApiServer, tmp_path: Path
) -> None:
    config, kubeconfig = write_files(tmp_path, api)  # 1s / 600ms / 100ms
    api.add(NODES, node_json("n1"))
    stop = asyncio.Event()
    task = await start(config, kubeconfig, stop, Shutdown(grace=2.0))
    await eventually(lambda: task.done() or bool(api.leases), within=10)
    api.stall("PUT", LEASE, times=1000)
    api.stall("GET", LEASE, times=1000)
    done, _ = await asyncio.wait({task}, timeout=10)
    assert done and task.result() == 1
    stop.set()


# --- the process ---------------------------------------------------------------------------------------

#: ``koordsched run`` with a hook applied first (``HOOK`` in the environment names it).
WRAPPER = """
import os, sys, threading, time
hook = os.environ.get("HOOK", "")
if hook == "blocking-warm-up":  # a compile that takes a minute
    import koordsched.kernels
    def blocking():
        print("warm-up started", flush=True)  # the test signals only once the thread is busy
        threading.Event().wait(60)
    koordsched.kernels.warm_up = blocking
if hook == "blocked-loop":  # the event loop itself stops answering once the shutdown flushes
    from koordsched.backends.kube import port
    async def close(self, grace=2.0):
        time.sleep(60)
    port.KubePort.close = close
from koordsched.cli import main
if hook == "slow-exit":  # the process outlives its event loop (a thread to join, an atexit hook)
    code = main(sys.argv[1:])
    print("main returned", flush=True)
    time.sleep(30)
    sys.exit(code)
sys.exit(main(sys.argv[1:]))
"""


class Proc:
    def __init__(self, tmp_path: Path, config: str, kubeconfig: str, hook: str, *extra: str) -> None:
        self.port = free_port()
        self.log = tmp_path / f"{hook}.log"
        env = dict(os.environ, PYTHONPATH=str(REPO), HOOK=hook)
        argv = [sys.executable, "-c", WRAPPER, "--log-level", "info", "run", "--config", config]
        argv += ["--kubeconfig", kubeconfig, "--bind-address", "127.0.0.1", "--secure-port", str(self.port)]
        with open(self.log, "wb") as out:
            self.popen = subprocess.Popen(
                [*argv, *extra], env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    async def wait_exit(self, within: float) -> tuple[int, float]:
        t0 = time.monotonic()
        while self.popen.poll() is None:
            if time.monotonic() - t0 > within:
                self.popen.kill()
                self.popen.wait()
                raise AssertionError(f"still running {within}s after the signal\n{self.text()[-3000:]}")
            await asyncio.sleep(0.05)
        return self.popen.returncode, time.monotonic() - t0

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()


async def test_sigterm_during_the_kernel_warm_up_does_not_wait_for_the_compile(
    api: FakeApiServer, tmp_path: Path
) -> None:
    """The process used to exit only once the warm-up thread ended (asyncio.run joins it)."""
    config, kubeconfig = write_files(tmp_path, api)
    # The per-check readyz path is authorized like any other (kube-scheduler's rule): open it here.
    allow = ("--authorization-always-allow-paths", "/healthz,/livez,/readyz,/readyz/*")
    proc = Proc(tmp_path, config, kubeconfig, "blocking-warm-up", *allow)
    try:
        base = f"https://127.0.0.1:{proc.port}"

        async def warming() -> bool:
            got = await answer(f"{base}/readyz/sched-handler-sync")
            return got is not None and "numba kernels are not compiled yet" in got[1]

        async with asyncio.timeout(60):
            while not await warming():
                assert proc.popen.poll() is None, proc.text()
                await asyncio.sleep(0.1)
            # Loading the plugins can end just after the signal (a slow machine): then nothing
            # lingers and the exit is plain. Signal once the warm-up thread itself is busy.
            while "warm-up started" not in proc.text():
                assert proc.popen.poll() is None, proc.text()
                await asyncio.sleep(0.1)
        proc.popen.send_signal(signal.SIGTERM)
        code, took = await proc.wait_exit(20)
    finally:
        proc.kill()
    assert code == 0, proc.text()
    assert took < 3.0, proc.text()
    assert "without waiting for koordsched-" in proc.text()


async def test_the_hard_deadline_exits_a_process_whose_loop_is_stuck(
    api: FakeApiServer, tmp_path: Path
) -> None:
    api.add(NODES, node_json("n1"))
    config, kubeconfig = write_files(tmp_path, api, elect=False)
    proc = Proc(tmp_path, config, kubeconfig, "blocked-loop", "--shutdown-grace-period", "2s")
    try:
        async with asyncio.timeout(60):
            while api.watchers(PODS) < 1:
                assert proc.popen.poll() is None, proc.text()
                await asyncio.sleep(0.1)
        proc.popen.send_signal(signal.SIGTERM)
        code, took = await proc.wait_exit(20)
    finally:
        proc.kill()
    assert code == 0, proc.text()  # the status of a SIGTERM stop, even when cut short
    assert 1.5 < took < 4.0, proc.text()
    assert "shutdown grace of 2s is over: exiting with status 0" in proc.text()


async def test_a_second_sigterm_exits_at_once_with_status_1(api: FakeApiServer, tmp_path: Path) -> None:
    """As kube-scheduler's signal handler (k8s.io/apiserver): the second signal exits directly."""
    api.add(NODES, node_json("n1"))
    config, kubeconfig = default_lease_config(tmp_path, api)
    proc = Proc(tmp_path, config, kubeconfig, "none")
    try:
        async with asyncio.timeout(60):
            while not api.leases:
                assert proc.popen.poll() is None, proc.text()
                await asyncio.sleep(0.1)
        api.stall("PUT", LEASE, times=1000)  # the release will hang for renewDeadline (10 s)
        await asyncio.sleep(0.3)
        proc.popen.send_signal(signal.SIGTERM)
        await asyncio.sleep(1.0)
        assert proc.popen.poll() is None, "still releasing"
        proc.popen.send_signal(signal.SIGTERM)
        code, took = await proc.wait_exit(5)
    finally:
        proc.kill()
    assert code == 1, proc.text()
    assert took < 1.0
    assert "received SIGTERM again, exiting now" in proc.text()


async def test_a_second_sigterm_after_the_event_loop_closed_exits_with_status_1(
    api: FakeApiServer, tmp_path: Path
) -> None:
    """Issue 24, item 9: once the loop's handlers were gone, the second SIGTERM killed the process
    by the signal (status -15)."""
    api.add(NODES, node_json("n1"))
    config, kubeconfig = write_files(tmp_path, api, elect=False)
    proc = Proc(tmp_path, config, kubeconfig, "slow-exit")
    try:
        async with asyncio.timeout(60):
            while api.watchers(PODS) < 1:
                assert proc.popen.poll() is None, proc.text()
                await asyncio.sleep(0.1)
            proc.popen.send_signal(signal.SIGTERM)
            while "main returned" not in proc.text():
                assert proc.popen.poll() is None, proc.text()
                await asyncio.sleep(0.05)
        proc.popen.send_signal(signal.SIGTERM)
        code, _ = await proc.wait_exit(10)
    finally:
        proc.kill()
    assert code == 1, proc.text()
    assert "received SIGTERM again, exiting now" in proc.text()


async def test_a_watch_that_dies_ends_the_run_with_status_1(
    api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A watch task that fails unexpectedly used to vanish, leaving the scheduler running on a cache
    that no longer follows the cluster. It now ends the run (status 1) after the orderly stop."""
    from koordsched.backends.kube import reflector

    api.add(NODES, node_json("n1"))
    config, kubeconfig = write_files(tmp_path, api, elect=False)

    def broken(self: reflector.Reflector[object], line: bytes) -> None:
        raise RuntimeError("a bug in the watch")

    monkeypatch.setattr(reflector.Reflector, "_handle_line", broken)
    stop = asyncio.Event()
    task = await start(config, kubeconfig, stop)
    await eventually(lambda: task.done() or api.watchers(PODS) == 1, within=10)
    api.add(PODS, pod_json("p"))  # the pod watch's next line kills it
    done, _ = await asyncio.wait({task}, timeout=10)
    assert done and task.result() == 1
    assert "the run failed: RuntimeError: a bug in the watch" in caplog.text
