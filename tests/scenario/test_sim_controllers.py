"""The simulator's controller runner and the moments it calls a follower at: right after each
delivery of pods' watch events, and at the moments its loop names; what a follower writes reaches
the scheduler at once, and each outcome goes back to the controller."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from koordsched.api.core import Pod
from koordsched.api.kinds import RESERVATIONS, ObjectKind
from koordsched.api.reservation import Reservation
from koordsched.backends.sim.controllers import SimControllers
from koordsched.backends.sim.port import SimPort
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import load_config
from koordsched.framework.controllers import Moment, StatusWrite, Write, WriteResult
from koordsched.framework.types import BindingPlan
from koordsched.plugins.registry import in_tree_registry
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.scheduler import Scheduler
from tests.builders import node, pod


def reservation(name: str, phase: str) -> Reservation:
    return msgspec.convert({"metadata": {"name": name}, "status": {"phase": phase}}, Reservation)


class Plain:
    """A controller of no moments, whose rounds must not run; it keeps each write's outcome."""

    name = "follower"
    description = "the test follower"
    watches: tuple[ObjectKind[Any], ...] = (RESERVATIONS,)
    interval = 1.0
    workers = 0
    write_timeout = 1.0
    simulated = False

    def __init__(self) -> None:
        self.results: list[WriteResult] = []

    def reconcile(self) -> list[Write]:
        raise AssertionError("the simulator runs no rounds of a follower that is not simulated")

    def applied(self, write: Write, result: WriteResult) -> None:
        self.results.append(result)

    def next_due(self) -> float | None:
        return None


class Follower(Plain):
    """Writes ``key`` Failed after each delivery and at each moment; records what it was told."""

    def __init__(self, key: str = "r") -> None:
        super().__init__()
        self.key = key
        self.calls: list[Any] = []

    def _write(self) -> list[Write]:
        return [StatusWrite(RESERVATIONS, self.key, reservation(self.key, "Failed"))]

    def after_pods(self, pods: Sequence[Pod]) -> list[Write]:
        self.calls.append(sorted(p.key for p in pods))
        return self._write()

    def at(self, moment: Moment, loaded_at: float) -> list[Write]:
        self.calls.append((moment, loaded_at))
        return self._write()


def simulated(follower: Plain) -> tuple[Scheduler, SimPort, SimControllers]:
    registry = in_tree_registry()
    port = SimPort()
    sched = Scheduler(
        load_config(default_profile_path(), registry), registry, port, VirtualClock(wall_start=100.0)
    )
    port.attach(sched)
    sched.on_node_add(node("n1"))
    sched.on_object(RESERVATIONS.kind, "r", reservation("r", "Available"))
    return sched, port, SimControllers([follower], sched, port)


async def test_a_follower_acts_right_after_each_delivery_and_its_write_lands_at_once() -> None:
    f = Follower()
    sched, port, controllers = simulated(f)
    assert not controllers  # no rounds to run
    p = pod("p")
    port.add_pod(p)
    sched.on_pod_add(p)
    await port.bind(p, "n1", BindingPlan())
    assert f.calls == []
    port.deliver()
    assert f.calls == [["default/p"]]
    assert sched.objects[RESERVATIONS.kind]["r"].status.phase == "Failed"  # no second delivery needed
    assert [r.ok for r in f.results] == [True]
    port.deliver()  # nothing delivered: not called
    assert f.calls == [["default/p"]]


def test_moments_carry_the_load_time_and_a_missing_object_is_404() -> None:
    f = Follower("gone")
    _, _, controllers = simulated(f)
    controllers.at(Moment.LOADED)
    controllers.at(Moment.SETTLED)
    assert f.calls == [(Moment.LOADED, 100.0), (Moment.SETTLED, 100.0)]
    assert [r.code for r in f.results] == [404, 404]


def test_a_controller_without_moments_leaves_the_deliveries_alone() -> None:
    _, port, controllers = simulated(Plain())
    assert controllers.followers == [] and port.after_delivery is None
