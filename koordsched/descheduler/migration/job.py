"""``PodMigrationJob`` (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped, spec 3.7): the wire
shape, its phases, condition types and reasons, exactly as Koordinator's API spells them."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from koordsched.api.core import ObjectMeta

GROUP: Final = "scheduling.koordinator.sh"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "PodMigrationJob"
PLURAL: Final = "podmigrationjobs"

PENDING: Final = "Pending"
RUNNING: Final = "Running"
SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"
ABORTED: Final = "Aborted"
PHASES: Final = (PENDING, RUNNING, SUCCEEDED, FAILED, ABORTED)
FINISHED: Final = frozenset((SUCCEEDED, FAILED, ABORTED))

COND_RESERVATION_CREATED: Final = "ReservationCreated"
COND_RESERVATION_SCHEDULED: Final = "ReservationScheduled"
COND_PREEMPTION: Final = "Preemption"
COND_EVICTION: Final = "Eviction"
COND_POD_SCHEDULED: Final = "PodScheduled"
COND_POD_BOUND_RESERVATION: Final = "PodBoundReservation"
COND_BOUND_POD_READY: Final = "BoundPodReady"
COND_RESERVATION_BOUND: Final = "ReservationBound"

REASON_TIMEOUT: Final = "Timeout"
REASON_FAILED_CREATE_RESERVATION: Final = "FailedCreateReservation"
REASON_RESERVATION_EXPIRED: Final = "ReservationExpired"
REASON_UNSCHEDULABLE: Final = "Unschedulable"
REASON_FORBIDDEN_MIGRATE_POD: Final = "ForbiddenMigratePod"
REASON_MISSING_POD: Final = "MissingPod"
REASON_MISSING_RESERVATION: Final = "MissingReservation"
REASON_PREEMPTING: Final = "Preempting"
REASON_PREEMPT_COMPLETE: Final = "PreemptComplete"
REASON_EVICTING: Final = "Evicting"
REASON_FAILED_EVICT: Final = "FailedEvict"
REASON_EVICT_COMPLETE: Final = "EvictComplete"
REASON_WAIT_FOR_POD_BIND_RESERVATION: Final = "WaitForPodBindReservation"
REASON_WAIT_FOR_BOUND_POD_READY: Final = "WaitForBoundPodReady"

#: Set on a job that passed arbitration.
ANNOTATION_PASSED_ARBITRATION: Final = "descheduler.koordinator.sh/passed-arbitration"
#: Written on the evicted pod (and the job) as Koordinator does.
ANNOTATION_EVICT_REASON: Final = "koordinator.sh/evict-reason"
ANNOTATION_EVICT_TRIGGER: Final = "koordinator.sh/evict-trigger"


class _Base(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    pass


class PodRef(_Base):
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    api_version: str = ""


class ReservationOptions(_Base):
    reservation_ref: PodRef | None = None
    template: dict[str, Any] | None = None
    preemption_options: dict[str, Any] | None = None


class PodMigrationJobSpec(_Base):
    paused: bool = False
    ttl: str | None = None
    mode: str = ""
    pod_ref: PodRef | None = None
    reservation_options: ReservationOptions | None = None
    delete_options: dict[str, Any] | None = None


class PodMigrationJobCondition(_Base):
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_probe_time: str | None = None
    last_transition_time: str | None = None


class PodMigrationJobStatus(_Base):
    phase: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    conditions: list[PodMigrationJobCondition] = []
    node_name: str = ""
    pod_ref: PodRef | None = None
    preempted_pods_ref: list[PodRef] = []


class PodMigrationJob(_Base):
    api_version: str = API_VERSION
    kind: str = KIND
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodMigrationJobSpec = msgspec.field(default_factory=PodMigrationJobSpec)
    status: PodMigrationJobStatus = msgspec.field(default_factory=PodMigrationJobStatus)

    @property
    def phase(self) -> str:
        return self.status.phase or PENDING

    def set_condition(self, cond: PodMigrationJobCondition) -> None:
        self.status.conditions = [c for c in self.status.conditions if c.type != cond.type] + [cond]
