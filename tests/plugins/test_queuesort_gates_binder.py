"""PrioritySort, SchedulingGates, DefaultBinder, DefaultPreBind: plugins outside the filter/score path."""

from __future__ import annotations

import pytest

from koordsched.config import load_config
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import BindError
from koordsched.framework.status import Code
from koordsched.framework.types import UNSCHEDULED_POD_UPDATE, ActionType, BindingPlan
from koordsched.plugins.defaultbinder import DefaultBinder
from koordsched.plugins.defaultprebind import DefaultPreBind
from koordsched.plugins.queuesort import PrioritySort
from koordsched.plugins.registry import in_tree_registry
from koordsched.plugins.schedulinggates import SchedulingGates
from tests.builders import make_pod, pod_info
from tests.fakes import FakeHandle


def test_priority_sort_orders_by_priority_then_timestamp(handle: FakeHandle) -> None:
    plugin = PrioritySort(None, handle)
    pods = []
    for name, prio, ts in [
        ("low-early", 0, 1.0),
        ("high-late", 10, 5.0),
        ("high-early", 10, 2.0),
        ("mid", 5, 0.5),
    ]:
        p = pod_info(make_pod(name), priority=prio)
        p.timestamp = ts
        pods.append(p)
    ordered = sorted(pods, key=plugin.sort_key)
    assert [p.pod.metadata.name for p in ordered] == ["high-early", "high-late", "mid", "low-early"]


def test_priority_sort_negative_priorities(handle: FakeHandle) -> None:
    plugin = PrioritySort(None, handle)
    a, b = pod_info(make_pod("a"), priority=-5), pod_info(make_pod("b"), priority=-1)
    assert plugin.sort_key(b) < plugin.sort_key(a)


@pytest.mark.parametrize(
    ("gates", "message"),
    [
        ([], None),
        (["foo"], "waiting for scheduling gates: [foo]"),
        (["foo", "bar"], "waiting for scheduling gates: [foo bar]"),
    ],
)
def test_scheduling_gates(handle: FakeHandle, gates: list[str], message: str | None) -> None:
    plugin = SchedulingGates(None, handle)
    pod = pod_info(make_pod(schedulingGates=[{"name": g} for g in gates]))
    status = plugin.pre_enqueue(pod)
    if message is None:
        assert status.ok
    else:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (message,)


def test_scheduling_gates_registers_pod_update(handle: FakeHandle) -> None:
    events = SchedulingGates(None, handle).events_to_register()
    assert [e.event for e in events] == [UNSCHEDULED_POD_UPDATE]
    assert events[0].event.resource == "Pod" and events[0].event.action is ActionType.UPDATE


async def test_default_binder_binds(handle: FakeHandle) -> None:
    plugin = DefaultBinder(None, handle)
    plan = BindingPlan(annotations={"a": "b"})
    status = await plugin.bind(CycleState(), pod_info(make_pod("p")), "node-1", plan)
    assert status.ok
    assert handle.binder.bound == [("default/p", "node-1", plan)]


@pytest.mark.parametrize("error", [BindError('pods "p" not found'), RuntimeError("connection reset")])
async def test_default_binder_error_becomes_error_status(handle: FakeHandle, error: Exception) -> None:
    handle.binder.error = error
    status = await DefaultBinder(None, handle).bind(CycleState(), pod_info(make_pod("p")), "n", BindingPlan())
    assert status.code is Code.ERROR
    assert status.reasons == (str(error),)
    assert status.error is error


async def test_default_prebind_succeeds_without_touching_the_plan(handle: FakeHandle) -> None:
    plan = BindingPlan(annotations={"a": "1"})
    status = await DefaultPreBind(None, handle).pre_bind(CycleState(), pod_info(make_pod("p")), "n1", plan)
    assert status.ok
    assert plan.annotations == {"a": "1"}
    assert handle.binder.bound == []


def test_koordinator_prebind_list_with_default_prebind_loads() -> None:
    body = b"""apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: koord-scheduler
    plugins:
      preBind:
        enabled:
          - name: NodeNUMAResource
          - name: DeviceShare
          - name: DefaultPreBind
"""
    (profile,) = load_config(body, in_tree_registry()).profiles
    # VolumeBinding comes from the default multiPoint set and, not being listed here, goes first
    # (upstream's expandMultiPointPlugins: overrides, then multiPoint-only, then the rest).
    assert profile.plugins_at("preBind") == [
        "VolumeBinding",
        "NodeNUMAResource",
        "DeviceShare",
        "DefaultPreBind",
    ]
