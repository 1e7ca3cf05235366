"""One gang and the group of gangs it is scheduled with (Koordinator's Gang and GangGroupInfo).

A gang comes from a PodGroup (pods labelled ``pod-group.scheduling.sigs.k8s.io``) or from
the annotations of its first pod. Its spec is read once per PodGroup version or once per
gang (annotation gangs), never in a cycle. What makes an annotation gang unusable (a
min-available that is not a number, groups that are not a JSON list of ids) is kept as
``init_error`` and shown in the pod's message, where Koordinator only logs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from koordsched.api.annotations import decode_json
from koordsched.api.core import Pod
from koordsched.api.durations import DurationError, parse_duration
from koordsched.api.goint import GoIntError, parse_int
from koordsched.api.podgroup import (
    ANNOTATION_GANG_GROUPS,
    ANNOTATION_GANG_MATCH_POLICY,
    ANNOTATION_GANG_MIN_NUM,
    ANNOTATION_GANG_MODE,
    ANNOTATION_GANG_NAME,
    ANNOTATION_GANG_TOTAL_NUM,
    ANNOTATION_GANG_WAIT_TIME,
    ANNOTATION_POD_GROUP_MATCH_POLICY,
    LABEL_POD_GROUP,
    LABEL_POD_GROUP_MIN_AVAILABLE,
    LABEL_POD_GROUP_NAME,
    MATCH_ONCE_SATISFIED,
    MATCH_ONLY_WAITING,
    MATCH_POLICIES,
    MATCH_WAITING_AND_RUNNING,
    MODE_NON_STRICT,
    MODE_STRICT,
    PodGroup,
)
from koordsched.framework.types import PodInfo


def gang_name_of(pod: Pod) -> str:
    """The gang a pod belongs to ("" for none): the PodGroup label, its deprecated form, the annotation."""
    labels = pod.metadata.labels
    if labels:
        name = labels.get(LABEL_POD_GROUP) or labels.get(LABEL_POD_GROUP_NAME)
        if name:
            return name
    annotations = pod.metadata.annotations
    return annotations.get(ANNOTATION_GANG_NAME, "") if annotations else ""


def gang_id_of(pod: Pod) -> str:
    name = gang_name_of(pod)
    return f"{pod.metadata.namespace}/{name}" if name else ""


def from_pod_group(pod: Pod) -> bool:
    labels = pod.metadata.labels
    return bool(labels.get(LABEL_POD_GROUP) or labels.get(LABEL_POD_GROUP_NAME))


@dataclass(frozen=True, slots=True)
class GangSpec:
    min_required: int
    total_children: int
    mode: str
    match_policy: str
    wait_time: float
    #: Sorted gang ids scheduled together (always includes the gang's own).
    group: tuple[str, ...]
    #: Values read as Koordinator reads them, not as written (each member is warned).
    notes: tuple[str, ...] = ()


class GangSpecError(ValueError):
    """A gang annotation that cannot be read; the gang stays uninitialised."""


def _mode(value: str) -> str:
    # Koordinator: NonStrict only when spelled so; anything else is Strict.
    return MODE_NON_STRICT if value == MODE_NON_STRICT else MODE_STRICT


def _match_policy(value: str) -> str:
    return value if value in MATCH_POLICIES else MATCH_ONCE_SATISFIED


def _total(annotations: dict[str, str], min_required: int, notes: list[str]) -> int:
    raw = annotations.get(ANNOTATION_GANG_TOTAL_NUM, "")
    if not raw:
        return min_required
    try:
        total = parse_int(raw, 32)
    except GoIntError as err:
        # Koordinator (strconv.ParseInt(s, 10, 32)) logs it and counts min-available children.
        notes.append(
            f'annotation {ANNOTATION_GANG_TOTAL_NUM}: invalid value "{raw}": {err}; '
            f"read as {min_required}, the gang's min-available, as Koordinator does"
        )
        return min_required
    # Koordinator: a total below min (but above 0) is raised to min; 0 or unset means min.
    return total if total >= min_required else min_required


def _groups(annotations: dict[str, str], own: str) -> tuple[str, ...]:
    raw = annotations.get(ANNOTATION_GANG_GROUPS, "")
    if not raw:
        return (own,)
    try:
        ids = decode_json(raw, list[str])
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as err:
        raise GangSpecError(
            f"annotation {ANNOTATION_GANG_GROUPS}: must be a JSON list of gang ids (namespace/name): {err}"
        ) from None
    bad = [i for i in ids if i.count("/") != 1 or not all(i.split("/"))]
    if bad:
        raise GangSpecError(
            f'annotation {ANNOTATION_GANG_GROUPS}: "{bad[0]}" is not a gang id (namespace/name)'
        )
    # Koordinator keeps the list as given (sorted); a group that forgets its own gang still holds it.
    return tuple(sorted(set(ids) | {own}))


def _non_negative_int(raw: str, what: str) -> int:
    try:
        value = parse_int(raw)  # Koordinator's strconv.Atoi: ASCII digits, no spaces or "_"
    except GoIntError:
        raise GangSpecError(f'{what}: invalid value "{raw}": must be an integer') from None
    if value < 0:
        raise GangSpecError(f'{what}: invalid value "{raw}": must not be negative')
    return value


def spec_from_pod(pod: Pod, gang_id: str, default_timeout: float) -> GangSpec:
    """An annotation gang's spec, from its first pod (Koordinator's ``tryInitByPodConfig``)."""
    labels, annotations = pod.metadata.labels, pod.metadata.annotations
    if labels.get(LABEL_POD_GROUP_MIN_AVAILABLE):
        min_required = _non_negative_int(
            labels[LABEL_POD_GROUP_MIN_AVAILABLE], f"label {LABEL_POD_GROUP_MIN_AVAILABLE}"
        )
    elif annotations.get(ANNOTATION_GANG_MIN_NUM):
        min_required = _non_negative_int(
            annotations[ANNOTATION_GANG_MIN_NUM], f"annotation {ANNOTATION_GANG_MIN_NUM}"
        )
    else:
        raise GangSpecError(f"annotation {ANNOTATION_GANG_MIN_NUM}: Required value")
    wait_time = default_timeout
    raw_wait = annotations.get(ANNOTATION_GANG_WAIT_TIME, "")
    if raw_wait:
        try:
            seconds = parse_duration(raw_wait)
        except DurationError:
            seconds = 0.0
        # Koordinator: an invalid or non-positive waiting-time means the default timeout.
        if seconds > 0:
            wait_time = seconds
    policy = annotations.get(ANNOTATION_GANG_MATCH_POLICY) or annotations.get(
        ANNOTATION_POD_GROUP_MATCH_POLICY, ""
    )
    notes: list[str] = []
    return GangSpec(
        min_required=min_required,
        total_children=_total(annotations, min_required, notes),
        mode=_mode(annotations.get(ANNOTATION_GANG_MODE, "")),
        match_policy=_match_policy(policy),
        wait_time=wait_time,
        group=_groups(annotations, gang_id),
        notes=tuple(f"pod {pod.metadata.namespace}/{pod.metadata.name}: {n}" for n in notes),
    )


def spec_from_pod_group(pg: PodGroup, gang_id: str, default_timeout: float) -> GangSpec:
    """A PodGroup gang's spec: minMember and scheduleTimeoutSeconds, the rest from its annotations."""
    annotations = pg.metadata.annotations
    min_required = pg.spec.min_member
    timeout = pg.spec.schedule_timeout_seconds
    notes: list[str] = []
    return GangSpec(
        min_required=min_required,
        total_children=_total(annotations, min_required, notes),
        mode=_mode(annotations.get(ANNOTATION_GANG_MODE, "")),
        match_policy=_match_policy(annotations.get(ANNOTATION_GANG_MATCH_POLICY, "")),
        wait_time=float(timeout) if timeout is not None and timeout >= 0 else default_timeout,
        group=_groups(annotations, gang_id),
        notes=tuple(f"PodGroup {gang_id}: {n}" for n in notes),
    )


