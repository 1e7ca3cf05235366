"""A plugin that says at PreFilter it has nothing to do for the pod (``CycleState.skip_binding``)
is not called at Reserve, Unreserve, Permit, PreBind or PostBind; every other plugin still is,
in profile order. Per-plugin timings are taken on the sampled cycles only."""

from __future__ import annotations

import logging

import pytest

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.registry import PluginSpec, Registry
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import BindingPlan, PodInfo, PreFilterResult
from koordsched.scheduler import schedule_one
from koordsched.scheduler.scheduler import Scheduler
from tests.builders import node, pod
from tests.core.harness import CALLS, B, Bind, FakePlugin, PluginTimes, Port, Sort, make_scheduler, run_all


class _Recording(FakePlugin):
    """Every binding-side point, recorded; PreFilter opts out of them when B[name] says so."""

    def pre_filter(self, state: CycleState, p: PodInfo) -> tuple[PreFilterResult | None, Status]:
        if B.get(self.name):
            state.skip_binding.add(self.name)
        return None, SUCCESS

    def pre_filter_extensions(self) -> None:
        return None

    def reserve(self, state: CycleState, p: PodInfo, node_name: str) -> Status:
        CALLS.append(f"{self.name}.reserve")
        return SUCCESS

    def unreserve(self, state: CycleState, p: PodInfo, node_name: str) -> None:
        CALLS.append(f"{self.name}.unreserve")

    def permit(self, state: CycleState, p: PodInfo, node_name: str) -> tuple[Status, float]:
        CALLS.append(f"{self.name}.permit")
        return SUCCESS, 0.0

    async def pre_bind(self, state: CycleState, p: PodInfo, node_name: str, plan: BindingPlan) -> Status:
        CALLS.append(f"{self.name}.pre_bind")
        return SUCCESS

    def post_bind(self, state: CycleState, p: PodInfo, node_name: str) -> None:
        CALLS.append(f"{self.name}.post_bind")
        if B.get(f"{self.name}.post_bind_raises"):
            raise RuntimeError("post-bind bug")


class Plain(_Recording):
    name = "Plain"


class Other(_Recording):
    name = "Other"


REGISTRY = Registry([PluginSpec.of(c) for c in (Sort, Plain, Other, Bind)])
PROFILE = b"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
profiles:
- schedulerName: koord-scheduler
  plugins:
    queueSort: {enabled: [{name: Sort}]}
    preFilter: {enabled: [{name: Plain}, {name: Other}]}
    reserve: {enabled: [{name: Plain}, {name: Other}]}
    permit: {enabled: [{name: Plain}, {name: Other}]}
    preBind: {enabled: [{name: Plain}, {name: Other}]}
    bind: {enabled: [{name: Bind}]}
    postBind: {enabled: [{name: Plain}, {name: Other}]}
"""


async def _schedule_one_pod() -> tuple[Scheduler, Port]:
    sched, port = make_scheduler(PROFILE, REGISTRY)
    sched.on_node_add(node("n0"))
    sched.on_pod_add(pod("p"))
    await run_all(sched)
    return sched, port


ALL = ["reserve", "permit", "pre_bind", "post_bind"]


@pytest.mark.parametrize(
    ("plain_skips", "other_skips", "expected"),
    [
        (False, False, [f"{n}.{p}" for p in ALL for n in ("Plain", "Other")]),
        (True, False, [f"Other.{p}" for p in ALL]),
        (False, True, [f"Plain.{p}" for p in ALL]),
        (True, True, []),
    ],
)
async def test_binding_points_skip_the_plugins_that_said_so(
    plain_skips: bool, other_skips: bool, expected: list[str]
) -> None:
    B["Plain"], B["Other"] = plain_skips, other_skips
    _, port = await _schedule_one_pod()
    assert port.bound == {"p": "n0"}
    assert expected == CALLS


async def test_unreserve_skips_them_too() -> None:
    B["Plain"], B["bind_fails"] = True, True
    await _schedule_one_pod()
    assert CALLS[:4] == ["Other.reserve", "Other.permit", "Other.pre_bind", "Other.unreserve"]
    assert not [c for c in CALLS if c.startswith("Plain.")]


async def test_a_failing_post_bind_still_reports_the_pod_scheduled(caplog: pytest.LogCaptureFixture) -> None:
    """PostBind is informational: a plugin that raises is logged, the plugins after it still run,
    and the bound pod's Scheduled event and report follow."""
    B["Plain.post_bind_raises"] = True
    sched, port = make_scheduler(PROFILE, REGISTRY)
    sched.on_node_add(node("n0"))
    sched.on_pod_add(pod("a"))
    sched.on_pod_add(pod("b"))
    with caplog.at_level(logging.ERROR, logger="koordsched.framework.binding_points"):
        await run_all(sched)
    assert port.bound == {"a": "n0", "b": "n0"}
    assert sorted(port.scheduled_events) == [("a", "n0"), ("b", "n0")]
    failures = [r for r in caplog.records if "PostBind failed" in r.getMessage()]
    assert len(failures) == 2
    assert "default/a" in failures[0].getMessage() or "default/b" in failures[0].getMessage()
    assert CALLS.count("Other.post_bind") == 2


