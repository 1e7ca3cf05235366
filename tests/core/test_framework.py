"""Framework runtime and scheduling/binding cycles with small fake plugins.

Covers plugin order, first-rejection reasons, PreFilter/PreScore Skip, weights and
normalisation, Reserve rollback, Permit Wait with allow/reject/timeout from other
code paths, bind failure rollback, and the FailedScheduling text.
"""

from __future__ import annotations

from typing import cast

import msgspec
import numpy as np
import pytest

from koordsched.api.core import Pod
from koordsched.api.kinds import ObjectKind
from koordsched.backends.sim.attempts import Attempt, AttemptRecorder
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Codes, Rows, Scores
from koordsched.framework.registry import PluginSpec, Registry
from koordsched.framework.runtime import BatchFilter, PerNodeFilter
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SKIP, SUCCESS, Code, Status
from koordsched.framework.types import PodInfo, PreFilterResult
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.schedule_one import num_feasible_nodes_to_find
from koordsched.scheduler.scheduler import Scheduler
from tests.builders import node, pod
from tests.core.harness import CALLS, B, Bind, FakePlugin, Port, Sort, make_scheduler, run_all


class Pre(FakePlugin):
    name = "Pre"

    def pre_filter(self, state: CycleState, p: PodInfo) -> tuple[PreFilterResult | None, Status]:
        CALLS.append("Pre.pre_filter")
        if B.get("pre_skip"):
            return None, SKIP
        if B.get("pre_reject"):
            return None, Status.unresolvable("pod is malformed")
        names = B.get("pre_nodes")
        return (PreFilterResult(set(names)) if names is not None else None), SUCCESS

    def pre_filter_extensions(self) -> None:
        return None

    def filter(self, state: CycleState, p: PodInfo, n: NodeInfo) -> Status:
        CALLS.append(f"Pre.filter:{n.name}")
        return SUCCESS


class VecNo(FakePlugin):
    """Batch filter rejecting the nodes listed in B['vec_no']."""

    name = "VecNo"

    def filter_batch(self, state: CycleState, p: PodInfo, rows: Rows) -> Codes:
        bad = set(B.get("vec_no", ()))
        names = [self.handle.snapshot.infos[r].name for r in rows.tolist()]
        return np.asarray([2 if n in bad else 0 for n in names], dtype=np.int64)

    def explain(self, state: CycleState, p: PodInfo, code: int) -> Status:
        return Status.unschedulable("Insufficient cpu", "Insufficient memory")


class NodeNo(FakePlugin):
    """Per-node filter rejecting the nodes listed in B['node_no']."""

    name = "NodeNo"

    def filter(self, state: CycleState, p: PodInfo, n: NodeInfo) -> Status:
        CALLS.append(f"NodeNo:{n.name}")
        if n.name in B.get("node_no", ()):
            return Status.unresolvable("node(s) had untolerated taint {gpu: true}")
        return SUCCESS


class Vec(FakePlugin):
    name = "Vec"

    def pre_score(self, state: CycleState, p: PodInfo, rows: Rows) -> Status:
        return SKIP if B.get("vec_skip") else SUCCESS

    def score_batch(self, state: CycleState, p: PodInfo, rows: Rows) -> Scores:
        table = B.get("vec_scores", {})
        return np.asarray([table.get(self.handle.snapshot.infos[r].name, 0) for r in rows.tolist()])


class Per(FakePlugin):
    name = "Per"

    def score(self, state: CycleState, p: PodInfo, n: NodeInfo) -> tuple[int, Status]:
        return B.get("per_scores", {}).get(n.name, 0), SUCCESS

    def normalize_score(self, state: CycleState, p: PodInfo, rows: Rows, scores: Scores) -> Status:
        top = scores.max() if len(scores) else 0
        if top:
            scores[:] = scores * 100 // top
        return SUCCESS


class Res(FakePlugin):
    name = "Res"

    def reserve(self, state: CycleState, p: PodInfo, node_name: str) -> Status:
        CALLS.append(f"Res.reserve:{node_name}")
        return Status.unschedulable("no room left") if B.get("reserve_fail") else SUCCESS

    def unreserve(self, state: CycleState, p: PodInfo, node_name: str) -> None:
        CALLS.append(f"Res.unreserve:{node_name}")


class Res2(Res):
    name = "Res2"

    def reserve(self, state: CycleState, p: PodInfo, node_name: str) -> Status:
        CALLS.append(f"Res2.reserve:{node_name}")
        return SUCCESS

    def unreserve(self, state: CycleState, p: PodInfo, node_name: str) -> None:
        CALLS.append(f"Res2.unreserve:{node_name}")


