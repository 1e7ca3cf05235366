"""The descheduler's /metrics: its own registry (descheduler, leader, API client, process series),
none of the embedded scheduler's ``scheduler_*``; Koordinator's names, labels and types."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import aiohttp
import pytest
import yaml

import koordsched.kernels
from koordsched.backends.kube.deschedule import DeschedulerRunner
from koordsched.backends.kube.serving.options import AuthorizationOptions, ServingOptions
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import load_config
from koordsched.descheduler.config.load import load_descheduler_config
from koordsched.descheduler.registry import in_tree_catalog
from koordsched.observability.descheduler_metrics import DeschedulerMetrics
from koordsched.plugins.registry import in_tree_registry
from tests.kube.fake_apiserver import NODES, PODS, FakeApiServer, node_json, pod_json
from tests.kube.helpers import eventually
from tests.kube.test_app import free_port, write_files

LEASE_NS, LEASE = "koordinator-system", "koord-descheduler-test"
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? ")


def families(text: str) -> dict[str, str]:
    """Family name -> its TYPE, from the ``# TYPE`` lines of an exposition."""
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))


def sample_names(text: str) -> set[str]:
    return {m.group(1) for line in text.splitlines() if (m := _SAMPLE.match(line))}


@pytest.mark.parametrize(
    ("ok", "result"),
    [(True, "success"), (False, "error")],
)
def test_an_eviction_is_counted_as_koordinator_names_it(ok: bool, result: str) -> None:
    m = DeschedulerMetrics()
    m.evicted(ok, "LowNodeLoad", "team-a", "node-1")
    text = m.exposition().decode()
    assert families(text)["descheduler_pods_evicted"] == "counter"
    assert "descheduler_pods_evicted_total" not in text
    line = (
        f'descheduler_pods_evicted{{namespace="team-a",node="node-1",result="{result}",'
        'strategy="LowNodeLoad"} 1.0'
    )
    assert line in text.splitlines()
    assert "# HELP descheduler_pods_evicted [ALPHA] Number of evicted pods" in text


@pytest.mark.parametrize(("leads", "value"), [(False, "0.0"), (True, "1.0")])
def test_leader_status_is_client_gos_gauge_named_koord_descheduler(leads: bool, value: str) -> None:
    m = DeschedulerMetrics()
    m.set_leader_status("koord-descheduler", leads)
    text = m.exposition().decode()
    assert families(text)["leader_election_master_status"] == "gauge"
    assert f'leader_election_master_status{{name="koord-descheduler"}} {value}' in text.splitlines()


@pytest.mark.parametrize(
    ("process_metrics", "present"),
    [
        (True, {"process_cpu_seconds_total", "process_resident_memory_bytes", "python_info"}),
        (False, set()),
    ],
)
def test_process_platform_and_gc_collectors(process_metrics: bool, present: set[str]) -> None:
    names = sample_names(DeschedulerMetrics(process_metrics=process_metrics).exposition().decode())
    runtime = {n for n in names if n.startswith(("process_", "python_"))}
    assert present <= runtime
    assert bool(runtime) == process_metrics
    if process_metrics:
        assert "python_gc_collections_total" in names


DESCHEDULER_CONFIG = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerConfiguration",
    "deschedulingInterval": "1h",
    "leaderElection": {"resourceName": LEASE, "resourceNamespace": LEASE_NS},
    "profiles": [
        {"name": "koord-descheduler", "plugins": {"balance": {"enabled": [{"name": "LowNodeLoad"}]}}}
    ],
}


@pytest.fixture(autouse=True)
def no_numba_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(koordsched.kernels, "warm_up", lambda: None)


async def test_metrics_carry_descheduler_series_only(api: FakeApiServer, tmp_path: Path) -> None:
    """A pending pod in the cluster: the embedded scheduler caches it, yet /metrics shows no
    scheduler_pending_pods (nor any scheduler_* series), while the API client's, the leader's
    and the process' series are there."""
    api.add(NODES, node_json("n1"))
    api.add(PODS, pod_json("running", node="n1", scheduler="default-scheduler", cpu="1"))
    api.add(PODS, pod_json("pending", scheduler="default-scheduler"))
    _, kubeconfig = write_files(tmp_path, api)
    config = tmp_path / "descheduler.yaml"
    config.write_text(yaml.safe_dump(DESCHEDULER_CONFIG))
    registry = in_tree_registry()
    port = free_port()
    runner = DeschedulerRunner(
        load_descheduler_config(config, in_tree_catalog()),
        load_config(default_profile_path(), registry),
        registry,
        kubeconfig=kubeconfig,
        # /metrics open to an anonymous scrape here: the delegated authn/authz is tested elsewhere.
        serving=ServingOptions(
            bind_address="127.0.0.1",
            secure_port=port,
            authorization=AuthorizationOptions(always_allow_paths=("/metrics", "/readyz")),
        ),
    )
    stop = asyncio.Event()
    task = asyncio.ensure_future(runner.run(stop))
    try:
        await eventually(lambda: task.done() or runner.rounds >= 1, within=20)
        assert not task.done(), task.result()
        async with (
            aiohttp.ClientSession() as s,
            s.get(f"https://127.0.0.1:{port}/metrics", ssl=False) as r,
        ):
            assert r.status == 200
            text = await r.text()
    finally:
        stop.set()
        code = await asyncio.wait_for(task, 10)
    assert code == 0
    names = sample_names(text)
    assert not {n for n in names if n.startswith("scheduler_")}, sorted(names)
    assert {
        "descheduler_pod_migration_jobs",
        "leader_election_master_status",
        "rest_client_requests_total",
        "rest_client_request_duration_seconds_bucket",
        "process_resident_memory_bytes",
    } <= names
    assert 'leader_election_master_status{name="koord-descheduler"} 1.0' in text.splitlines()
    assert re.search(r'^rest_client_requests_total\{code="200",host="[^"]+",method="GET"\} \d', text, re.M)
    # After the stop the Lease is released and the gauge says so.
    assert 'leader_election_master_status{name="koord-descheduler"} 0.0' in (
        runner.metrics.exposition().decode().splitlines()
    )
