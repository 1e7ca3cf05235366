"""MigrationController: the non-retryable filters, the limits, arbitration and the job's phases,
through an in-memory MigrationPort (evictions blocked by a PDB, reservations that never schedule)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from koordsched.api.core import Pod
from koordsched.descheduler.framework import EvictOptions
from koordsched.descheduler.migration import job as pmj
from koordsched.descheduler.migration.args import MigrationControllerArgs, ObjectLimiter, PriorityThreshold
from koordsched.descheduler.migration.controller import (
    BLOCKED,
    EVICTED,
    GONE,
    EvictResult,
    MigrationController,
    ReservationState,
)
from koordsched.descheduler.migration.filters import PodFilter, Workload, default_max_migrating
from koordsched.descheduler.migration.limits import TokenBucket
from koordsched.descheduler.plugins.common import Namespaces
from tests.descheduler.helpers import pod

OPTS = EvictOptions("LowNodeLoad", "node is overutilized, node cpu usage(90.00%)>threshold(75.00%)")


@dataclass
class Clock:
    t: float = 1000.0

    def __call__(self) -> float:
        return self.t


@dataclass
class Port:
    """Evictions answer from ``evict_outcomes`` (default evicted); reservations schedule on
    ``reservation_node`` (None: never); the replacement binds when ``bound`` says so."""

    evict_outcomes: list[EvictResult] = field(default_factory=list)
    reservation_node: str | None = "cold"
    bound: str | None = "cold"
    evicted: list[str] = field(default_factory=list)
    reservations: list[str] = field(default_factory=list)
    events: list[tuple[str, str, bool]] = field(default_factory=list)
    saved: int = 0
    deleted: list[str] = field(default_factory=list)
    ready: bool = True

    async def evict(self, pod: Pod, job: pmj.PodMigrationJob, policy: str) -> EvictResult:
        out = self.evict_outcomes.pop(0) if self.evict_outcomes else EvictResult(EVICTED)
        if out.outcome == EVICTED:
            self.evicted.append(pod.metadata.name)
        return out

    async def create_reservation(self, pod: Pod, job: pmj.PodMigrationJob) -> str:
        name = f"r-{pod.metadata.name}"
        self.reservations.append(name)
        return name

    async def reservation(self, name: str) -> ReservationState:
        return (
            ReservationState("Available", self.reservation_node)
            if self.reservation_node
            else ReservationState("")
        )

    async def replacement_bound(
        self, pod: Pod, job: pmj.PodMigrationJob, reservation: str
    ) -> tuple[str, str, bool] | None:
        key = f"{pod.metadata.namespace}/{pod.metadata.name}-new"
        return (key, self.bound, self.ready) if self.bound else None

    async def delete_reservation(self, name: str) -> None:
        self.deleted.append(name)

    async def save(self, job: pmj.PodMigrationJob) -> None:
        self.saved += 1

    def event(
        self, job: pmj.PodMigrationJob, pod: Pod | None, reason: str, message: str, warning: bool
    ) -> None:
        self.events.append((reason, message, warning))


def controller(replicas: int | None = 10, clock: Clock | None = None, **kw: Any) -> MigrationController:
    args = MigrationControllerArgs(**kw)
    args.validate()
    return MigrationController(
        args,
        PodFilter(args, lambda name: {"high": 1000}.get(name), lambda w: replicas),
        clock or Clock(),
    )


def run(ctl: MigrationController, port: Port, times: int = 1, clock: Clock | None = None) -> None:
    """Reconcile every job ``times`` times, a second apart when ``clock`` is given (evictQPS)."""

    async def go() -> None:
        for _ in range(times):
            for j in list(ctl.jobs.values()):
                await ctl.reconcile(j, port)
            if clock is not None:
                clock.t += 1

    asyncio.run(go())


# --- filters ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "kw", "replicas", "refusal"),
    [
        (lambda: pod("a", "n"), {}, 10, None),
        (lambda: pod("a", "n", owner=None), {}, 10, "pod does not have any ownerRefs"),
        (lambda: pod("a", "n", owner=None), {"evict_all_bare_pods": True}, 10, None),
        (lambda: pod("a", "n", owner_kind="DaemonSet"), {}, 10, "pod is a DaemonSet pod"),
        (
            lambda: pod("a", "n", annotations={"kubernetes.io/config.mirror": "x"}),
            {},
            10,
            "pod is a mirror pod",
        ),
        (lambda: pod("a", "n", priority=2_000_000_000), {}, 10, "pod has system critical priority"),
        (lambda: pod("a", "n", priority=2_000_000_000), {"evict_system_critical_pods": True}, 10, None),
        (
            lambda: pod("a", "n", priority=1000),
            {"priority_threshold": PriorityThreshold(name="high")},
            10,
            "pod has higher priority than specified priority class threshold (1000)",
        ),
        (
            lambda: pod("a", "n", priority=999),
            {"priority_threshold": PriorityThreshold(value=1000)},
            10,
            None,
        ),
        (
            lambda: pod("a", "n", annotations={"scheduling.koordinator.sh/eviction-cost": "2147483647"}),
            {},
            10,
            "pod has annotation scheduling.koordinator.sh/eviction-cost=2147483647",
        ),
        (
            lambda: pod("a", "n", namespace="kube-system"),
            {"namespaces": Namespaces(exclude=["kube-system"])},
            10,
            "namespace kube-system is not allowed",
        ),
        (
            lambda: pod("a", "n", volumes=[{"name": "scratch", "emptyDir": {}}]),
            {},
            10,
            "pod has local storage and descheduler is not configured with evictLocalStoragePods",
        ),
        (
            lambda: pod("a", "n", volumes=[{"name": "h", "hostPath": {"path": "/var/log"}}]),
            {},
            10,
            "pod has local storage and descheduler is not configured with evictLocalStoragePods",
        ),
        (
            lambda: pod("a", "n", volumes=[{"name": "scratch", "emptyDir": {}}]),
            {"evict_local_storage_pods": True},
            10,
            None,
        ),
        (
            lambda: pod("a", "n", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]),
            {"ignore_pvc_pods": True},
            10,
            "pod has a PVC and descheduler is configured to ignore PVC pods",
        ),
        (
            lambda: pod("a", "n", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]),
            {},
            10,
            None,
        ),
        (lambda: pod("a", "n"), {}, 1, "workload ReplicaSet/default/rs has only 1 replica"),
        (lambda: pod("a", "n"), {"skip_check_expected_replicas": True}, 1, None),
        (
            lambda: pod("a", "n"),
            {"max_migrating_per_workload": 2},
            2,
            "workload ReplicaSet/default/rs would have every replica migrating or unavailable",
        ),
        (
            lambda: pod("a", "n", owner=None, annotations={"descheduler.alpha.kubernetes.io/evict": "true"}),
            {},
            10,
            None,
        ),
    ],
)
def test_non_retryable_filters(build: Any, kw: dict[str, Any], replicas: int, refusal: str | None) -> None:
    ctl = controller(replicas, **kw)
    assert ctl.pod_filter.refusal(build()) == refusal
    assert ctl.filter(build()) is (refusal is None)


@pytest.mark.parametrize(
    ("replicas", "expected"), [(1, 1), (3, 1), (4, 2), (10, 2), (11, 1), (25, 2), (40, 4)]
)
def test_default_per_workload_limit_from_replicas(replicas: int, expected: int) -> None:
    assert default_max_migrating(replicas) == expected


# --- arbitration and limits ---------------------------------------------------------------------


def test_per_node_limit_and_arbitration_order() -> None:
    clock = Clock()
    ctl = controller(
        clock=clock,
        max_migrating_per_node=2,
        max_migrating_per_workload=9,
        max_unavailable_per_workload=9,
        object_limiters={},
    )
    for i in range(3):
        assert ctl.evict(pod(f"p{i}", "hot", created=f"2024-01-0{i + 1}T00:00:00Z"), OPTS)
    assert not ctl.evict(pod("p0", "hot"), OPTS)  # one job per pod at a time
    passed = ctl.arbitrate()
    assert len(passed) == 2
    (waiting,) = [j for j in ctl.jobs.values() if not j.passed]
    assert waiting.waiting == "maxMigratingPerNode=2 reached on node hot"
    assert all(j.job.metadata.annotations[pmj.ANNOTATION_PASSED_ARBITRATION] == "true" for j in passed)
    port = Port()
    run(ctl, port, times=3, clock=clock)
    assert all(j.job.phase == pmj.SUCCEEDED for j in passed)
    assert ctl.arbitrate() == [waiting]  # the finished ones no longer count


@pytest.mark.parametrize(
    ("kw", "pods", "passes", "limit"),
    [
        (
            {"max_migrating_globally": 1},
            [("a", "n1", "ns1"), ("b", "n2", "ns2")],
            1,
            "maxMigratingGlobally=1 reached",
        ),
        (
            {"max_migrating_per_namespace": 1},
            [("a", "n1", "ns1"), ("b", "n2", "ns1"), ("c", "n3", "ns2")],
            2,
            "maxMigratingPerNamespace=1 reached in namespace ns1",
        ),
        ({"max_migrating_per_node": 0}, [("a", "n1", "ns"), ("b", "n1", "ns"), ("c", "n1", "ns")], 3, None),
    ],
)
def test_global_and_namespace_limits(
    kw: dict[str, Any], pods: list[tuple[str, str, str]], passes: int, limit: str | None
) -> None:
    ctl = controller(max_migrating_per_workload=9, max_unavailable_per_workload=9, object_limiters={}, **kw)
    for name, node, ns in pods:
        ctl.evict(pod(name, node, namespace=ns, owner=f"rs-{name}"), OPTS)
    assert len(ctl.arbitrate()) == passes
    waiting = [j.waiting for j in ctl.jobs.values() if not j.passed]
    assert waiting == ([limit] * (len(pods) - passes) if limit else [])


def test_workload_limits_migrating_and_unavailable() -> None:
    ctl = controller(replicas=6, object_limiters={})  # 6 replicas: 2 may migrate, 2 may be unavailable
    for i in range(3):
        ctl.evict(pod(f"w{i}", f"n{i}"), OPTS)
    assert len(ctl.arbitrate()) == 2
    (j,) = [j for j in ctl.jobs.values() if not j.passed]
    assert j.waiting == "maxMigratingPerWorkload=2 reached for ReplicaSet/default/rs"
    ctl2 = controller(replicas=6, object_limiters={})
    ctl2.unavailable_of = lambda w: 2
    ctl2.evict(pod("w0", "n0"), OPTS)
    assert ctl2.arbitrate() == []
    assert (
        next(iter(ctl2.jobs.values())).waiting
        == "maxUnavailablePerWorkload=2 reached for ReplicaSet/default/rs"
    )


def test_object_limiter_paces_a_workload_over_its_window() -> None:
    clock = Clock()
    ctl = controller(
        replicas=10,
        clock=clock,
        default_job_ttl="10m",
        object_limiters={"workload": ObjectLimiter(duration="5m", max_migrating=1)},
    )
    ctl.evict(pod("w0", "n0"), OPTS)
    ctl.evict(pod("w1", "n1"), OPTS)
    assert len(ctl.arbitrate()) == 1
    run(ctl, Port(), times=3)
    assert ctl.arbitrate() == []  # w1 waits: one migration of rs in the last 5m
    clock.t += 301
    assert [j.pod.metadata.name for j in ctl.arbitrate()] == ["w1"]


def test_a_job_that_breaks_a_non_retryable_rule_fails_at_arbitration() -> None:
    ctl = controller(replicas=10)
    ctl.evict(pod("a", "n"), OPTS)
    ctl.pod_filter.replicas_of = lambda w: 1  # the workload was scaled down meanwhile
    assert ctl.arbitrate() == []
    (j,) = ctl.jobs.values()
    assert (j.job.phase, j.job.status.reason) == (pmj.FAILED, pmj.REASON_FORBIDDEN_MIGRATE_POD)


def test_dry_run_creates_no_job() -> None:
    ctl = controller(dry_run=True)
    assert ctl.evict(pod("a", "n"), OPTS) and ctl.jobs == {}


# --- reconcile ------------------------------------------------------------------------------------


def test_evict_directly_succeeds_and_records_the_eviction() -> None:
    ctl = controller(default_job_mode="EvictDirectly")
    ctl.evict(pod("a", "n"), OPTS)
    ctl.arbitrate()
    port = Port()
    run(ctl, port)
    (j,) = ctl.jobs.values()
    assert j.job.phase == pmj.SUCCEEDED and port.evicted == ["a"]
    assert j.job.metadata.annotations[pmj.ANNOTATION_EVICT_REASON] == OPTS.reason
    assert j.job.metadata.annotations[pmj.ANNOTATION_EVICT_TRIGGER] == "LowNodeLoad"
    assert j.job.spec.pod_ref is not None and j.job.spec.pod_ref.name == "a"
    assert ("Evicted", f"LowNodeLoad: {OPTS.reason}", False) in port.events


@pytest.mark.parametrize(
    ("by_hand", "outcome", "told"),
    [
        (False, EvictResult(EVICTED), [(True, "LowNodeLoad", "default", "n")]),
        (False, EvictResult(BLOCKED, "disruption budget"), [(False, "LowNodeLoad", "default", "n")]),
        (False, EvictResult(GONE, 'pods "a" not found'), []),
        # A user's job has no evict-trigger annotation: Koordinator's strategy label is then "".
        (True, EvictResult(EVICTED), [(True, "", "default", "n")]),
    ],
)
def test_every_eviction_answer_is_told_for_the_metrics(
    by_hand: bool, outcome: EvictResult, told: list[tuple[bool, str, str, str]]
) -> None:
    ctl = controller(default_job_mode="EvictDirectly")
    seen: list[tuple[bool, str, str, str]] = []
    ctl.on_evict = lambda ok, strategy, ns, node: seen.append((ok, strategy, ns, node))
    if by_hand:
        user = pmj.PodMigrationJob(
            metadata=pmj.ObjectMeta(name="by-hand"),
            spec=pmj.PodMigrationJobSpec(pod_ref=pmj.PodRef(kind="Pod", namespace="default", name="a")),
        )
        assert ctl.adopt(user, pod("a", "n")) is not None
    else:
        ctl.evict(pod("a", "n"), OPTS)
    ctl.arbitrate()
    run(ctl, Port(evict_outcomes=[outcome]))
    assert seen == told


def test_a_pdb_keeps_the_job_running_until_its_ttl() -> None:
    clock = Clock()
    ctl = controller(default_job_mode="EvictDirectly", clock=clock, default_job_ttl="5m")
    ctl.evict(pod("a", "n"), OPTS)
    ctl.arbitrate()
    blocked = EvictResult(BLOCKED, "Cannot evict pod as it would violate the pod's disruption budget.")
    port = Port(evict_outcomes=[blocked, blocked])
    run(ctl, port)
    (j,) = ctl.jobs.values()
    assert j.job.phase == pmj.RUNNING and port.evicted == []
    cond = next(c for c in j.job.status.conditions if c.type == pmj.COND_EVICTION)
    assert (cond.status, cond.reason) == ("False", pmj.REASON_EVICTING)
    assert "disruption budget" in cond.message
    clock.t += 1
    run(ctl, port)
    assert j.job.phase == pmj.RUNNING
    clock.t += 300
    run(ctl, port)
    assert (j.job.phase, j.job.status.reason) == (pmj.FAILED, pmj.REASON_TIMEOUT)


def test_a_pod_gone_before_eviction_fails_the_job_missing_pod() -> None:
    ctl = controller(default_job_mode="EvictDirectly")
    ctl.evict(pod("a", "n"), OPTS)
    ctl.arbitrate()
    run(ctl, Port(evict_outcomes=[EvictResult(GONE, 'pods "a" not found')]))
    (j,) = ctl.jobs.values()
    assert (j.job.phase, j.job.status.reason) == (pmj.FAILED, pmj.REASON_MISSING_POD)


def test_reservation_first_waits_for_the_reservation_then_evicts_then_binds() -> None:
    clock = Clock()
    ctl = controller(clock=clock)
    ctl.evict(pod("a", "hot"), OPTS)
    ctl.arbitrate()
    port = Port(reservation_node=None, bound=None)
    run(ctl, port)
    (j,) = ctl.jobs.values()
    assert j.job.spec.mode == "ReservationFirst" and port.reservations == ["r-a"]
    assert (
        j.job.phase == pmj.RUNNING and port.evicted == []
    )  # not evicted before the reservation is Available
    sched = next(c for c in j.job.status.conditions if c.type == pmj.COND_RESERVATION_SCHEDULED)
    assert (sched.status, sched.reason) == ("False", pmj.REASON_UNSCHEDULABLE)
    port.reservation_node = "cold"
    clock.t += 1
    run(ctl, port)
    assert port.evicted == ["a"] and j.job.phase == pmj.RUNNING  # the replacement has not bound yet
    bound = next(c for c in j.job.status.conditions if c.type == pmj.COND_POD_BOUND_RESERVATION)
    assert bound.reason == pmj.REASON_WAIT_FOR_POD_BIND_RESERVATION
    port.bound = "cold"
    clock.t += 1
    run(ctl, port)
    assert j.job.phase == pmj.SUCCEEDED and j.target == "cold" and port.evicted == ["a"]
    assert j.job.spec.reservation_options is not None
    assert j.job.spec.reservation_options.reservation_ref is not None
    assert j.job.spec.reservation_options.reservation_ref.name == "r-a"


def test_reservation_first_only_for_reservation_aware_schedulers() -> None:
    ctl = controller(scheduler_names=["other-scheduler"])
    ctl.evict(pod("a", "n"), OPTS)
    assert next(iter(ctl.jobs.values())).job.spec.mode == "EvictDirectly"


def test_a_reservation_that_never_schedules_times_out() -> None:
    clock = Clock()
    ctl = controller(clock=clock, default_job_ttl="1m")
    ctl.evict(pod("a", "n"), OPTS)
    ctl.arbitrate()
    port = Port(reservation_node=None)
    run(ctl, port)
    clock.t += 61
    run(ctl, port)
    (j,) = ctl.jobs.values()
    assert (j.job.phase, j.job.status.reason) == (pmj.FAILED, pmj.REASON_TIMEOUT) and port.evicted == []


def test_evict_qps_and_burst_pace_evictions() -> None:
    clock = Clock()
    ctl = controller(
        default_job_mode="EvictDirectly",
        clock=clock,
        evict_qps=1.0,
        evict_burst=1,
        object_limiters={},
        max_migrating_per_node=0,
        max_migrating_per_workload=9,
        max_unavailable_per_workload=9,
    )
    for i in range(3):
        ctl.evict(pod(f"p{i}", f"n{i}", owner=f"rs{i}"), OPTS)
    ctl.arbitrate()
    port = Port()
    run(ctl, port)
    assert len(port.evicted) == 1  # one token
    clock.t += 1
    run(ctl, port)
    assert len(port.evicted) == 2


def test_token_bucket() -> None:
    b = TokenBucket(qps=2.0, burst=2)
    assert [b.allow(0.0) for _ in range(3)] == [True, True, False]
    assert b.next_at(0.0) == pytest.approx(0.5)
    assert b.allow(0.5) and not b.allow(0.5)
    assert TokenBucket(qps=0, burst=0).allow(0.0)


def test_workload_key() -> None:
    assert Workload("ReplicaSet", "ns", "rs", "u").key == "ReplicaSet/ns/rs"


def test_adopted_jobs_resume_or_fail_missing_pod() -> None:
    ctl = controller(default_job_mode="EvictDirectly")
    user = pmj.PodMigrationJob(
        metadata=pmj.ObjectMeta(name="by-hand"),
        spec=pmj.PodMigrationJobSpec(pod_ref=pmj.PodRef(kind="Pod", namespace="default", name="a")),
    )
    j = ctl.adopt(user, pod("a", "n"))
    assert j is not None and not j.passed and j.trigger == "PodMigrationJob"
    assert j.job.spec.mode == "EvictDirectly"  # the default mode fills an empty one
    assert ctl.adopt(user, pod("a", "n")) is None  # known: only `paused` is taken
    assert ctl.arbitrate() == [j]
    port = Port()
    run(ctl, port)
    assert j.job.phase == pmj.SUCCEEDED and port.evicted == ["a"]
    # One of ours from before a restart, past arbitration: it goes on at once.
    resumed = pmj.PodMigrationJob(
        metadata=pmj.ObjectMeta(
            name="resumed",
            annotations={
                pmj.ANNOTATION_PASSED_ARBITRATION: "true",
                pmj.ANNOTATION_EVICT_TRIGGER: "LowNodeLoad",
            },
        ),
        spec=pmj.PodMigrationJobSpec(mode="EvictDirectly", ttl="1m"),
        status=pmj.PodMigrationJobStatus(phase=pmj.RUNNING),
    )
    r = ctl.adopt(resumed, pod("b", "n"))
    assert r is not None and r.passed and r.ttl == 60 and r.trigger == "LowNodeLoad"
    gone = ctl.adopt(
        pmj.PodMigrationJob(
            metadata=pmj.ObjectMeta(name="gone"),
            spec=pmj.PodMigrationJobSpec(pod_ref=pmj.PodRef(kind="Pod", namespace="default", name="x")),
        ),
        None,
    )
    assert gone is not None and (gone.job.phase, gone.job.status.reason) == (
        pmj.FAILED,
        pmj.REASON_MISSING_POD,
    )
    finished = pmj.PodMigrationJob(
        metadata=pmj.ObjectMeta(name="old"), status=pmj.PodMigrationJobStatus(phase=pmj.SUCCEEDED)
    )
    assert ctl.adopt(finished, pod("c", "n")) is None
    ctl.forget("resumed")
    assert "resumed" not in ctl.jobs


@pytest.mark.parametrize(
    ("selector", "labels", "ok"),
    [
        ("pool=a", {"pool": "a"}, True),
        ("pool=a", {"pool": "b"}, False),
        ("pool==a,zone!=z1", {"pool": "a", "zone": "z2"}, True),
        ("pool==a,zone!=z1", {"pool": "a", "zone": "z1"}, False),
        ("gpu", {"gpu": ""}, True),
        ("!gpu", {"gpu": ""}, False),
    ],
)
def test_node_selector_and_node_fit(selector: str, labels: dict[str, str], ok: bool) -> None:
    ctl = controller(node_selector=selector)
    ctl.pod_filter.node_labels = lambda node: labels
    refusal = ctl.pod_filter.refusal(pod("a", "n1"))
    assert (refusal is None) is ok, refusal
    if not ok:
        assert refusal == f"node n1 does not match nodeSelector {selector!r}"
    fit = controller(node_fit=True)
    fit.pod_filter.fits_elsewhere = lambda p: False
    assert not fit.filter(pod("a", "n1"))
    fit.pod_filter.fits_elsewhere = lambda p: True
    assert fit.filter(pod("a", "n1"))


def test_node_selector_syntax_is_checked() -> None:
    from koordsched.config.catalog import ArgsError

    with pytest.raises(
        ArgsError, match=r"MigrationControllerArgs.nodeSelector: Invalid value: \"pool in \(a\)\""
    ):
        MigrationControllerArgs(node_selector="pool in (a)").validate()
