"""A PostBind plugin that raises does not stop the bound pod's Scheduled event or its report:
PostBind is informational, the pod is already bound."""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import pytest

from koordsched.api.core import Pod
from koordsched.config.load import load_config
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Handle
from koordsched.framework.registry import PluginSpec, Registry
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import BindingPlan, PodInfo
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.scheduler import Scheduler
from tests.builders import node, pod


class _Base:
    name = ""

    def __init__(self, args: Any, handle: Handle) -> None:
        self.handle = handle


class Sort(_Base):
    name = "Sort"

    def sort_key(self, p: PodInfo) -> Any:
        return (-p.priority, p.timestamp)


class Broken(_Base):
    name = "Broken"

    def post_bind(self, state: CycleState, p: PodInfo, node_name: str) -> None:
        raise RuntimeError("post-bind bug")


class Bind(_Base):
    name = "Bind"

    async def bind(self, state: CycleState, p: PodInfo, node_name: str, plan: BindingPlan) -> Status:
        await self.handle.binder.bind(p.pod, node_name, plan)
        return SUCCESS


REGISTRY = Registry([PluginSpec.of(c) for c in (Sort, Broken, Bind)])
PROFILE = b"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
profiles:
- schedulerName: koord-scheduler
  plugins:
    queueSort: {enabled: [{name: Sort}]}
    bind: {enabled: [{name: Bind}]}
    postBind: {enabled: [{name: Broken}]}
"""


class Port:
    def __init__(self) -> None:
        self.sched: Scheduler | None = None
        self.bound: dict[str, str] = {}
        self.scheduled_events: list[tuple[str, str]] = []

    async def bind(self, p: Pod, node_name: str, plan: BindingPlan) -> None:
        self.bound[p.metadata.name] = node_name
        assert self.sched is not None
        bound = msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, node_name=node_name))
        self.sched.on_pod_update(p, bound)

    def scheduled(self, p: Pod, node_name: str) -> None:
        self.scheduled_events.append((p.metadata.name, node_name))

    def unschedulable(self, p: Pod, reason: str, message: str) -> None:
        raise AssertionError(f"unexpected unschedulable: {reason} {message}")

    def invalid_pod(self, p: Pod, message: str) -> None:
        raise AssertionError(f"unexpected invalid pod: {message}")


async def test_a_failing_post_bind_still_reports_the_pod_scheduled(caplog: pytest.LogCaptureFixture) -> None:
    port = Port()
    sched = Scheduler(load_config(PROFILE, REGISTRY), REGISTRY, port, VirtualClock())
    port.sched = sched
    sched.on_node_add(node("n0"))
    sched.on_pod_add(pod("a"))
    sched.on_pod_add(pod("b"))
    with caplog.at_level(logging.ERROR, logger="koordsched.scheduler.binding_cycle"):
        while await sched.step():
            pass
    assert port.bound == {"a": "n0", "b": "n0"}
    assert sorted(port.scheduled_events) == [("a", "n0"), ("b", "n0")]
    failures = [r for r in caplog.records if "PostBind failed" in r.getMessage()]
    assert len(failures) == 2
    assert "default/a" in failures[0].getMessage() or "default/b" in failures[0].getMessage()