class Gate(FakePlugin):
    name = "Gate"

    def permit(self, state: CycleState, p: PodInfo, node_name: str) -> tuple[Status, float]:
        if B.get("permit_reject"):
            return Status.unschedulable("gang is broken"), 0.0
        if B.get("permit_wait"):
            return Status(Code.WAIT), B.get("permit_timeout", 30.0)
        return SUCCESS, 0.0


#: A per-node kind whose objects are plain dicts (the tests below need no real Device).
DEVICE_DICTS: ObjectKind[dict[str, int]] = ObjectKind(
    "Device", dict, "/apis/test/v1/devices", False, per_node=True
)
REGISTRY = Registry(
    [PluginSpec.of(c) for c in (Sort, Pre, VecNo, NodeNo, Vec, Per, Res, Res2, Gate)]
    # One plugin reading a per-node kind, as DeviceShare reads Devices.
    + [PluginSpec.of(Bind, kinds=(DEVICE_DICTS,))]
)

PROFILE = b"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
profiles:
- schedulerName: koord-scheduler
  plugins:
    queueSort: {enabled: [{name: Sort}]}
    preFilter: {enabled: [{name: Pre}]}
    filter: {enabled: [{name: VecNo}, {name: NodeNo}]}
    preScore: {enabled: [{name: Vec}]}
    score: {enabled: [{name: Vec, weight: 2}, {name: Per, weight: 1}]}
    reserve: {enabled: [{name: Res2}, {name: Res}]}
    permit: {enabled: [{name: Gate}]}
    bind: {enabled: [{name: Bind}]}
