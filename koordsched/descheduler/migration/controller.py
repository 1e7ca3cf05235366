"""The MigrationController: it is the profile's Evictor (a plugin's eviction becomes a
PodMigrationJob), it arbitrates pending jobs against the limits, and it reconciles each job
that passed through a :class:`MigrationPort` (the backend's writes).

EvictDirectly: evict (Eviction API honouring PDBs, or delete) and finish. ReservationFirst:
create a Reservation for the replacement, wait until it is Available, evict, then wait for
the replacement to bind. Both fail with ``Timeout`` past the job's TTL. Nothing here does I/O.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import msgspec

from koordsched.api.core import ObjectMeta, Pod
from koordsched.api.durations import DurationError, parse_duration
from koordsched.descheduler.framework import EvictOptions
from koordsched.descheduler.migration import job as pmj
from koordsched.descheduler.migration.args import EVICT_DIRECTLY, RESERVATION_FIRST, MigrationControllerArgs
from koordsched.descheduler.migration.filters import PodFilter, Workload, workload_of
from koordsched.descheduler.migration.limits import InFlight, ObjectLimiter, TokenBucket, limit_refusal
from koordsched.descheduler.plugins.lownodeload.sorting import sort_pods

log = logging.getLogger(__name__)

NAME: Final = "MigrationController"

#: Koordinator's messages for a failed job.
MESSAGE_TIMEOUT: Final = "Abort job caused by timeout"
MESSAGE_RESERVATION_EXPIRED: Final = "Reservation expired"
MESSAGE_RESERVATION_BOUND: Final = "Reservation is already bound by another Pod"
#: What a job asks that koord-descheduler v1.6 does not act on either (named, never ignored silently).
REASON_PREEMPTION_OPTIONS: Final = "PreemptionOptionsIgnored"
MESSAGE_PREEMPTION_OPTIONS: Final = (
    "spec.reservationOptions.preemptionOptions is not acted on: koord-descheduler v1.6 has no "
    "reservation preemption, so a Reservation that cannot be scheduled fails the job Unschedulable"
)


def missing_pod_message(namespace: str, name: str) -> str:
    return f'Abort job caused by missing Pod "{namespace}/{name}"'


def missing_reservation_message(name: str) -> str:
    # Koordinator quotes a NamespacedName: a cluster-scoped Reservation's reads "/name".
    return f'Abort job caused by missing Reservation "/{name}"'


def same_node_message(name: str) -> str:
    # Koordinator's wording, its spelling included.
    return f'Scheduler assignes the Reservation "{name}" on the same node as the Pod'


def warn_unsupported(job: pmj.PodMigrationJob, port: MigrationPort) -> None:
    """A warning event (and a log line) for each field of ``job`` that is not acted on."""
    opts = job.spec.reservation_options
    if opts is not None and opts.preemption_options is not None:
        log.warning("PodMigrationJob %s: %s", job.metadata.name, MESSAGE_PREEMPTION_OPTIONS)
        port.event(job, None, REASON_PREEMPTION_OPTIONS, MESSAGE_PREEMPTION_OPTIONS, True)


#: Outcomes of an eviction request.
EVICTED: Final = "evicted"
BLOCKED: Final = "blocked"  # a PodDisruptionBudget (429), retried until the TTL
GONE: Final = "gone"  # the pod no longer exists
ERROR: Final = "error"


@dataclass(frozen=True)
class EvictResult:
    outcome: str
    message: str = ""


@dataclass(frozen=True)
class ReservationState:
    #: ``status.phase``: Pending, Available, Succeeded, Failed; "" when not yet scheduled.
    phase: str
    node: str = ""
    #: Set when the reservation cannot be found.
    missing: bool = False
    #: Failed by its TTL (condition Ready, reason Expired).
    expired: bool = False
    #: The scheduler's last word when its condition Scheduled says Unschedulable, else "".
    message: str = ""


class MigrationPort(Protocol):
    """What reconcile asks of the backend (kube: API writes with timeouts; sim: memory)."""

    async def evict(self, pod: Pod, job: pmj.PodMigrationJob, policy: str) -> EvictResult: ...
    async def create_reservation(self, pod: Pod, job: pmj.PodMigrationJob) -> str:
        """Create the replacement's Reservation; returns its name (raises on failure)."""
        ...

    async def reservation(self, name: str) -> ReservationState: ...
    async def delete_reservation(self, name: str) -> None:
        """Delete the job's Reservation (gone already is fine; raises on failure)."""
        ...

    async def replacement_bound(
        self, pod: Pod, job: pmj.PodMigrationJob, reservation: str
    ) -> tuple[str, str, bool] | None:
        """A new pod bound to ``reservation`` (``namespace/name``, node, whether it is Ready), or
        None while there is none."""
        ...

    async def save(self, job: pmj.PodMigrationJob) -> None:
        """Persist the job (create or status update); a write that would overwrite someone
        else's since (a user's ``Aborted``) is not made: the watch brings theirs."""
        ...

    def event(
        self, job: pmj.PodMigrationJob, pod: Pod | None, reason: str, message: str, warning: bool
    ) -> None: ...


