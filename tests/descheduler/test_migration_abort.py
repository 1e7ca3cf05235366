"""How a PodMigrationJob ends other than by success, as Koordinator v1.6's controller ends it:
a user's ``Aborted`` (the controller stops and leaves their status), the Reservation's fates
(missing, expired, taken by another pod, on the pod's own node, unschedulable), the TTL (which
deletes the Reservation), a deleted job, and ``preemptionOptions`` (warned about, not acted on:
v1.6 has no reservation preemption)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from koordsched.descheduler.migration import job as pmj
from koordsched.descheduler.migration.controller import (
    GONE,
    MESSAGE_PREEMPTION_OPTIONS,
    REASON_PREEMPTION_OPTIONS,
    EvictResult,
    Job,
    MigrationController,
    ReservationState,
)
from tests.descheduler.helpers import pod
from tests.descheduler.test_migration import OPTS, Clock, Port, controller, run


@dataclass
class StatePort(Port):
    """Answers ``reservation`` with ``state``; ``delete_reservation`` fails ``failures`` times."""

    state: ReservationState = field(default_factory=lambda: ReservationState("Available", "cold"))
    failures: int = 0

    async def reservation(self, name: str) -> ReservationState:
        return self.state

    async def delete_reservation(self, name: str) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("connection refused")
        self.deleted.append(name)


def started(clock: Clock | None = None, **kw: object) -> tuple[MigrationController, Job]:
    ctl = controller(clock=clock, **kw)
    assert ctl.evict(pod("a", "hot"), OPTS)
    ctl.arbitrate()
    (j,) = ctl.jobs.values()
    return ctl, j


def cluster_copy(j: Job, phase: str, message: str = "") -> pmj.PodMigrationJob:
    """The job as the watch brings it after someone wrote its status."""
    status = pmj.PodMigrationJobStatus(phase=phase, message=message)
    return pmj.PodMigrationJob(metadata=j.job.metadata, spec=j.job.spec, status=status)


@pytest.mark.parametrize(
    ("state", "phase", "reason", "message"),
    [
        (ReservationState("", missing=True), "Failed", "MissingReservation", 'missing Reservation "/'),
        (ReservationState("Failed", expired=True), "Failed", "ReservationExpired", "Reservation expired"),
        (
            ReservationState("Succeeded", "cold"),
            "Failed",
            "ForbiddenMigratePod",
            "Reservation is already bound by another Pod",
        ),
        (
            ReservationState("Available", "hot"),
            "Failed",
            "ForbiddenMigratePod",
            "Scheduler assignes the Reservation",
        ),
        (
            ReservationState("Failed", message="0/3 nodes are available: 3 Insufficient cpu."),
            "Failed",
            "Unschedulable",
            "0/3 nodes are available: 3 Insufficient cpu.",
        ),
        (ReservationState("Pending", message="0/3 nodes are available"), "Running", "", ""),
        (ReservationState("Waiting"), "Running", "", ""),
    ],
)
def test_reservation_fates_before_the_eviction(
    state: ReservationState, phase: str, reason: str, message: str
) -> None:
    ctl, j = started()
    port = StatePort(state=state)
    run(ctl, port)
    st = j.job.status
    assert (st.phase, st.reason) == (phase, reason)
    assert message in st.message
    assert port.evicted == []  # the pod is never evicted without an Available Reservation elsewhere


def test_an_unschedulable_reservation_is_synced_to_the_job_once_per_message() -> None:
    ctl, j = started()
    port = StatePort(state=ReservationState("Pending", message="0/3 nodes are available: 3 Too many pods."))
    run(ctl, port, times=3)
    cond = next(c for c in j.job.status.conditions if c.type == pmj.COND_RESERVATION_SCHEDULED)
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert cond.message == "0/3 nodes are available: 3 Too many pods."
    assert [e for e in port.events if e[0] == "Unschedulable"] == [
        ("Unschedulable", "0/3 nodes are available: 3 Too many pods.", True)
    ]


def test_a_missing_pod_fails_with_koordinators_message() -> None:
    """EvictDirectly (ReservationFirst reads a pod gone by then as evicted: its replacement may
    still take the Reservation)."""
    ctl, j = started(default_job_mode="EvictDirectly")
    run(ctl, StatePort(evict_outcomes=[EvictResult(GONE, 'pods "a" not found')]))
    assert (j.job.phase, j.job.status.reason) == ("Failed", "MissingPod")
    assert j.job.status.message == 'Abort job caused by missing Pod "default/a"'


def test_success_names_the_pod_that_took_the_reservation() -> None:
    ctl, j = started()
    run(ctl, StatePort())
    st = j.job.status
    assert (st.phase, st.status) == ("Succeeded", "Complete")
    assert st.message == 'Bind Pod "default/a-new" in Reservation "r-a"'
    assert st.pod_ref is not None and (st.pod_ref.namespace, st.pod_ref.name) == ("default", "a-new")


def test_the_ttl_fails_the_job_and_deletes_its_reservation() -> None:
    clock = Clock()
    ctl, j = started(clock, default_job_ttl="1m")
    port = StatePort(state=ReservationState("Pending"), failures=1)
    run(ctl, port)
    clock.t += 61
    run(ctl, port)
    assert (j.job.phase, j.job.status.reason, j.job.status.message) == (
        "Failed",
        "Timeout",
        "Abort job caused by timeout",
    )

    async def collect() -> None:
        await ctl.collect(port)

    asyncio.run(collect())  # the first delete fails: it is kept and tried again
    assert port.deleted == [] and ctl.orphans == ["r-a"]
    asyncio.run(collect())
    assert port.deleted == ["r-a"] and ctl.orphans == []


def test_a_user_abort_before_the_eviction_stops_the_job_and_frees_its_reservation() -> None:
    ctl, j = started()
    port = StatePort(state=ReservationState("Pending"))
    run(ctl, port)
    assert j.job.phase == "Running" and j.reservation == "r-a"
    assert ctl.adopt(cluster_copy(j, "Aborted", "not now"), j.pod, port) is None
    assert j.finished and (j.job.phase, j.job.status.message) == ("Aborted", "not now")
    assert ctl.orphans == ["r-a"] and ("Aborted", "not now", False) in port.events
    port.state = ReservationState("Available", "cold")
    run(ctl, port, times=2)
    assert port.evicted == [] and j.job.phase == "Aborted"  # nothing more is done
    assert ctl.in_flight() == []  # no longer counts against the limits


def test_a_user_abort_after_the_eviction_keeps_the_reservation_for_the_replacement() -> None:
    ctl, j = started()
    port = StatePort(bound=None)
    run(ctl, port)
    assert port.evicted == ["a"] and j.job.phase == "Running"
    ctl.adopt(cluster_copy(j, "Aborted"), j.pod, port)
    assert j.job.phase == "Aborted" and ctl.orphans == []
    assert ("Aborted", "the PodMigrationJob was aborted", False) in port.events


def test_an_aborted_pending_job_never_passes_arbitration() -> None:
    ctl = controller(max_migrating_per_node=1, object_limiters={})
    ctl.evict(pod("a", "hot", owner="rs-a"), OPTS)
    ctl.evict(pod("b", "hot", owner="rs-b"), OPTS)
    passed = ctl.arbitrate()
    waiting = next(j for j in ctl.jobs.values() if j not in passed)
    assert waiting.waiting
    ctl.adopt(cluster_copy(waiting, "Aborted"), waiting.pod)
    assert waiting.job.phase == "Aborted" and not waiting.waiting
    for j in passed:
        j.job.status.phase = "Succeeded"
    assert ctl.arbitrate() == []


def test_a_deleted_job_deletes_its_reservation() -> None:
    ctl, j = started()
    run(ctl, StatePort(state=ReservationState("Pending")))
    ctl.forget(j.name)
    assert ctl.orphans == ["r-a"] and j.name not in ctl.jobs


def test_preemption_options_are_named_in_a_warning_not_acted_on() -> None:
    ctl = controller(default_job_mode="EvictDirectly")
    job = pmj.PodMigrationJob(
        metadata=pmj.ObjectMeta(name="by-hand"),
        spec=pmj.PodMigrationJobSpec(
            pod_ref=pmj.PodRef(kind="Pod", namespace="default", name="a"),
            reservation_options=pmj.ReservationOptions(preemption_options={"maxPreempts": 1}),
        ),
    )
    port = StatePort()
    j = ctl.adopt(job, pod("a", "n"), port)
    assert j is not None
    assert port.events == [(REASON_PREEMPTION_OPTIONS, MESSAGE_PREEMPTION_OPTIONS, True)]
    assert "spec.reservationOptions.preemptionOptions" in MESSAGE_PREEMPTION_OPTIONS
    # The job itself runs as Koordinator's would.
    ctl.arbitrate()
    run(ctl, port)
    assert j.job.phase == "Succeeded" and port.evicted == ["a"]
    # A job without them, or one adopted again, warns about nothing.
    port.events.clear()
    ctl.adopt(job, pod("a", "n"), port)
    plain = pmj.PodMigrationJob(metadata=pmj.ObjectMeta(name="plain"), spec=pmj.PodMigrationJobSpec())
    ctl.adopt(plain, pod("b", "n"), port)
    assert port.events == []


def test_an_abort_wins_over_a_result_not_yet_written() -> None:
    """Koordinator's status update conflicts, it reads the job again and leaves it Aborted."""
    ctl, j = started(default_job_mode="EvictDirectly")
    port = StatePort()
    run(ctl, port)
    assert j.job.phase == "Succeeded"
    ctl.adopt(cluster_copy(j, "Aborted", "stop"), j.pod, port)
    assert (j.job.phase, j.job.status.message) == ("Aborted", "stop") and ctl.orphans == []


