"""The reservation controller as the Reservation plugin declares it: the status writes of its
cluster rounds, and the simulator's moments (after pods' events, at load, at backoff, settled)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from koordsched.api.kinds import RESERVATIONS
from koordsched.api.reservation import Reservation
from koordsched.framework.controllers import FollowsMoments, Moment, StatusWrite, Write
from koordsched.framework.snapshot import Snapshot
from koordsched.plugins.reservation import Reservation as ReservationPlugin
from koordsched.plugins.reservation.controller import ReservationController, reservation_controllers
from tests.builders import make_pod, node, pod_info
from tests.fakes import WALL_ZERO, FakeHandle

ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"


def resv(
    name: str, *, phase: str = "Available", ttl: str = "1h", created: bool = True, **status: Any
) -> Reservation:
    meta: dict[str, Any] = {"name": name, "resourceVersion": f"rv-{name}"}
    if created:
        meta["creationTimestamp"] = "2023-11-14T22:13:20Z"  # WALL_ZERO
    doc = {
        "metadata": meta,
        "spec": {
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}},
            "owners": [{"labelSelector": {"matchLabels": {"app": "x"}}}],
            "ttl": ttl,
            "allocateOnce": False,
        },
        "status": {"phase": phase, "nodeName": "n1" if phase == "Available" else "", **status},
    }
    return msgspec.convert(doc, Reservation)


def owner(name: str, reservation: str) -> Any:
    """A pod bound on n1, allocated from ``reservation`` (named, no uid: a hand-written one)."""
    return make_pod(name, {"cpu": "1"}, node_name="n1", annotations={ALLOCATED: {"name": reservation}})


def controller(
    *reservations: Reservation, owners: dict[str, list[Any]] | None = None
) -> ReservationController:
    snap = Snapshot()
    snap.add_node(node("n1"), {"cpu": 8000})
    handle = FakeHandle(snap)
    handle.put(RESERVATIONS, *reservations)
    for holder, pods in (owners or {}).items():
        handle.owners[holder] = {p.key: pod_info(p) for p in pods}
    return ReservationController(handle)  # type: ignore[arg-type]


def summary(writes: list[Write]) -> list[tuple[str, str, str, list[str]]]:
    """(key, version, phase, owners) of each status write."""
    out = []
    for w in writes:
        assert isinstance(w, StatusWrite) and w.kind is RESERVATIONS
        out.append((w.key, w.version, w.obj.status.phase, [o.name for o in w.obj.status.current_owners]))
    return out


HOUR = 3600.0


@pytest.mark.parametrize(
    ("case", "reservations", "owners", "wall", "want"),
    [
        ("nothing changed: no write", [resv("r")], {}, 0.0, []),
        (
            "a new owner: owners written",
            [resv("r")],
            {"r": ["o1"]},
            0.0,
            [("r", "rv-r", "Available", ["o1"])],
        ),
        ("expired: Failed", [resv("r")], {}, HOUR, [("r", "rv-r", "Failed", [])]),
        (
            "owners and expiry of one version: owners first, both computed from it",
            [resv("r")],
            {"r": ["o1"]},
            HOUR,
            [("r", "rv-r", "Available", ["o1"]), ("r", "rv-r", "Failed", [])],
        ),
        ("a pending one's owners are not its to write", [resv("r", phase="Pending")], {"r": ["o1"]}, 0.0, []),
    ],
)
def test_a_cluster_round_writes_owners_then_expiry(
    case: str, reservations: list[Reservation], owners: dict[str, list[str]], wall: float, want: list[Any]
) -> None:
    c = controller(*reservations, owners={h: [owner(n, h) for n in names] for h, names in owners.items()})
    c.handle.clock.t = wall
    assert summary(c.reconcile()) == want, case


@pytest.mark.parametrize(
    ("case", "pods", "want"),
    [
        ("a pod allocated from r: r's owners", ["r"], [("r", "rv-r", "Available", ["o1"])]),
        ("a pod allocated from none: nothing", [None], []),
        ("a pod naming a reservation that is not there: nothing", ["gone"], []),
    ],
)
def test_after_pods_syncs_the_reservations_they_name(
    case: str, pods: list[str | None], want: list[Any]
) -> None:
    c = controller(
        resv("r"), resv("other"), owners={"r": [owner("o1", "r")], "other": [owner("o2", "other")]}
    )
    named = [owner("p", r) if r else make_pod("p", {"cpu": "1"}, node_name="n1") for r in pods]
    # "other" changed too, but no delivered pod names it: it waits for the next full sync.
    assert summary(c.after_pods(named)) == want, case


FAILED = [("r", "rv-r", "Failed", [])]


@pytest.mark.parametrize(
    ("case", "moment", "created", "loaded_at", "want"),
    [
        ("loaded: expired from its creationTimestamp", Moment.LOADED, True, WALL_ZERO + HOUR, FAILED),
        ("loaded: no creationTimestamp counts from the load", Moment.LOADED, False, WALL_ZERO, FAILED),
        ("loaded: loaded later, not expired yet", Moment.LOADED, False, WALL_ZERO + HOUR, []),
        ("backoff expired: expiry", Moment.BACKOFF_EXPIRED, True, WALL_ZERO, FAILED),
        (
            "settled: every owner, no expiry",
            Moment.SETTLED,
            True,
            WALL_ZERO,
            [("r", "rv-r", "Available", ["o1"])],
        ),
    ],
)
def test_moments(case: str, moment: Moment, created: bool, loaded_at: float, want: list[Any]) -> None:
    c = controller(resv("r", created=created), owners={"r": [owner("o1", "r")]})
    c.handle.clock.t = 1.5 * HOUR
    assert isinstance(c, FollowsMoments)
    assert summary(list(c.at(moment, loaded_at))) == want, case


def test_one_controller_for_every_profile_and_none_without_the_plugin() -> None:
    plugins = [ReservationPlugin(None, FakeHandle()), ReservationPlugin(None, FakeHandle())]  # type: ignore[arg-type]
    (c,) = reservation_controllers(plugins)
    assert isinstance(c, ReservationController) and c.handle is plugins[0].handle
    assert not c.simulated  # the simulator calls its moments instead of its rounds
    assert reservation_controllers([object()]) == []