def test_a_forked_state_keeps_the_skip_set() -> None:
    state = CycleState()
    state.skip_binding.add("Plain")
    forked = state.clone()
    assert forked.skip_binding == {"Plain"}
    forked.skip_binding.add("Other")
    assert state.skip_binding == {"Plain"}


@pytest.mark.parametrize(("percent", "timed"), [(0, False), (100, True)])
async def test_plugins_are_timed_on_sampled_cycles_only(
    monkeypatch: pytest.MonkeyPatch, percent: int, timed: bool
) -> None:
    monkeypatch.setattr(schedule_one, "PLUGIN_METRICS_SAMPLE_PERCENT", percent)
    sched, port = make_scheduler(PROFILE, REGISTRY)
    times = PluginTimes()
    fw = sched.frameworks["koord-scheduler"]
    fw.metrics = fw.timing.metrics = fw.calls.metrics = times  # the points' timings and the plugins'
    sched.on_node_add(node("n0"))
    sched.on_pod_add(pod("p"))
    await run_all(sched)
    assert port.bound == {"p": "n0"}
    if timed:
        assert ("Plain", "PreFilter") in times.plugins
        assert ("Other", "Reserve") in times.plugins
        assert ("Other", "Permit") in times.plugins
        assert ("Other", "PreBind") in times.plugins
        assert ("Bind", "Bind") in times.plugins
    else:
        assert times.plugins == []


class FirstBinder(_Recording):
    """A Bind plugin ahead of the default one (as Reservation is): it binds nothing for pods it
    opted out for, and answers Skip for the others (recorded)."""

    name = "FirstBinder"

    async def bind(self, state: CycleState, p: PodInfo, node_name: str, plan: BindingPlan) -> Status:
        from koordsched.framework.status import Code

        CALLS.append(f"{self.name}.bind")
        return Status(Code.SKIP)


BIND_REGISTRY = Registry([PluginSpec.of(c) for c in (Sort, FirstBinder, Bind)])
BIND_PROFILE = b"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
profiles:
- schedulerName: koord-scheduler
  plugins:
    queueSort: {enabled: [{name: Sort}]}
    preFilter: {enabled: [{name: FirstBinder}]}
    bind: {enabled: [{name: FirstBinder}, {name: Bind}]}
"""


@pytest.mark.parametrize(("skips", "expected"), [(False, ["FirstBinder.bind"]), (True, [])])
async def test_bind_skips_them_too(skips: bool, expected: list[str]) -> None:
    B["FirstBinder"] = skips
    sched, port = make_scheduler(BIND_PROFILE, BIND_REGISTRY)
    sched.on_node_add(node("n0"))
    sched.on_pod_add(pod("p"))
    await run_all(sched)
    assert port.bound == {"p": "n0"}  # the next Bind plugin bound it either way
    assert expected == CALLS