@dataclass
class Job:
    job: pmj.PodMigrationJob
    pod: Pod
    workload: Workload | None
    created: float
    trigger: str
    reason: str
    ttl: float
    passed: bool = False
    #: Why arbitration keeps it pending (a limit), for the report.
    waiting: str = ""
    #: The first limit it waited for, kept after it passes.
    waited: str = ""
    reservation: str = ""
    target: str = ""
    #: The nodes the plugin planned for the pod (its Reservation is restricted to them).
    nodes: tuple[str, ...] = ()
    #: The last unschedulable message of its Reservation (an event only when it changes).
    unschedulable: str = ""

    @property
    def name(self) -> str:
        return self.job.metadata.name

    @property
    def node(self) -> str:
        return self.pod.spec.node_name

    @property
    def finished(self) -> bool:
        return self.job.phase in pmj.FINISHED

    @property
    def evicted(self) -> bool:
        return any(c.type == pmj.COND_EVICTION and c.status == "True" for c in self.job.status.conditions)


def node_restricted_template(nodes: tuple[str, ...]) -> dict[str, object]:
    """A ReservationTemplateSpec whose pod template requires one of ``nodes`` (by name).

    One term per node: a ``matchFields`` requirement takes exactly one value."""
    terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]} for n in nodes]
    affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    }
    return {"spec": {"template": {"spec": {"affinity": affinity}}}}


def template_affinity(template: Any) -> dict[str, Any] | None:
    """The pod template's ``affinity`` in a ReservationTemplateSpec, or None."""
    try:
        affinity = template["spec"]["template"]["spec"]["affinity"]
    except (KeyError, IndexError, TypeError):
        return None
    return affinity if isinstance(affinity, dict) else None


def job_name(pod: Pod, created: float) -> str:
    digest = hashlib.sha256(f"{pod.metadata.uid or pod.key}/{created}".encode()).hexdigest()[:10]
    base = pod.metadata.name[:40]
    return f"{base}-{digest}"