@dataclass(slots=True)
class Gang:
    id: str
    #: Pods carry the PodGroup label: the spec comes from the PodGroup object.
    pod_group_based: bool
    spec: GangSpec | None = None
    #: Why an annotation gang could not be initialised ("" when it was, or has no pod yet).
    init_error: str = ""
    #: The PodGroup object the spec was read from (identity: a new version is a new object).
    source: PodGroup | None = None
    create_time: str = ""
    #: uid -> pod, every pod of the gang, bound or not.
    children: dict[str, Pod] = field(default_factory=dict)
    #: uid -> the pod held at Permit (assumed).
    waiting: dict[str, PodInfo] = field(default_factory=dict)
    #: uid -> pod bound (by us or anyone).
    bound: dict[str, Pod] = field(default_factory=dict)
    #: uid -> a PodInfo naming the child, to ask the queue to activate it (made once per child).
    shells: dict[str, PodInfo] = field(default_factory=dict)
    #: (uid, spec) pairs already warned of the spec's notes: once per member and spec version.
    warned: set[tuple[str, GangSpec]] = field(default_factory=set)
    #: uid -> phase of members that ended (Succeeded, Failed): no longer children, still counted
    #: in the PodGroup's status.
    finished: dict[str, str] = field(default_factory=dict)

    @property
    def initialized(self) -> bool:
        return self.spec is not None

    @property
    def name(self) -> str:
        return self.id.partition("/")[2]

    def group_id(self) -> str:
        return ",".join(self.spec.group) if self.spec is not None else self.id


@dataclass(slots=True)
class GangGroup:
    """State shared by every gang of one group: the schedule-cycle bookkeeping and once-satisfied."""

    id: str
    schedule_cycle: int = 1
    cycle_valid: bool = True
    once_satisfied: bool = False
    last_schedule_time: float = 0.0
    #: pod uid -> the schedule cycle it last took part in.
    child_round: dict[str, int] = field(default_factory=dict)
    #: pod uid -> the group time when the pod was last scheduled (its queue-sort time).
    child_time: dict[str, float] = field(default_factory=dict)
    #: Members activated by a sibling's Permit wait, until their next PreFilter.
    activated: set[str] = field(default_factory=set)


def ready(gang: Gang | None, group: GangGroup) -> bool:
    """Permit's per-gang check: enough members assumed (or bound, or once satisfied) for its policy."""
    if gang is None or gang.spec is None:
        return False
    spec = gang.spec
    if spec.match_policy == MATCH_ONLY_WAITING:
        return len(gang.waiting) >= spec.min_required
    if spec.match_policy == MATCH_WAITING_AND_RUNNING:
        return len(gang.waiting) + len(gang.bound) >= spec.min_required
    return len(gang.waiting) >= spec.min_required or group.once_satisfied
