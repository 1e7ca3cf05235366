"""``run_scheduler`` against the fake API server: start-up, sync, elect, schedule, stop, exit codes."""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import msgspec
import pytest

import koordsched.kernels
from koordsched.api.core import Pod
from koordsched.backends.kube.app import koordinator_flag_notices, run_scheduler
from koordsched.backends.kube.flags import add_run_arguments
from koordsched.backends.kube.handlers import PodHandler
from koordsched.backends.kube.serving.options import AuthorizationOptions, ServingOptions
from koordsched.backends.sim.port import SimPort
from koordsched.config.load import default_config
from koordsched.observability.metrics import SchedulerMetrics
from koordsched.plugins.registry import in_tree_registry
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.event_handlers import status_only_update
from koordsched.scheduler.scheduler import Scheduler
from tests.kube.fake_apiserver import NODES, PODS, FakeApiServer, node_json, pod_json
from tests.kube.helpers import eventually

NS, NAME = "koordinator-system", "koord-scheduler"

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: {elect}
  leaseDuration: 1s
  renewDeadline: 600ms
  retryPeriod: 100ms
  resourceName: koord-scheduler
  resourceNamespace: koordinator-system
clientConnection:
  qps: 1000
  burst: 1000
profiles:
  - schedulerName: koord-scheduler
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_files(tmp_path: Path, api: FakeApiServer, *, elect: bool = True) -> tuple[str, str]:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(elect="true" if elect else "false"))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        f"""
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{api.url}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""
    )
    return str(config), str(kubeconfig)


@pytest.fixture(autouse=True)
def no_numba_warm_up(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(koordsched.kernels, "warm_up", lambda: calls.append(1))
    return calls


async def status(url: str) -> int:
    async with aiohttp.ClientSession() as s, s.get(url, ssl=False) as r:
        return r.status


async def answer(url: str) -> tuple[int, str] | None:
    """The status and body, or None while nothing listens yet."""
    try:
        async with aiohttp.ClientSession() as s, s.get(url, ssl=False) as r:
            return r.status, await r.text()
    except aiohttp.ClientConnectionError:
        return None


class SlowWarmUp:
    """A warm-up that blocks its worker thread until released, as a cold numba cache does."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> None:
        self.started.set()
        self.release.wait(30)


@pytest.fixture
def slow_warm_up(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlowWarmUp]:
    slow = SlowWarmUp()
    monkeypatch.setattr(koordsched.kernels, "warm_up", slow)
    try:
        yield slow
    finally:
        slow.release.set()  # never leave the worker thread blocked: the loop's teardown joins it


async def test_schedules_as_leader_and_releases_on_stop(
    api: FakeApiServer, tmp_path: Path, no_numba_warm_up: list[int]
) -> None:
    api.add(NODES, node_json("n1", cpu="2"))
    api.add(PODS, pod_json("running", node="n1", scheduler="default-scheduler", cpu="1"))
    api.add(PODS, pod_json("mine"))
    api.add(PODS, pod_json("not-mine", scheduler="default-scheduler"))
    api.add(PODS, pod_json("too-big", cpu="2"))  # 1 of 2 cpus is taken by "running"
    config, kubeconfig = write_files(tmp_path, api)
    port = free_port()
    stop = asyncio.Event()
    task = asyncio.ensure_future(
        run_scheduler(config, kubeconfig=kubeconfig, bind_address="127.0.0.1", port=port, stop=stop)
    )
    try:
        await eventually(lambda: api.get(PODS, "default/mine")["spec"].get("nodeName") == "n1", within=10)
        assert no_numba_warm_up == [1]
        assert await status(f"https://127.0.0.1:{port}/readyz") == 200
        assert await status(f"https://127.0.0.1:{port}/healthz") == 200
        lease = api.lease(NS, NAME)
        assert lease is not None and lease["spec"]["holderIdentity"].startswith(socket.gethostname() + "_")
        await eventually(lambda: any(e["reason"] == "Scheduled" for e in api.events.values()))
        await eventually(lambda: any(e["reason"] == "FailedScheduling" for e in api.events.values()))
        failed = next(e for e in api.events.values() if e["reason"] == "FailedScheduling")
        assert failed["regarding"]["name"] == "too-big"
        assert "Insufficient cpu" in failed["note"]
        await asyncio.sleep(0.3)
        # Our own status patch does not wake the pod: one condition patch, not a loop of them.
        assert len(api.requests_to("PATCH", "/api/v1/namespaces/default/pods/too-big/status")) == 1
        assert "nodeName" not in api.get(PODS, "default/not-mine")["spec"]
    finally:
        stop.set()
        code = await asyncio.wait_for(task, 10)
    assert code == 0
    assert api.lease(NS, NAME)["spec"]["holderIdentity"] == ""  # type: ignore[index]