def test_the_job_ends_once_the_new_pod_is_ready() -> None:
    """Koordinator waits for the pod that took the Reservation to be Ready (BoundPodReady)."""
    ctl, j = started()
    port = StatePort(ready=False)
    run(ctl, port, times=3)
    assert j.job.phase == "Running" and port.evicted == ["a"]
    conds = {c.type: c for c in j.job.status.conditions}
    assert conds["PodBoundReservation"].status == "True"
    assert (conds["BoundPodReady"].status, conds["BoundPodReady"].reason) == ("False", "WaitForBoundPodReady")
    waits = [e for e in port.events if e[0] == "WaitForBoundPodReady"]
    assert waits == [("WaitForBoundPodReady", "Waiting for Bound Pod default/a-new Ready", False)]
    port.ready = True
    run(ctl, port)
    assert j.job.phase == "Succeeded"
    assert next(c for c in j.job.status.conditions if c.type == "BoundPodReady").status == "True"
    assert ("BoundPodReady", 'Bind pod "default/a-new" is ready', False) in port.events


def test_evict_directly_ends_as_koordinators() -> None:
    ctl, j = started(default_job_mode="EvictDirectly")
    run(ctl, StatePort())
    st = j.job.status
    assert (st.phase, st.status, st.reason) == ("Succeeded", "Complete", "")
    assert st.message == 'Pod "default/a" has been evicted'
