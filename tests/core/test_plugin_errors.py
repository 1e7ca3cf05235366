"""A plugin that raises at any extension point fails its pod's attempt, never the scheduler, and
the pod is told which plugin failed where, in kube-scheduler's words (framework/plugin_calls.py).

The plugins are test_framework.py's fakes on the shared harness (tests/core/harness.py);
``Extra`` adds the points that profile leaves out (PreEnqueue, FindOneNode, PostFilter, PreBind,
PostBind),
and its PostFilter takes a pod off a node the way preemption's dry run does, which reaches the
PreFilter RemovePod extensions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import pytest

from koordsched.backends.sim.attempts import AttemptRecorder
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import NodeStatusMap, Rows
from koordsched.framework.plugin_calls import _WORDING
from koordsched.framework.registry import PluginSpec, Registry
from koordsched.framework.runtime import PerNodeFilter
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.framework.types import BindingPlan, PodInfo, PostFilterResult
from koordsched.scheduler.scheduler import Scheduler
from tests.builders import node, pod
from tests.core.harness import CALLS, B, FakePlugin, Port, make_scheduler, run_all
from tests.core.test_framework import PROFILE, REGISTRY

NODES_FULL = "0/3 nodes are available: 3 Insufficient cpu, 3 Insufficient memory."


class Extra(FakePlugin):
    """The points the harness's profile has no plugin at."""

    name = "Extra"

    def pre_enqueue(self, p: PodInfo) -> Status:
        return SUCCESS

    def post_filter(
        self, state: CycleState, p: PodInfo, statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status]:
        # As preemption's dry run: take the pod on n0 off it, and ask the PreFilter extensions.
        info = self.handle.snapshot.by_name["n0"]
        trial = self.handle.node_trial(state, info)
        try:
            status = trial.remove(p, next(iter(info.pods.values())))
        finally:
            trial.undo()
        return None, status if not status.ok else Status.unschedulable("no victims")

    def find_one_node(self, state: CycleState, p: PodInfo, rows: Rows) -> tuple[str | None, Status]:
        return None, Status(Code.SKIP)

    async def pre_bind(self, state: CycleState, p: PodInfo, node_name: str, plan: BindingPlan) -> Status:
        return SUCCESS

    def post_bind(self, state: CycleState, p: PodInfo, node_name: str) -> None:
        CALLS.append("Extra.post_bind")


EXTRA_REGISTRY = REGISTRY.merge(Registry([PluginSpec.of(Extra)]))
EXTRA_PROFILE = (
    PROFILE
    + b"""    preEnqueue: {enabled: [{name: Extra}]}
    postFilter: {enabled: [{name: Extra}]}
    preBind: {enabled: [{name: Extra}]}
    postBind: {enabled: [{name: Extra}]}
"""
)


def _boom(*args: Any) -> Any:
    raise RuntimeError("boom")


async def _boom_async(*args: Any) -> Any:
    raise RuntimeError("boom")


class _Raising:
    """PreFilter extensions that raise when a pod is added or removed."""

    add_pod = remove_pod = staticmethod(_boom)


@dataclass(frozen=True)
class Case:
    point: str
    plugin: str
    method: str
    #: What the pod is told: (reason, message); None where the pod does not fail (the point only logs).
    told: tuple[str, str] | None
    #: Harness behaviour (test_framework.B) the case needs to reach its point.
    needs: dict[str, Any] = field(default_factory=dict)
    #: What the log must say, where the point's failure is only logged.
    logged: str = ""


ALL_FULL = {"vec_no": ["n0", "n1", "n2"]}

