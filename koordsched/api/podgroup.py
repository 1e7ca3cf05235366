"""PodGroup (``scheduling.sigs.k8s.io/v1alpha1``, namespaced) and the gang annotations and labels.

Field names follow the scheduler-plugins Go types that Koordinator v1.6 vendors. The gang
keys are Koordinator's (spec 2.1); PodGroups carry the same annotations as pods, except
``waiting-time``, which only pods are read for.
"""

from __future__ import annotations

import msgspec

from koordsched.api.core import ObjectMeta, ResourceList
from koordsched.api.field_errors import Refused, invalid, invalid_object

POD_GROUP_API_VERSION = "scheduling.sigs.k8s.io/v1alpha1"

#: The PodGroup a pod belongs to (its name in the pod's namespace).
LABEL_POD_GROUP = "pod-group.scheduling.sigs.k8s.io"
#: Deprecated forms of the same, still read by Koordinator v1.6.
LABEL_POD_GROUP_NAME = "pod-group.scheduling.sigs.k8s.io/name"
LABEL_POD_GROUP_MIN_AVAILABLE = "pod-group.scheduling.sigs.k8s.io/min-available"
ANNOTATION_POD_GROUP_MATCH_POLICY = "pod-group.scheduling.sigs.k8s.io/match-policy"

ANNOTATION_GANG_NAME = "gang.scheduling.koordinator.sh/name"
ANNOTATION_GANG_MIN_NUM = "gang.scheduling.koordinator.sh/min-available"
ANNOTATION_GANG_TOTAL_NUM = "gang.scheduling.koordinator.sh/total-number"
ANNOTATION_GANG_MODE = "gang.scheduling.koordinator.sh/mode"
ANNOTATION_GANG_WAIT_TIME = "gang.scheduling.koordinator.sh/waiting-time"
ANNOTATION_GANG_GROUPS = "gang.scheduling.koordinator.sh/groups"
ANNOTATION_GANG_MATCH_POLICY = "gang.scheduling.koordinator.sh/match-policy"

MODE_STRICT = "Strict"
MODE_NON_STRICT = "NonStrict"

MATCH_ONLY_WAITING = "only-waiting"
MATCH_WAITING_AND_RUNNING = "waiting-and-running"
MATCH_ONCE_SATISFIED = "once-satisfied"
MATCH_POLICIES = (MATCH_ONLY_WAITING, MATCH_WAITING_AND_RUNNING, MATCH_ONCE_SATISFIED)

PHASE_PENDING = "Pending"
PHASE_PRE_SCHEDULING = "PreScheduling"
PHASE_SCHEDULING = "Scheduling"
PHASE_SCHEDULED = "Scheduled"
PHASE_RUNNING = "Running"
PHASE_FINISHED = "Finished"
PHASE_FAILED = "Failed"

INT32_MAX = 2**31 - 1


class _Base(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    pass


class PodGroupSpec(_Base):
    min_member: int = 0
    min_resources: ResourceList = {}
    schedule_timeout_seconds: int | None = None


class PodGroupStatus(_Base):
    phase: str = ""
    occupied_by: str = ""
    scheduled: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    schedule_start_time: str | None = None


class PodGroup(_Base):
    api_version: str = POD_GROUP_API_VERSION
    kind: str = "PodGroup"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodGroupSpec = msgspec.field(default_factory=PodGroupSpec)
    status: PodGroupStatus = msgspec.field(default_factory=PodGroupStatus)


def check_pod_group(pg: PodGroup) -> None:
    """Refuse what the CRD's int32 fields cannot hold, or a negative count (the API server would)."""
    errs: list[str] = []
    if not 0 <= pg.spec.min_member <= INT32_MAX:
        errs.append(invalid("spec.minMember", pg.spec.min_member, f"must be between 0 and {INT32_MAX}"))
    timeout = pg.spec.schedule_timeout_seconds
    if timeout is not None and not -(2**31) <= timeout <= INT32_MAX:
        errs.append(invalid("spec.scheduleTimeoutSeconds", timeout, "must be an int32"))
    if errs:
        name = f"{pg.metadata.namespace}/{pg.metadata.name}"
        raise Refused(invalid_object("PodGroup.scheduling.sigs.k8s.io", name, errs))