"""


def last_attempt(sched: Scheduler) -> Attempt:
    assert isinstance(sched.observer, AttemptRecorder)
    assert sched.observer.last is not None
    return sched.observer.last


def make(nodes: int = 3) -> tuple[Scheduler, Port, VirtualClock]:
    clock = VirtualClock()
    sched, port = make_scheduler(PROFILE, REGISTRY, clock, observer=AttemptRecorder())
    for i in range(nodes):
        sched.on_node_add(node(f"n{i}"))
    return sched, port, clock


async def test_highest_weighted_score_wins() -> None:
    sched, port, _ = make()
    B["vec_scores"] = {"n0": 10, "n1": 50, "n2": 40}
    B["per_scores"] = {"n0": 100, "n1": 0, "n2": 50}  # normalised to 100, 0, 50
    # totals: n0 = 20 + 100 = 120, n1 = 100 + 0 = 100, n2 = 80 + 50 = 130
    sched.on_pod_add(pod("p"))
    await run_all(sched)
    assert port.bound == {"p": "n2"}
    assert sched.cache.node("n2").requested("cpu") == 100  # type: ignore[union-attr]


async def test_prescore_skip_drops_that_plugins_score() -> None:
    sched, port, _ = make()
    B["vec_skip"] = True
    B["vec_scores"] = {"n0": 100}
    B["per_scores"] = {"n1": 5}
    sched.on_pod_add(pod("p"))
    await run_all(sched)
    assert port.bound == {"p": "n1"}


async def test_prefilter_skip_skips_the_plugins_filter() -> None:
    sched, _, _ = make()
    sched.frameworks["koord-scheduler"].profile.points["filter"].insert(0, ("Pre", 1))
    fw = sched.frameworks["koord-scheduler"]
    fw.filters.insert(0, PerNodeFilter(cast(Pre, fw.plugins["Pre"])))
    B["pre_skip"] = True
    sched.on_pod_add(pod("p"))
    await run_all(sched)
    assert not [c for c in CALLS if c.startswith("Pre.filter")]


async def test_first_rejecting_plugin_gives_the_reason() -> None:
    sched, port, _ = make()
    B["vec_no"] = ["n0", "n1"]
    B["node_no"] = ["n1", "n2"]  # n1 is already rejected by VecNo: NodeNo never sees it
    sched.on_pod_add(pod("p"))
    await run_all(sched)
    assert "NodeNo:n1" not in CALLS
    name, reason, message = port.failures[-1]
    assert (name, reason) == ("p", "Unschedulable")
    assert message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {gpu: true}, "
        "2 Insufficient cpu, 2 Insufficient memory."
    )
    assert last_attempt(sched).result == "unschedulable"
    p = sched.queue.get("uid-default-p")
    assert p is not None and p.unschedulable_plugins == {"VecNo", "NodeNo"}


async def test_prefilter_rejection_message_is_used_alone() -> None:
    sched, port, _ = make()
    B["pre_reject"] = True
    sched.on_pod_add(pod("p"))
    await run_all(sched)
    assert port.failures[-1][2] == "0/3 nodes are available: pod is malformed."


async def test_prefilter_result_narrows_candidates() -> None:
    sched, port, _ = make()
    B["pre_nodes"] = ["n1"]
    B["vec_scores"] = {"n0": 100, "n2": 100}
    sched.on_pod_add(pod("p"))
    await run_all(sched)
    assert port.bound == {"p": "n1"}


async def test_no_nodes_message() -> None:
    sched, port, _ = make(nodes=0)
    sched.on_pod_add(pod("p"))
    await run_all(sched)
    assert port.failures[-1][2] == "no nodes available to schedule pods"


async def test_reserve_failure_unreserves_in_reverse_and_forgets() -> None:
    sched, port, _ = make(nodes=1)
    B["reserve_fail"] = True
    sched.on_pod_add(pod("p"))
    await run_all(sched)
    assert CALLS[-4:] == ["Res2.reserve:n0", "Res.reserve:n0", "Res.unreserve:n0", "Res2.unreserve:n0"]
    assert sched.cache.node("n0").requested("cpu") == 0  # type: ignore[union-attr]
    assert port.failures[-1][2] == "no room left"
    assert not port.bound


async def test_permit_wait_then_allow_from_elsewhere() -> None:
    sched, port, _ = make(nodes=1)
    B["permit_wait"] = True
    sched.on_pod_add(pod("p"))
    await sched.step()
    wp = sched.handle.waiting_pod("uid-default-p")
    assert wp is not None and wp.pending_plugins() == ["Gate"]
    # Capacity stays reserved while waiting.
    assert sched.cache.node("n0").requested("cpu") == 100  # type: ignore[union-attr]
    assert last_attempt(sched).result == "waiting"
    wp.allow("Gate")
    await sched.drain_bindings()
    assert port.bound == {"p": "n0"}
    assert last_attempt(sched).result == "scheduled"


async def test_permit_reject_from_elsewhere_rolls_back() -> None:
    sched, port, _ = make(nodes=1)
    B["permit_wait"] = True
    sched.on_pod_add(pod("p"))
    await sched.step()
    wp = sched.handle.waiting_pod("uid-default-p")
    assert wp is not None
    wp.reject("Gate", "gang member failed")
    await sched.drain_bindings()
    assert not port.bound
    assert sched.cache.node("n0").requested("cpu") == 0  # type: ignore[union-attr]
    assert port.failures[-1][2] == "gang member failed"
    assert "Res.unreserve:n0" in CALLS
    assert sched.queue.where("uid-default-p") == "unschedulable"


async def test_permit_timeout_rejects() -> None:
    sched, port, clock = make(nodes=1)
    B["permit_wait"] = True
    B["permit_timeout"] = 5.0
    sched.on_pod_add(pod("p"))
    await sched.step()
    clock.advance(4)
    assert sched.waiting_pods.expire(clock.now()) == 0
    clock.advance(2)
    assert sched.waiting_pods.expire(clock.now()) == 1
    await sched.drain_bindings()
    assert not port.bound
    assert "timeout" in port.failures[-1][2]


async def test_permit_rejection_is_unschedulable() -> None:
    sched, port, _ = make(nodes=1)
    B["permit_reject"] = True
    sched.on_pod_add(pod("p"))
    await run_all(sched)
    assert port.failures[-1][1:] == ("Unschedulable", "gang is broken")
    assert sched.cache.node("n0").requested("cpu") == 0  # type: ignore[union-attr]


async def test_bind_failure_rolls_back_and_retries_after_backoff() -> None:
    sched, port, clock = make(nodes=1)
    port.fail_binds = 1
    sched.on_pod_add(pod("p"))
    await run_all(sched)
    assert not port.bound
    assert port.failures[-1][1] == "SchedulerError"
    assert sched.cache.node("n0").requested("cpu") == 0  # type: ignore[union-attr]
    assert sched.queue.where("uid-default-p") == "backoff"
    clock.advance(1.0)
    sched.queue.flush_backoff_completed()
    await run_all(sched)
    assert port.bound == {"p": "n0"}
    assert sched.cache.node("n0").requested("cpu") == 100  # type: ignore[union-attr]


async def test_pods_for_other_schedulers_are_left_alone_but_counted() -> None:
    sched, port, _ = make(nodes=1)
    sched.on_pod_add(pod("other", scheduler="default-scheduler"))
    sched.on_pod_add(pod("running", cpu="1", scheduler="default-scheduler", node_name="n0"))
    await run_all(sched)
    assert not port.bound
    assert sched.cache.node("n0").requested("cpu") == 1000  # type: ignore[union-attr]


async def test_invalid_quantity_is_reported_on_the_pod() -> None:
    sched, port, _ = make(nodes=1)
    sched.on_pod_add(pod("bad", cpu="two"))
    await run_all(sched)
    assert port.failures[-1][0:2] == ("bad", "Invalid")
    assert "two" in port.failures[-1][2]
    assert len(sched.queue) == 0


async def test_higher_priority_is_scheduled_first() -> None:
    sched, _, _ = make(nodes=1)
    sched.on_pod_add(pod("low", priority=1))
    sched.on_pod_add(pod("high", priority=100))
    first = sched.queue.pop()
    assert first is not None and first.key == "default/high"


@pytest.mark.parametrize(
    ("pct", "nodes", "expected"),
    [
        (0, 50, 50),
        (0, 1000, 420),
        (0, 5000, 500),
        (0, 6000, 300),
        (10, 5000, 500),
        (100, 5000, 5000),
        (1, 5000, 100),
        (0, 100_000, 5000),
    ],
)
def test_num_feasible_nodes_to_find(pct: int, nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(pct, nodes) == expected


async def test_percentage_of_nodes_to_score_limits_and_rotates() -> None:
    sched, _port, _ = make(nodes=0)
    for i in range(200):
        sched.on_node_add(node(f"n{i:03d}"))
    fw = sched.frameworks["koord-scheduler"]
    state = CycleState()
    from koordsched.framework.diagnosis import Diagnosis

    rows = np.arange(200, dtype=np.int64)
    feasible, examined = fw.find_feasible(state, PodInfo(pod("p"), {}), rows, 100, Diagnosis(200))
    assert len(feasible) == 100 and examined == 100
    assert feasible.tolist() == list(range(100))


async def test_cycle_and_binding_are_one_trace() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON

    from koordsched.observability.tracing import CycleTracer

    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_ON)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sched, _ = make_scheduler(PROFILE, REGISTRY, tracer=CycleTracer(provider))
    sched.on_node_add(node("n0"))
    sched.on_node_add(node("n1"))
    sched.on_pod_add(pod("p"))
    await run_all(sched)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    root = spans["scheduling_cycle"]
    assert {"PreFilter", "Filter", "Score", "Reserve", "Permit", "binding_cycle", "Bind"} <= set(spans)
    assert {s.context.trace_id for s in spans.values()} == {root.context.trace_id}
    assert spans["binding_cycle"].parent is not None
    assert spans["binding_cycle"].parent.span_id == root.context.span_id
    assert spans["Bind"].parent.span_id == spans["binding_cycle"].context.span_id  # type: ignore[union-attr]


async def test_run_loop_binds_concurrently_and_stops_cleanly() -> None:
    import asyncio

    from koordsched.scheduler.clock import MonotonicClock

    sched, port = make_scheduler(PROFILE, REGISTRY, MonotonicClock())
    for i in range(3):
        sched.on_node_add(node(f"n{i}"))
    stop = asyncio.Event()
    runner = asyncio.create_task(sched.run(stop))
    for i in range(20):
        sched.on_pod_add(pod(f"p{i}"))
    for _ in range(2000):  # up to 20 s on a slow machine; normally a few milliseconds
        if len(port.bound) == 20:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(runner, 5.0)
    assert len(port.bound) == 20
    assert sched.cache.sizes()["pods"] == 20


async def test_status_only_update_does_not_wake_an_unschedulable_pod() -> None:
    sched, _, _ = make(nodes=1)
    B["vec_no"] = ["n0"]
    first = pod("p")
    sched.on_pod_add(first)
    await run_all(sched)
    assert sched.queue.where("uid-default-p") == "unschedulable"
    patched = msgspec.convert(
        {
            **msgspec.to_builtins(first),
            "status": {"conditions": [{"type": "PodScheduled", "status": "False"}]},
        },
        Pod,
    )
    sched.on_pod_update(first, patched)
    assert sched.queue.where("uid-default-p") == "unschedulable"
    assert sched.queue.get("uid-default-p").pod is patched  # type: ignore[union-attr]
    relabelled = msgspec.convert(
        {
            **msgspec.to_builtins(patched),
            "metadata": {**msgspec.to_builtins(patched.metadata), "labels": {"a": "b"}},
        },
        Pod,
    )
    sched.on_pod_update(patched, relabelled)
    assert sched.queue.where("uid-default-p") in ("active", "backoff")


class _Ext:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def add_pod(self, state: CycleState, p: PodInfo, other: PodInfo, n: NodeInfo) -> Status:
        self.seen.append(f"add {other.key} {n.name}")
        return Status.unschedulable("would not fit") if B.get("ext_reject") else SUCCESS

    def remove_pod(self, state: CycleState, p: PodInfo, other: PodInfo, n: NodeInfo) -> Status:
        self.seen.append(f"remove {other.key} {n.name}")
        return SUCCESS


async def test_prefilter_extensions_reach_plugins_that_did_not_skip() -> None:
    sched, _, _ = make(nodes=1)
    fw = sched.frameworks["koord-scheduler"]
    ext = _Ext()
    fw.plugins["Pre"].pre_filter_extensions = lambda: ext
    state = CycleState()
    me, other = PodInfo(pod("me"), {}), PodInfo(pod("other"), {})
    assert fw.run_pre_filter_add_pod(state, me, other, "n0").ok
    assert fw.run_pre_filter_remove_pod(state, me, other, "n0").ok
    assert ext.seen == ["add default/other n0", "remove default/other n0"]
    B["ext_reject"] = True
    status = fw.run_pre_filter_add_pod(state, me, other, "n0")
    assert (status.code, status.plugin) == (Code.UNSCHEDULABLE, "Pre")
    state.skip_filter.add("Pre")
    assert fw.run_pre_filter_add_pod(state, me, other, "n0").ok


async def test_batch_filter_after_a_per_node_filter_keeps_first_reason_order() -> None:
    # Profile order VecNo (batch), NodeNo (per node); put another batch filter after NodeNo.
    sched, port, _ = make(nodes=3)
    fw = sched.frameworks["koord-scheduler"]
    late = VecNo(None, fw.handle)
    late.name = "LateVec"
    fw.filters.append(BatchFilter(late))
    B["node_no"] = ["n0"]
    B["vec_no"] = []
    sched.on_pod_add(pod("p"))
    await run_all(sched)
    assert port.bound["p"] in ("n1", "n2")
    # Now LateVec rejects n1 and n2: n0 keeps NodeNo's reason (it came first), the others LateVec's.
    B["late"] = True
    late.filter_batch = lambda state, p, rows: np.asarray(  # type: ignore[method-assign]
        [0 if fw.handle.snapshot.infos[r].name == "n0" else 2 for r in rows.tolist()], dtype=np.int64
    )
    sched.on_pod_add(pod("q"))
    await run_all(sched)
    assert port.failures[-1][2] == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {gpu: true}, "
        "2 Insufficient cpu, 2 Insufficient memory."
    )


async def test_watched_objects_raise_cluster_events() -> None:
    sched, _, _ = make(nodes=1)
    seen: list[str] = []
    sched.queue.on_cluster_event = lambda ev, old=None, new=None: seen.append(ev.name) or 0  # type: ignore[method-assign]
    sched.on_object("Device", "n0", {"v": 1})
    sched.on_object("Device", "n0", {"v": 2})
    sched.on_object("Device", "n0", None)
    sched.on_object("Device", "n0", None)  # already gone: no event
    assert seen == ["DeviceAdd", "DeviceUpdate", "DeviceDelete"]
    assert "n0" not in sched.handle.objects(DEVICE_DICTS)


async def test_an_object_not_of_its_kinds_type_never_reaches_the_plugins() -> None:
    sched, _, _ = make(nodes=1)
    seen: list[str] = []
    sched.queue.on_cluster_event = lambda ev, old=None, new=None: seen.append(ev.name) or 0  # type: ignore[method-assign]
    sched.on_object("Device", "n0", "not a dict")
    assert seen == []
    assert "n0" not in sched.handle.objects(DEVICE_DICTS)


async def test_per_node_objects_mark_their_node_changed() -> None:
    sched, _, _ = make(nodes=2)
    snap = sched.cache.snapshot
    before = snap.row_gen[: snap.n].tolist()
    sched.on_object("Device", "n1", {"v": 1})
    after = snap.row_gen[: snap.n].tolist()
    assert after[0] == before[0] and after[1] > before[1]
    sched.on_object("Reservation", "n0", {"v": 1})  # not a per-node kind
    assert snap.row_gen[0] == before[0]