CASES = [
    Case("PreEnqueue", "Extra", "pre_enqueue", ("Unschedulable", 'running PreEnqueue plugin "Extra": boom')),
    Case("PreFilter", "Pre", "pre_filter", ("SchedulerError", 'running PreFilter plugin "Pre": boom')),
    Case(
        "PreFilterExtensionAddPod",
        "Pre",
        "pre_filter_extensions",
        ("SchedulerError", 'running AddPod on PreFilter plugin "Pre": boom'),
    ),
    Case(
        "PreFilterExtensionRemovePod",
        "Pre",
        "pre_filter_extensions",
        ("Unschedulable", f'{NODES_FULL} running RemovePod on PreFilter plugin "Pre": boom.'),
        ALL_FULL,
    ),
    Case(
        "Filter (batch)", "VecNo", "filter_batch", ("SchedulerError", 'running "VecNo" filter plugin: boom')
    ),
    Case("Filter (per node)", "NodeNo", "filter", ("SchedulerError", 'running "NodeNo" filter plugin: boom')),
    Case(
        "PostFilter",
        "Extra",
        "post_filter",
        ("Unschedulable", f'{NODES_FULL} running PostFilter plugin "Extra": boom.'),
        ALL_FULL,
    ),
    Case(
        "FindOneNode",
        "Extra",
        "find_one_node",
        ("SchedulerError", 'running FindOneNode plugin "Extra": boom'),
    ),
    Case("PreScore", "Vec", "pre_score", ("SchedulerError", 'running PreScore plugin "Vec": boom')),
    Case(
        "Score (batch)",
        "Vec",
        "score_batch",
        ("SchedulerError", 'running Score plugins: plugin "Vec" failed with: boom'),
    ),
    Case(
        "Score (per node)",
        "Per",
        "score",
        ("SchedulerError", 'running Score plugins: plugin "Per" failed with: boom'),
    ),
    Case(
        "ScoreExtensionNormalize",
        "Per",
        "normalize_score",
        ("SchedulerError", 'running Normalize on Score plugins: plugin "Per" failed with: boom'),
    ),
    Case("Reserve", "Res", "reserve", ("SchedulerError", 'running Reserve plugin "Res": boom')),
    Case(
        "Unreserve",
        "Res",
        "unreserve",
        ("Unschedulable", "gang is broken"),  # Permit's rejection is what the pod is told
        {"permit_reject": True},
        logged="Unreserve failed for pod default/p on node n",  # ... 'running Unreserve plugin "Res": boom'
    ),
    Case("Permit", "Gate", "permit", ("SchedulerError", 'running Permit plugin "Gate": boom')),
    Case("PreBind", "Extra", "pre_bind", ("SchedulerError", 'running PreBind plugin "Extra": boom')),
    Case("Bind", "Bind", "bind", ("SchedulerError", 'running Bind plugin "Bind": boom')),
    Case("PostBind", "Extra", "post_bind", None, logged="PostBind failed for pod default/p bound to node"),
]


def _make() -> tuple[Scheduler, Port]:
    sched, port = make_scheduler(EXTRA_PROFILE, EXTRA_REGISTRY, observer=AttemptRecorder())
    for i in range(3):
        sched.on_node_add(node(f"n{i}"))
    return sched, port


def _break(sched: Scheduler, case: Case) -> None:
    """Make ``case.plugin`` raise at ``case.point`` (on the instance: the class stays as it is)."""
    fw = sched.frameworks["koord-scheduler"]
    plugin = fw.plugins[case.plugin]
    if case.method == "pre_filter_extensions":
        setattr(plugin, "pre_filter_extensions", _Raising)  # noqa: B010 (an instance attribute)
        # The extensions are asked only for a PreFilter plugin that also filters (its state counts).
        fw.filters.insert(0, PerNodeFilter(plugin))  # type: ignore[arg-type]
        return
    raiser = _boom_async if case.method in ("pre_bind", "bind") else _boom
    setattr(plugin, case.method, raiser)


def _mend(sched: Scheduler, case: Case) -> None:
    fw = sched.frameworks["koord-scheduler"]
    delattr(fw.plugins[case.plugin], case.method)
    if case.method == "pre_filter_extensions":
        fw.filters.pop(0)


@pytest.mark.parametrize("case", CASES, ids=[c.point for c in CASES])
async def test_a_raising_plugin_fails_only_its_pod_and_is_named(
    case: Case, caplog: pytest.LogCaptureFixture
) -> None:
    sched, port = _make()
    sched.holds.synced = True  # a PreEnqueue hold is reported on the pod
    B.update(case.needs)
    _break(sched, case)
    if case.point == "PreFilterExtensionAddPod":
        # A pod nominated to n0 (an earlier preemption's): n0 is checked with it added.
        sched.nominator.add(PodInfo(pod("nominee"), {}, priority=10), "n0")
    if case.point == "PreFilterExtensionRemovePod":
        sched.on_pod_add(pod("victim", node_name="n0"))
    with caplog.at_level(logging.INFO):
        sched.on_pod_add(pod("p"))
        await run_all(sched)
        await sched.drain_bindings()
    failures = [(reason, message) for name, reason, message in port.failures if name == "p"]
    if case.told is None:
        assert "p" in port.bound
        assert not failures
    else:
        assert failures == [case.told]
        assert "p" not in port.bound
    if case.logged:
        assert any(case.logged in r.getMessage() for r in caplog.records), caplog.text
        if case.point == "Unreserve":
            assert 'running Unreserve plugin "Res": boom' in caplog.text
    if case.point in ("Reserve", "Unreserve"):
        # Unreserve reached every Reserve plugin, the failing one's successor included.
        assert any(c.startswith("Res2.unreserve:") for c in CALLS)

    # The scheduler goes on: once the plugin is mended, the next pod is placed.
    _mend(sched, case)
    B.clear()
    sched.on_pod_add(pod("next"))
    await run_all(sched)
    await sched.drain_bindings()
    assert "next" in port.bound


def test_every_point_has_a_case() -> None:
    """Each point the plugin calls word a failure for has a case above (both shapes of Filter and
    Score count once)."""
    assert {c.point.split(" ")[0] for c in CASES} == set(_WORDING)
