"""The fake-plugin harness for framework tests: plugins whose behaviour a test sets in ``B``,
a call log ``CALLS``, a recording port, and a scheduler built from a profile and registry.

``B`` and ``CALLS`` are cleared before every test under tests/core (its conftest does it), so a
test module only defines the plugins it needs on top of ``FakePlugin``, ``Sort`` and ``Bind``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from koordsched.api.core import Pod
from koordsched.config.load import load_config
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import BindError, Clock, Handle
from koordsched.framework.registry import Registry
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import BindingPlan, PodInfo
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.scheduler import Scheduler

#: Behaviour of the fake plugins for the current test.
B: dict[str, Any] = {}
#: What the fake plugins were called for, in order.
CALLS: list[str] = []


def reset() -> None:
    B.clear()
    CALLS.clear()


class FakePlugin:
    """Base of the fake plugins: built the way the registry builds a real one."""

    name = ""

    def __init__(self, args: Any, handle: Handle) -> None:
        self.handle = handle


class Sort(FakePlugin):
    name = "Sort"

    def sort_key(self, p: PodInfo) -> Any:
        return (-p.priority, p.timestamp)


class Bind(FakePlugin):
    """Binds through the handle's binder; ``B['bind_fails']`` makes it fail without calling it,
    and a binder's BindError becomes the plugin's error status."""

    name = "Bind"

    async def bind(self, state: CycleState, p: PodInfo, node_name: str, plan: BindingPlan) -> Status:
        if B.get("bind_fails"):
            return Status.from_error(RuntimeError("conflict"))
        try:
            await self.handle.binder.bind(p.pod, node_name, plan)
        except BindError as err:
            return Status.from_error(err)
        return SUCCESS


class Port:
    """Records decisions; confirms binds the way a watch event would. ``fail_binds`` makes that
    many binds raise a conflict first."""

    def __init__(self) -> None:
        self.sched: Scheduler | None = None
        self.bound: dict[str, str] = {}
        self.failures: list[tuple[str, str, str]] = []
        self.scheduled_events: list[tuple[str, str]] = []
        self.fail_binds = 0

    async def bind(self, p: Pod, node_name: str, plan: BindingPlan) -> None:
        if self.fail_binds:
            self.fail_binds -= 1
            raise BindError("conflict: the object has been modified")
        self.bound[p.metadata.name] = node_name
        assert self.sched is not None
        bound = msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, node_name=node_name))
        self.sched.on_pod_update(p, bound)

    def scheduled(self, p: Pod, node_name: str) -> None:
        self.scheduled_events.append((p.metadata.name, node_name))

    def unschedulable(self, p: Pod, reason: str, message: str) -> None:
        self.failures.append((p.metadata.name, reason, message))

    def invalid_pod(self, p: Pod, message: str) -> None:
        self.failures.append((p.metadata.name, "Invalid", message))


class PluginTimes:
    """A FrameworkMetrics that keeps the per-plugin observations."""

    def __init__(self) -> None:
        self.plugins: list[tuple[str, str]] = []

    def observe_extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        pass

    def observe_plugin(self, plugin: str, point: str, status: str, seconds: float) -> None:
        self.plugins.append((plugin, point))

    def observe_permit_wait(self, result: str, seconds: float) -> None:
        pass

    def observe_plugin_evaluations(self, plugin: str, point: str, profile: str, n: int) -> None:
        pass


def make_scheduler(
    profile: bytes,
    registry: Registry,
    clock: Clock | None = None,
    **options: Any,
) -> tuple[Scheduler, Port]:
    """A scheduler over ``registry`` configured by ``profile``, its port wired back to it;
    ``options`` go to Scheduler (observer, tracer)."""
    port = Port()
    sched = Scheduler(load_config(profile, registry), registry, port, clock or VirtualClock(), **options)
    port.sched = sched
    return sched, port


async def run_all(sched: Scheduler) -> None:
    while await sched.step():
        pass