@dataclass
class MigrationController:
    args: MigrationControllerArgs
    pod_filter: PodFilter
    clock: Callable[[], float]
    #: ``DeschedulerConfiguration.dryRun`` or the args' ``dryRun``: jobs are not created.
    dry_run: bool = False
    #: Pods of the workload that are not Running and Ready (for maxUnavailablePerWorkload).
    unavailable_of: Callable[[Workload], int] = lambda _w: 0
    jobs: dict[str, Job] = field(default_factory=dict)
    #: Told of every eviction answer: (ok, strategy, namespace, node), for the metrics.
    on_evict: Callable[[bool, str, str, str], None] | None = None
    limiter: TokenBucket = field(init=False)
    objects: ObjectLimiter = field(init=False)
    #: Reservations to delete (their job timed out, was aborted before its eviction, or deleted).
    orphans: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.limiter = TokenBucket(self.args.qps, self.args.evict_burst)
        self.objects = ObjectLimiter(self.args, self.pod_filter)

    @property
    def name(self) -> str:
        return NAME

    # --- Evictor ---------------------------------------------------------------------------

    def filter(self, pod: Pod) -> bool:
        return self.pod_filter.refusal(pod) is None and self.pod_filter.fit_refusal(pod) is None

    def evict(self, pod: Pod, options: EvictOptions) -> bool:
        if self.dry_run or self.args.dry_run:
            return True
        uid = pod.metadata.uid or pod.key
        if any((j.pod.metadata.uid or j.pod.key) == uid and not j.finished for j in self.jobs.values()):
            return False  # one migration per pod at a time
        now = self.clock()
        mode = self.args.default_job_mode
        if mode == RESERVATION_FIRST and pod.spec.scheduler_name not in self.args.scheduler_names:
            mode = EVICT_DIRECTLY  # only reservation-aware schedulers can honour a Reservation
        name = job_name(pod, now)
        job = pmj.PodMigrationJob(
            metadata=ObjectMeta(
                name=name,
                annotations={
                    pmj.ANNOTATION_EVICT_REASON: options.reason,
                    pmj.ANNOTATION_EVICT_TRIGGER: options.plugin,
                },
            ),
            spec=pmj.PodMigrationJobSpec(
                ttl=self.args.default_job_ttl,
                mode=mode,
                pod_ref=pmj.PodRef(
                    kind="Pod",
                    api_version="v1",
                    namespace=pod.metadata.namespace,
                    name=pod.metadata.name,
                    uid=pod.metadata.uid,
                ),
                delete_options={
                    k: v
                    for k, v in msgspec.to_builtins(self.args.default_delete_options).items()
                    if v not in (None, [])
                }
                if self.args.default_delete_options is not None
                else None,
            ),
            status=pmj.PodMigrationJobStatus(phase=pmj.PENDING),
        )
        if options.nodes and mode == RESERVATION_FIRST:
            template = node_restricted_template(options.nodes)
            job.spec.reservation_options = pmj.ReservationOptions(template=template)
        w = workload_of(pod)
        self.jobs[name] = Job(
            job, pod, w, now, options.plugin, options.reason, self.args.ttl, nodes=options.nodes
        )
        return True

    def adopt(
        self, job: pmj.PodMigrationJob, pod: Pod | None, port: MigrationPort | None = None
    ) -> Job | None:
        """Take over a job found in the cluster (a user's, or one of ours from before a restart).

        A finished job is left alone; a known one takes the new ``paused``, and stops when someone
        set it ``Aborted`` (:meth:`abort`). A job whose pod is gone fails ``MissingPod``. One that
        passed arbitration resumes where it was. ``port`` gets the warning events of what a job
        asks that is not acted on (``preemptionOptions``).
        """
        name = job.metadata.name
        known = self.jobs.get(name)
        if known is not None:
            known.job.spec.paused = job.spec.paused
            if job.phase == pmj.ABORTED and known.job.phase != pmj.ABORTED:
                # The user's word wins, as Koordinator's (its update conflicts, it reads the job
                # again and leaves an Aborted one alone), even over a result not written yet.
                self.abort(known, job.status, port)
            return None
        if job.phase in pmj.FINISHED:
            return None
        if port is not None:
            warn_unsupported(job, port)
        now = self.clock()
        notes = job.metadata.annotations
        trigger = notes.get(pmj.ANNOTATION_EVICT_TRIGGER, pmj.KIND)
        reason = notes.get(pmj.ANNOTATION_EVICT_REASON, "")
        try:
            ttl = parse_duration(job.spec.ttl) if job.spec.ttl else self.args.ttl
        except DurationError:
            ttl = self.args.ttl
        if not job.spec.mode:
            job.spec.mode = self.args.default_job_mode
        if pod is None:
            placeholder = Pod(metadata=ObjectMeta(name=job.spec.pod_ref.name if job.spec.pod_ref else ""))
            j = Job(job, placeholder, None, now, trigger, reason, ttl)
            self._finish(j, pmj.FAILED, pmj.REASON_MISSING_POD, "the job's pod does not exist")
        else:
            j = Job(job, pod, workload_of(pod), now, trigger, reason, ttl)
            j.passed = notes.get(pmj.ANNOTATION_PASSED_ARBITRATION) == "true"
            opts = job.spec.reservation_options
            if opts is not None and opts.reservation_ref is not None:
                j.reservation = opts.reservation_ref.name
        self.jobs[name] = j
        return j

    def forget(self, name: str) -> None:
        """The job was deleted in the cluster: stop working on it, and delete its Reservation (as
        Koordinator's controller does on a job's deletion)."""
        j = self.jobs.pop(name, None)
        if j is not None and j.reservation:
            self.orphans.append(j.reservation)

    def abort(self, j: Job, status: pmj.PodMigrationJobStatus, port: MigrationPort | None) -> None:
        """Someone set the job ``Aborted`` (Koordinator: "the user forcefully aborted"): it is over
        as it is, nothing more is evicted, and its status stays theirs. A Reservation not used yet
        (the pod still runs) is deleted, so it stops holding room until its TTL."""
        evicted = j.evicted
        j.job.status = msgspec.convert(msgspec.to_builtins(status), pmj.PodMigrationJobStatus)
        j.waiting = ""
        if j.reservation and not evicted:
            self.orphans.append(j.reservation)
        message = status.message or "the PodMigrationJob was aborted"
        log.info("PodMigrationJob %s aborted: %s", j.name, message)
        if port is not None:
            port.event(j.job, j.pod, pmj.ABORTED, message, False)

    async def collect(self, port: MigrationPort) -> None:
        """Delete the Reservations left behind; one that cannot be deleted now is tried again."""
        todo, self.orphans = self.orphans, []
        for name in todo:
            try:
                await port.delete_reservation(name)
            except Exception as err:  # one failure never stops the others
                log.warning("deleting Reservation %s: %s", name, err)
                self.orphans.append(name)

    # --- arbitration -----------------------------------------------------------------------

    def in_flight(self) -> list[InFlight]:
        return [
            InFlight(j.node, j.pod.metadata.namespace, j.workload)
            for j in self.jobs.values()
            if j.passed and not j.finished
        ]

    def arbitrate(self) -> list[Job]:
        """Pending jobs in order; those failing a non-retryable rule fail, those within the
        limits pass (annotated ``passed-arbitration``), the rest wait with the limit named."""
        now = self.clock()
        pending = [j for j in self.jobs.values() if not j.passed and not j.finished and not j.job.spec.paused]
        # Creation time first, then the pod order (cheapest to move first), then workload grouping.
        order = {id(p): i for i, p in enumerate(sort_pods([j.pod for j in pending], {}, {}, {}))}
        pending.sort(key=lambda j: (j.created, order[id(j.pod)], j.workload.key if j.workload else ""))
        passed: list[Job] = []
        for j in pending:
            if now - j.created >= j.ttl > 0:
                self._finish(j, pmj.FAILED, pmj.REASON_TIMEOUT, MESSAGE_TIMEOUT)
                continue
            refusal = self.pod_filter.refusal(j.pod)
            if refusal is not None:
                self._finish(j, pmj.FAILED, pmj.REASON_FORBIDDEN_MIGRATE_POD, refusal)
                continue
            why = limit_refusal(
                self.args,
                self.pod_filter,
                j.node,
                j.pod.metadata.namespace,
                j.workload,
                self.in_flight(),
                self.unavailable_of,
            ) or self.objects.refusal(j.workload, j.pod.metadata.namespace, now)
            if why is not None:
                j.waiting = why
                j.waited = j.waited or why
                j.job.status.message = why  # shown on the Pending job: what it waits for
                continue
            j.passed, j.waiting = True, ""
            j.job.status.message = ""
            j.job.metadata.annotations[pmj.ANNOTATION_PASSED_ARBITRATION] = "true"
            self.objects.record(j.workload, j.pod.metadata.namespace, now)
            passed.append(j)
        return passed

    def phases(self) -> dict[str, int]:
        """Jobs by phase (every phase, 0 included)."""
        out = dict.fromkeys(pmj.PHASES, 0)
        for j in self.jobs.values():
            out[j.job.phase] = out.get(j.job.phase, 0) + 1
        return out

    def _finish(self, j: Job, phase: str, reason: str, message: str) -> None:
        j.job.status.phase, j.job.status.reason, j.job.status.message = phase, reason, message

    # --- reconcile -------------------------------------------------------------------------

    async def reconcile(self, j: Job, port: MigrationPort) -> None:
        """Advance one job as far as it can go now; call again until it is finished."""
        if j.finished or not j.passed:
            return
        now = self.clock()
        st = j.job.status
        if now - j.created >= j.ttl > 0:
            # Koordinator deletes the job's Reservation first, then fails it.
            if j.reservation:
                self.orphans.append(j.reservation)
            self._finish(j, pmj.FAILED, pmj.REASON_TIMEOUT, MESSAGE_TIMEOUT)
            port.event(j.job, j.pod, pmj.REASON_TIMEOUT, st.message, True)
            await port.save(j.job)
            return
        if j.job.phase == pmj.PENDING:  # "" (a job made by hand) reads as Pending
            st.phase, st.node_name = pmj.RUNNING, j.node
            st.pod_ref = j.job.spec.pod_ref
        if j.job.spec.mode == RESERVATION_FIRST:
            await self._reservation_first(j, port, now)
        else:
            await self._evict(j, port, now, final=True)
        await port.save(j.job)

    async def _reservation_first(self, j: Job, port: MigrationPort, now: float) -> None:
        if not j.reservation:
            try:
                j.reservation = await port.create_reservation(j.pod, j.job)
            except Exception as err:
                self._finish(j, pmj.FAILED, pmj.REASON_FAILED_CREATE_RESERVATION, str(err))
                port.event(j.job, j.pod, pmj.REASON_FAILED_CREATE_RESERVATION, str(err), True)
                return
            j.job.set_condition(
                pmj.PodMigrationJobCondition(
                    type=pmj.COND_RESERVATION_CREATED, status="True", reason="", message=j.reservation
                )
            )
            opts = j.job.spec.reservation_options or pmj.ReservationOptions()
            opts.reservation_ref = pmj.PodRef(
                kind="Reservation", name=j.reservation, api_version=pmj.API_VERSION
            )
            j.job.spec.reservation_options = opts
        if not j.evicted:
            rs = await port.reservation(j.reservation)
            if not self._reservation_ready(j, port, rs):
                return
            if not await self._evict(j, port, now, final=False):
                return
        bound = await port.replacement_bound(j.pod, j.job, j.reservation)
        if bound is None:
            j.job.set_condition(
                pmj.PodMigrationJobCondition(
                    type=pmj.COND_POD_BOUND_RESERVATION,
                    status="False",
                    reason=pmj.REASON_WAIT_FOR_POD_BIND_RESERVATION,
                    message=f"waiting for the replacement to bind reservation {j.reservation}",
                )
            )
            return
        key, node, ready = bound
        j.target = node
        # Koordinator's wording; the job's podRef becomes the pod that took the reservation.
        message = f'Bind Pod "{key}" in Reservation "{j.reservation}"'
        j.job.set_condition(
            pmj.PodMigrationJobCondition(type=pmj.COND_POD_BOUND_RESERVATION, status="True", message=message)
        )
        if not ready:
            # As Koordinator's: the job ends once the new pod is Ready, not merely bound.
            waiting = pmj.PodMigrationJobCondition(
                type=pmj.COND_BOUND_POD_READY, status="False", reason=pmj.REASON_WAIT_FOR_BOUND_POD_READY
            )
            if waiting not in j.job.status.conditions:
                j.job.set_condition(waiting)
                port.event(
                    j.job,
                    None,
                    pmj.REASON_WAIT_FOR_BOUND_POD_READY,
                    f"Waiting for Bound Pod {key} Ready",
                    False,
                )
            return
        j.job.set_condition(pmj.PodMigrationJobCondition(type=pmj.COND_BOUND_POD_READY, status="True"))
        port.event(j.job, None, "BoundPodReady", f'Bind pod "{key}" is ready', False)
        ns, _, name = key.partition("/")
        j.job.status.pod_ref = pmj.PodRef(kind="Pod", api_version="v1", namespace=ns, name=name)
        j.job.status.status = "Complete"
        self._finish(j, pmj.SUCCEEDED, "", message)
        port.event(j.job, j.pod, "Migrated", f"{message} on node {node}", False)

    def _reservation_ready(self, j: Job, port: MigrationPort, rs: ReservationState) -> bool:
        """Whether the job's Reservation is Available on another node (then the pod may go);
        otherwise the job waits (Pending) or fails as Koordinator's does."""
        if rs.missing:
            message = missing_reservation_message(j.reservation)
            self._finish(j, pmj.FAILED, pmj.REASON_MISSING_RESERVATION, message)
            port.event(j.job, j.pod, pmj.REASON_MISSING_RESERVATION, message, True)
            return False
        if rs.message and rs.message != j.unschedulable:
            # The scheduler's reason, synced to the job while the Reservation is not scheduled.
            j.unschedulable = rs.message
            port.event(j.job, None, pmj.REASON_UNSCHEDULABLE, rs.message, True)
        if rs.phase in ("", "Pending", "Waiting"):
            j.job.set_condition(
                pmj.PodMigrationJobCondition(
                    type=pmj.COND_RESERVATION_SCHEDULED,
                    status="False",
                    reason=pmj.REASON_UNSCHEDULABLE,
                    message=rs.message or f"reservation {j.reservation} is not scheduled yet",
                )
            )
            return False
        if rs.expired:
            self._finish(j, pmj.FAILED, pmj.REASON_RESERVATION_EXPIRED, MESSAGE_RESERVATION_EXPIRED)
            return False
        if rs.phase == "Succeeded":
            # allocateOnce: another pod took it before this one was evicted.
            self._finish(j, pmj.FAILED, pmj.REASON_FORBIDDEN_MIGRATE_POD, MESSAGE_RESERVATION_BOUND)
            port.event(j.job, j.pod, pmj.REASON_FORBIDDEN_MIGRATE_POD, MESSAGE_RESERVATION_BOUND, True)
            return False
        if rs.phase != "Available" or not rs.node:
            # Failed otherwise (its node gone, ...): Koordinator fails the job Unschedulable
            # with the Reservation's unschedulable message (no preemption in v1.6).
            self._finish(j, pmj.FAILED, pmj.REASON_UNSCHEDULABLE, rs.message)
            return False
        if rs.node == j.node:
            message = same_node_message(j.reservation)
            self._finish(j, pmj.FAILED, pmj.REASON_FORBIDDEN_MIGRATE_POD, message)
            port.event(j.job, j.pod, pmj.REASON_FORBIDDEN_MIGRATE_POD, message, True)
            return False
        j.target = rs.node
        j.job.set_condition(
            pmj.PodMigrationJobCondition(type=pmj.COND_RESERVATION_SCHEDULED, status="True", message=rs.node)
        )
        return True

    async def _evict(self, j: Job, port: MigrationPort, now: float, *, final: bool) -> bool:
        if not self.limiter.allow(now):
            return False  # evictQPS/evictBurst: the next reconcile retries
        result = await port.evict(j.pod, j.job, self.args.eviction_policy)
        if self.on_evict is not None and result.outcome != GONE:
            # The metric's strategy is the annotation as Koordinator reads it: "" when a job has none.
            strategy = j.job.metadata.annotations.get(pmj.ANNOTATION_EVICT_TRIGGER, "")
            self.on_evict(result.outcome == EVICTED, strategy, j.pod.metadata.namespace, j.node)
        if result.outcome == EVICTED or (result.outcome == GONE and not final):
            j.job.set_condition(
                pmj.PodMigrationJobCondition(
                    type=pmj.COND_EVICTION, status="True", reason=pmj.REASON_EVICT_COMPLETE
                )
            )
            port.event(j.job, j.pod, "Evicted", f"{j.trigger}: {j.reason}", False)
            if final:
                # Koordinator's EvictDirectly ending: no reason, status Complete.
                j.job.status.status = "Complete"
                self._finish(
                    j,
                    pmj.SUCCEEDED,
                    "",
                    f'Pod "{j.pod.metadata.namespace}/{j.pod.metadata.name}" has been evicted',
                )
            return True
        if result.outcome == GONE:
            message = missing_pod_message(j.pod.metadata.namespace, j.pod.metadata.name)
            self._finish(j, pmj.FAILED, pmj.REASON_MISSING_POD, message)
            port.event(j.job, None, pmj.REASON_MISSING_POD, message, True)
            return False
        reason = pmj.REASON_EVICTING if result.outcome == BLOCKED else pmj.REASON_FAILED_EVICT
        j.job.set_condition(
            pmj.PodMigrationJobCondition(
                type=pmj.COND_EVICTION, status="False", reason=reason, message=result.message
            )
        )
        port.event(j.job, j.pod, pmj.REASON_FAILED_EVICT, result.message, True)
        if result.outcome == ERROR:
            self._finish(j, pmj.FAILED, pmj.REASON_FAILED_EVICT, result.message)
        return False
