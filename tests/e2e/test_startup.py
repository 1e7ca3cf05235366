"""``koordsched run`` as a process against a real API server: its start-up order, and its traces over OTLP.

Start-up: /livez answers before the plugins and their numba kernels are loaded (the health server
starts first; loading runs in a worker thread), and /readyz only once the caches are synced. The
assertions are about order, read off the process's own ``start-up:`` log lines at the moment a
probe first answers, with only a generous wall-clock bound (the suite runs on loaded machines);
bench/coldstart.py measures the times.

Tracing: with OTEL_TRACES_EXPORTER=otlp the process exports its scheduling and binding cycles to
an OTLP/HTTP receiver this test starts; the batch processor's delay is set far beyond the test,
so the spans arrive in the flush the graceful stop does (SIGTERM, exit 0).
"""

from __future__ import annotations

import asyncio
import re
import signal
import time
from pathlib import Path

import pytest

from koordsched import __version__
from koordsched.observability.tracing import BINDING_SPAN_NAME, CYCLE_SPAN_NAME
from tests.e2e.helpers import (
    Cluster,
    SchedulerProcess,
    http_status,
    node_of,
    scheduler_processes,
    unique,
    wait_for,
    write_profile,
)
from tests.otlp import OtlpReceiver, ReceivedSpan

pytestmark = pytest.mark.e2e

#: The Deployment's startupProbe gives the process 30 s to answer /livez; on an idle machine it
#: takes about 0.6 s (bench/coldstart.py), this bound only catches a start that blocks on something.
LIVEZ_BOUND = 30.0
_PHASE = re.compile(r"start-up: (.+?) after ([\d.]+)s")


def phases(text: str) -> list[str]:
    return [m.group(1) for m in _PHASE.finditer(text)]


@pytest.fixture(scope="module", autouse=True)
def warm_numba_cache() -> None:
    """The kernels are in numba's cache (as the image ships them) before a process loads them."""
    from koordsched.plugins.registry import in_tree_registry

    in_tree_registry().warm_up()


async def test_livez_answers_before_the_kernels_load_and_readyz_after_the_caches_sync(
    cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path
) -> None:
    await cluster.add_node("n")
    config = write_profile(tmp_path / "profile.yaml", lease_name=unique("startup"), leader_elect=False)
    with scheduler_processes() as procs:
        spawned = time.monotonic()
        proc = SchedulerProcess("startup", config, scheduler_kubeconfig, tmp_path)
        procs.append(proc)
        livez_at: float | None = None
        seen_at_livez: list[str] = []
        readyz_at: float | None = None
        seen_at_readyz: list[str] = []
        while readyz_at is None:
            elapsed = time.monotonic() - spawned
            assert proc.alive, proc.tail()
            assert elapsed < 120, f"/readyz not 200 after {elapsed:.0f}s\n{proc.tail()}"
            if livez_at is None:
                assert elapsed < LIVEZ_BOUND, f"/livez not 200 after {elapsed:.0f}s\n{proc.tail()}"
                if await http_status(proc.port, "/livez") == 200:
                    livez_at, seen_at_livez = elapsed, phases(proc.log_text())
                    continue  # /readyz is asked from the next round on, after this log was read
            elif await http_status(proc.port, "/readyz") == 200:
                readyz_at, seen_at_readyz = elapsed, phases(proc.log_text())
            await asyncio.sleep(0.02)

        # /livez answered while the plugins were still loading: the health server came first.
        assert "serving" in seen_at_livez
        assert "plugins loaded" not in seen_at_livez and "kernels warm" not in seen_at_livez, seen_at_livez
        # /readyz only after every phase, in order.
        assert seen_at_readyz == ["serving", "plugins loaded", "kernels warm", "caches synced", "ready"]
        assert livez_at < readyz_at
        log = proc.log_text()
        # The kernels came from the cache this suite's own process filled, and the log says so.
        kernels = r"^I\d{4} [\d:.]+ +\d+ \S+:\d+\] \d+ numba kernel signatures loaded from the cache"
        assert re.search(kernels, log, re.M), log  # an info line, in klog's format
        assert "compiled at start-up" not in log
        proc.signal(signal.SIGTERM)
        assert await proc.wait_exit() == 0


async def _ready(proc: SchedulerProcess) -> bool:
    assert proc.alive, proc.tail()
    return await http_status(proc.port, "/readyz") == 200


SCHEDULING_STAGES = ["PreFilter", "Filter", "Score", "Reserve", "Permit"]
BINDING_STAGES = ["WaitOnPermit", "PreBind", "Bind"]


async def test_run_exports_its_cycles_to_an_otlp_http_receiver(
    cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for short in ("a", "b"):
        await cluster.add_node(short)
    config = write_profile(tmp_path / "profile.yaml", lease_name=unique("otlp"), leader_elect=False)
    with OtlpReceiver() as rx, scheduler_processes() as procs:
        monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint)
        monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_on")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "koordsched-e2e")
        # Batches wait 10 minutes: nothing goes out before the stop's flush.
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
        proc = SchedulerProcess("otlp", config, scheduler_kubeconfig, tmp_path)
        procs.append(proc)
        await wait_for(
            lambda: _ready(proc), timeout=120, what="the scheduler's /readyz to answer 200", detail=proc.tail
        )
        names = ["web-1", "web-2"]
        for name in names:
            await cluster.add_pod(name, cpu="100m", memory="64Mi")
        bound = await cluster.wait_bound(names)
        assert rx.requests == 0, "exported before the flush"
        proc.signal(signal.SIGTERM)
        assert await proc.wait_exit() == 0
        # The flush ran before the process exited: the spans are here, nothing to wait for.
        spans = [s for s in rx.spans if s.resource.get("service.name") == "koordsched-e2e"]
        assert rx.errors == []
    assert rx.content_types == {"application/x-protobuf"}

    ours = [s for s in spans if s.attributes.get("k8s.namespace.name") == cluster.ns]
    by_parent: dict[str, list[ReceivedSpan]] = {}
    for s in spans:
        by_parent.setdefault(s.parent_span_id, []).append(s)
    for name in names:
        [cycle] = [s for s in ours if s.name == CYCLE_SPAN_NAME and s.attributes["k8s.pod.name"] == name]
        assert not cycle.parent_span_id
        assert (cycle.scope, cycle.scope_version) == ("koordsched.scheduler", __version__)
        assert cycle.attributes["scheduler.profile"] == "koord-scheduler"
        assert cycle.attributes["scheduler.result"] == "scheduled"
        children = sorted(by_parent[cycle.span_id], key=lambda s: s.start_ns)
        [binding] = [s for s in children if s.name == BINDING_SPAN_NAME]
        assert [s.name for s in children if s is not binding] == SCHEDULING_STAGES
        assert all(s.trace_id == cycle.trace_id for s in children)
        # The node the API server holds for the pod is the one the cycle and binding spans name,
        # and both carry the pod's uid.
        assert (
            cycle.attributes["k8s.node.name"] == binding.attributes["k8s.node.name"] == node_of(bound[name])
        )
        uid = bound[name]["metadata"]["uid"]
        assert cycle.attributes["k8s.pod.uid"] == binding.attributes["k8s.pod.uid"] == uid
        assert all("scheduler.plugins.run" in s.attributes for s in children if s is not binding)
        assert binding.attributes["scheduler.result"] == "scheduled"
        stages = sorted(by_parent[binding.span_id], key=lambda s: s.start_ns)
        assert [s.name for s in stages] == BINDING_STAGES
        # The binding span covers the POST of the Binding to the real API server.
        assert stages[-1].end_ns - stages[-1].start_ns > 0