async def test_a_standby_keeps_its_cache_but_does_not_schedule(api: FakeApiServer, tmp_path: Path) -> None:
    api.add(NODES, node_json("n1"))
    api.add(PODS, pod_json("mine"))
    api.leases[f"{NS}/{NAME}"] = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": NAME, "namespace": NS, "resourceVersion": "1"},
        "spec": {"holderIdentity": "other", "leaseDurationSeconds": 3600},
    }
    config, kubeconfig = write_files(tmp_path, api)
    port = free_port()
    stop = asyncio.Event()
    task = asyncio.ensure_future(
        run_scheduler(config, kubeconfig=kubeconfig, bind_address="127.0.0.1", port=port, stop=stop)
    )
    try:
        await eventually(lambda: api.watchers(PODS) == 1)
        await asyncio.sleep(0.3)
        assert await status(f"https://127.0.0.1:{port}/readyz") == 200  # ready, just not leading
        assert "nodeName" not in api.get(PODS, "default/mine")["spec"]
    finally:
        stop.set()
        code = await asyncio.wait_for(task, 10)
    assert code == 0
    assert api.lease(NS, NAME)["spec"]["holderIdentity"] == "other"  # type: ignore[index]


async def test_losing_the_lease_exits_1(api: FakeApiServer, tmp_path: Path) -> None:
    api.add(NODES, node_json("n1"))
    config, kubeconfig = write_files(tmp_path, api)
    stop = asyncio.Event()
    task = asyncio.ensure_future(
        run_scheduler(config, kubeconfig=kubeconfig, bind_address="127.0.0.1", port=free_port(), stop=stop)
    )
    try:
        await eventually(lambda: api.lease(NS, NAME) is not None)
        api.fail("PUT", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{NAME}", 500, times=10_000)
        code = await asyncio.wait_for(task, 10)
    finally:
        stop.set()
        if not task.done():
            await asyncio.wait_for(task, 10)
    assert code == 1


async def test_without_leader_election_it_schedules_at_once(api: FakeApiServer, tmp_path: Path) -> None:
    api.add(NODES, node_json("n1"))
    api.add(PODS, pod_json("mine"))
    config, kubeconfig = write_files(tmp_path, api, elect=False)
    stop = asyncio.Event()
    task = asyncio.ensure_future(
        run_scheduler(config, kubeconfig=kubeconfig, bind_address="127.0.0.1", port=free_port(), stop=stop)
    )
    try:
        await eventually(lambda: api.get(PODS, "default/mine")["spec"].get("nodeName") == "n1", within=10)
    finally:
        stop.set()
        code = await asyncio.wait_for(task, 10)
    assert code == 0
    assert api.leases == {}


async def test_health_answers_before_the_kernels_are_warm_and_ready_only_after(
    api: FakeApiServer, tmp_path: Path, slow_warm_up: SlowWarmUp
) -> None:
    api.add(NODES, node_json("n1"))
    api.add(PODS, pod_json("mine"))
    config, kubeconfig = write_files(tmp_path, api, elect=False)
    port = free_port()
    base = f"https://127.0.0.1:{port}"
    stop = asyncio.Event()
    # The single checks under /readyz/ need authorization unless opened, as in kube-scheduler.
    open_checks = AuthorizationOptions(always_allow_paths=("/healthz", "/livez", "/readyz", "/readyz/*"))
    task = asyncio.ensure_future(
        run_scheduler(
            config,
            kubeconfig=kubeconfig,
            serving=ServingOptions(bind_address="127.0.0.1", secure_port=port, authorization=open_checks),
            stop=stop,
        )
    )
    try:
        await eventually(slow_warm_up.started.is_set)
        assert await answer(f"{base}/livez") == (200, "ok")
        assert await answer(f"{base}/healthz") == (200, "ok")
        assert (await answer(f"{base}/readyz"))[0] == 500  # type: ignore[index]
        assert await answer(f"{base}/readyz/sched-handler-sync") == (
            500,
            "internal server error: numba kernels are not compiled yet\n",
        )
        # Not open to anonymous requests; the fake API server has no SubjectAccessReview to allow it.
        assert (await answer(f"{base}/configz"))[0] == 500  # type: ignore[index]
        # Nothing is listed, let alone scheduled, before the kernels are warm.
        assert not api.requests_to("GET", PODS) and not api.requests_to("GET", NODES)

        slow_warm_up.release.set()
        await eventually(lambda: api.get(PODS, "default/mine")["spec"].get("nodeName") == "n1", within=10)
        assert await answer(f"{base}/readyz") == (200, "ok")
    finally:
        stop.set()
        code = await asyncio.wait_for(task, 10)
    assert code == 0


async def test_a_stop_while_the_kernels_warm_up_exits_0(
    api: FakeApiServer, tmp_path: Path, slow_warm_up: SlowWarmUp
) -> None:
    config, kubeconfig = write_files(tmp_path, api)
    port = free_port()
    stop = asyncio.Event()
    task = asyncio.ensure_future(
        run_scheduler(config, kubeconfig=kubeconfig, bind_address="127.0.0.1", port=port, stop=stop)
    )
    await eventually(slow_warm_up.started.is_set)
    stop.set()
    assert await asyncio.wait_for(task, 10) == 0  # without waiting for the warm-up to end
    assert not slow_warm_up.release.is_set()
    assert await answer(f"https://127.0.0.1:{port}/livez") is None, "the server is closed"
    assert api.leases == {}


async def test_readiness_does_not_wait_for_missing_crds(
    api: FakeApiServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The fake server serves none of Device, NodeResourceTopology and NodeMetric: 404s."""
    caplog.set_level(logging.WARNING, logger="koordsched.backends.kube.reflector")
    api.add(NODES, node_json("n1"))
    config, kubeconfig = write_files(tmp_path, api, elect=False)
    port = free_port()
    stop = asyncio.Event()
    task = asyncio.ensure_future(
        run_scheduler(config, kubeconfig=kubeconfig, bind_address="127.0.0.1", port=port, stop=stop)
    )
    try:
        await eventually(lambda: task.done() or api.watchers(PODS) == 1, within=10)
        assert await status(f"https://127.0.0.1:{port}/readyz") == 200
    finally:
        stop.set()
        code = await asyncio.wait_for(task, 10)
    assert code == 0
    missing = sorted(
        r.getMessage().split(":")[0] for r in caplog.records if "is not served (404" in r.getMessage()
    )
    served = {
        "Namespace",
        "Service",
        "ReplicationController",
        "ReplicaSet",
        "StatefulSet",
        "PodDisruptionBudget",
    }
    served |= {"StorageClass", "PersistentVolume", "PersistentVolumeClaim", "CSINode", "CSIDriver"}
    served.add("CSIStorageCapacity")
    assert sorted(k for k in missing if k not in served) == [
        "Device",
        "ElasticQuota",
        "NodeMetric",
        "NodeResourceTopology",
        "PodGroup",
        "Reservation",
    ]


async def test_invalid_inputs_exit_2(api: FakeApiServer, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nbogus: 1\n")
    assert await run_scheduler(str(bad), kubeconfig=None, bind_address="127.0.0.1", port=free_port()) == 2
    # Known only once the plugins are loaded, with the health server already up.
    unknown = tmp_path / "unknown-plugin.yaml"
    unknown.write_text(
        CONFIG.format(elect="true") + "    plugins:\n      filter:\n        enabled: [{name: NoSuchPlugin}]\n"
    )
    assert await run_scheduler(str(unknown), kubeconfig=None, bind_address="127.0.0.1", port=free_port()) == 2
    config, _ = write_files(tmp_path, api)
    code = await run_scheduler(
        config, kubeconfig=str(tmp_path / "missing"), bind_address="127.0.0.1", port=free_port()
    )
    assert code == 2


def test_run_arguments_accept_koordinator_flags() -> None:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    args = parser.parse_args(
        [
            "--config=/config/koord-scheduler.config",
            "--port=10251",
            "--authentication-skip-lookup=true",
            "--v=4",
            "--feature-gates=A=true",
            "--enable-network-topology-manager=true",
        ]
    )
    assert args.config == "/config/koord-scheduler.config"
    assert args.insecure_port == 10251  # koord-scheduler's insecure port: health checks only here
    assert args.authentication_skip_lookup is True
    assert args.bind_address == "0.0.0.0"
    assert parser.parse_args(["--secure-port", "10259"]).secure_port == 10259
    assert parser.parse_args([]).secure_port == 10259
    assert parser.parse_args([]).insecure_port == 0


def _pod(**status: object) -> Pod:
    body = pod_json("p", uid="u1", resourceVersion="1")
    body["status"] = {"phase": "Pending", **status}
    return msgspec.convert(body, Pod)


def test_status_only_updates_of_pending_pods_are_recognised() -> None:
    old = _pod()
    new = msgspec.convert(
        {
            **msgspec.to_builtins(old),
            "status": {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
            },
        },
        Pod,
    )
    new.metadata.resource_version = "2"
    assert status_only_update(old, new)
    relabelled = msgspec.convert(msgspec.to_builtins(new), Pod)
    relabelled.metadata.labels = {"a": "b"}
    assert not status_only_update(old, relabelled)
    bound = msgspec.convert(msgspec.to_builtins(new), Pod)
    bound.spec.node_name = "n1"
    assert not status_only_update(old, bound)


def test_pod_handler_times_events_and_refreshes_pending_pods() -> None:
    registry = in_tree_registry()
    metrics = SchedulerMetrics()
    sched = Scheduler(
        default_config(registry, "koord-scheduler"), registry, SimPort(), VirtualClock(), metrics=metrics
    )
    handler = PodHandler(sched, metrics)
    old = _pod()
    handler.on_add(old)
    new = msgspec.convert(
        {
            **msgspec.to_builtins(old),
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]},
        },
        Pod,
    )
    handler.on_update(old, new)
    info = sched.queue.get("u1")
    assert info is not None and info.pod is new
    reg = metrics.registry
    assert (
        reg.get_sample_value(
            "scheduler_event_handling_duration_seconds_count", {"event": "UnscheduledPodAdd"}
        )
        == 1
    )
    assert (
        reg.get_sample_value(
            "scheduler_event_handling_duration_seconds_count", {"event": "UnscheduledPodUpdate"}
        )
        == 1
    )


async def test_start_up_names_the_default_plugins_it_lacks(
    api: FakeApiServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A default plugin the registry lacks is named in a warning at start-up, not dropped quietly."""
    from koordsched.framework.registry import Registry
    from koordsched.plugins import registry as plugin_registry

    reduced = Registry([s for s in in_tree_registry() if s.name != "ImageLocality"])
    monkeypatch.setattr(plugin_registry, "in_tree_registry", lambda **_: reduced)
    caplog.set_level(logging.WARNING, logger="koordsched.backends.kube.app")
    api.add(NODES, node_json("n1"))
    api.add(PODS, pod_json("mine"))
    config, kubeconfig = write_files(tmp_path, api, elect=False)
    stop = asyncio.Event()
    task = asyncio.ensure_future(
        run_scheduler(config, kubeconfig=kubeconfig, bind_address="127.0.0.1", port=free_port(), stop=stop)
    )
    try:
        await eventually(lambda: api.get(PODS, "default/mine")["spec"].get("nodeName") == "n1", within=10)
    finally:
        stop.set()
        code = await asyncio.wait_for(task, 10)
    assert code == 0
    lines = [r.getMessage() for r in caplog.records if "are not implemented by koordsched" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "ImageLocality" in lines[0] and lines[0].startswith('profile "')


async def test_start_up_names_the_flags_it_does_not_honour(
    api: FakeApiServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A feature gate turned on that koordsched lacks, or does not know, is a start-up warning."""
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    args = parser.parse_args(["--feature-gates=ResizePod=true,SomeKubeGate=false"])
    caplog.set_level(logging.WARNING, logger="koordsched.backends.kube.app")
    api.add(NODES, node_json("n1"))
    api.add(PODS, pod_json("mine"))
    config, kubeconfig = write_files(tmp_path, api, elect=False)
    stop = asyncio.Event()
    task = asyncio.ensure_future(
        run_scheduler(
            config,
            kubeconfig=kubeconfig,
            bind_address="127.0.0.1",
            port=free_port(),
            stop=stop,
            notices=koordinator_flag_notices(args),
        )
    )
    try:
        await eventually(lambda: api.get(PODS, "default/mine")["spec"].get("nodeName") == "n1", within=10)
    finally:
        stop.set()
        code = await asyncio.wait_for(task, 10)
    assert code == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(w.startswith("feature gate ResizePod=true is not implemented by koordsched") for w in warnings)
    assert "feature gate SomeKubeGate=false is not recognised by koordsched and is ignored" in warnings
