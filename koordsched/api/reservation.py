"""Koordinator's Reservation (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped), spec 3.2 and 2.5.

A Reservation holds a node's resources for the pods its ``owners`` describe. The scheduler
schedules it as a *reserve pod* built from its template (:func:`reserve_pod`), and once it is
Available the reserve pod stands on ``status.nodeName`` holding ``status.allocatable``. Field
names follow Koordinator v1.6's JSON (``apis/scheduling/v1alpha1/reservation_types.go``).
Everything the scheduler would otherwise parse per cycle (durations, times, quantities,
selectors) is checked once here (:func:`check_reservation`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime

import msgspec

from koordsched.api.annotations import decode_annotation
from koordsched.api.core import (
    Container,
    LabelSelector,
    NodeSelectorTerm,
    ObjectMeta,
    ObjectReference,
    Pod,
    PodSpec,
    PodStatus,
    ResourceList,
    ResourceRequirements,
    Taint,
    Toleration,
)
from koordsched.api.durations import DurationError, parse_duration
from koordsched.api.field_errors import Refused, invalid, not_supported, required
from koordsched.api.node_metric import parse_time
from koordsched.api.quantity import QuantityError, format_milli_cpu
from koordsched.api.resources import checked_pod_requests, resource_list
from koordsched.api.selectors import (
    SelectorError,
    match_label_selector,
    validate_label_selector,
    validate_node_selector_term,
)

API_VERSION = "scheduling.koordinator.sh/v1alpha1"
KIND = "Reservation"

# --- annotations and labels (spec 2.1, 2.2, 2.5) ----------------------------------------------

ANNOTATION_RESERVE_POD = "scheduling.koordinator.sh/reserve-pod"
ANNOTATION_RESERVATION_NAME = "scheduling.koordinator.sh/reservation-name"
ANNOTATION_RESERVATION_NODE = "scheduling.koordinator.sh/reservation-node"
ANNOTATION_RESERVATION_ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
ANNOTATION_RESERVATION_AFFINITY = "scheduling.koordinator.sh/reservation-affinity"
ANNOTATION_EXACT_MATCH_RESERVATION = "scheduling.koordinator.sh/exact-match-reservation"
ANNOTATION_RESTRICTED_OPTIONS = "scheduling.koordinator.sh/reservation-restricted-options"
ANNOTATION_RESIZE_ALLOCATABLE = "scheduling.koordinator.sh/reservation-resize-allocatable"
LABEL_RESERVATION_IGNORED = "scheduling.koordinator.sh/reservation-ignored"
LABEL_RESERVATION_ORDER = "scheduling.koordinator.sh/reservation-order"
LABEL_KOORD_PRIORITY = "koordinator.sh/priority"
LABEL_OPERATING_MODE = "scheduling.koordinator.sh/operating-mode"

PHASE_PENDING = "Pending"
PHASE_AVAILABLE = "Available"
PHASE_SUCCEEDED = "Succeeded"
PHASE_WAITING = "Waiting"
PHASE_FAILED = "Failed"

POLICY_DEFAULT = ""
POLICY_ALIGNED = "Aligned"
POLICY_RESTRICTED = "Restricted"
ALLOCATE_POLICIES = (POLICY_DEFAULT, POLICY_ALIGNED, POLICY_RESTRICTED)

CONDITION_SCHEDULED = "Scheduled"
CONDITION_READY = "Ready"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_AVAILABLE = "Available"
REASON_SUCCEEDED = "Succeeded"
REASON_EXPIRED = "Expired"

#: The CRD's default ``spec.ttl`` (the API server applies it; the simulator does the same).
DEFAULT_TTL = "24h"
MAX_INT32 = 2**31 - 1


class _Base(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    pass


class ReservationControllerReference(_Base):
    """An OwnerReference plus the namespace the controller lives in."""

    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None
    namespace: str = ""


class ReservationOwner(_Base):
    object: ObjectReference | None = None
    controller: ReservationControllerReference | None = None
    label_selector: LabelSelector | None = None


class ReservationTemplateSpec(_Base):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)


class ReservationSpec(_Base):
    template: ReservationTemplateSpec | None = None
    owners: list[ReservationOwner] = []
    ttl: str | None = None
    expires: str | None = None
    pre_allocation: bool = False
    allocate_once: bool | None = None
    allocate_policy: str = ""
    unschedulable: bool = False
    taints: list[Taint] = []


class ReservationCondition(_Base):
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_probe_time: str | None = None
    last_transition_time: str | None = None


class ReservationStatus(_Base):
    phase: str = ""
    conditions: list[ReservationCondition] = []
    current_owners: list[ObjectReference] = []
    node_name: str = ""
    allocatable: ResourceList = {}
    allocated: ResourceList = {}


class Reservation(_Base):
    api_version: str = API_VERSION
    kind: str = KIND
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ReservationSpec = msgspec.field(default_factory=ReservationSpec)
    status: ReservationStatus = msgspec.field(default_factory=ReservationStatus)


# --- annotation payloads -----------------------------------------------------------------------


class ReservationAllocated(_Base):
    """The pod annotation ``reservation-allocated``: ``{"name": ..., "uid": ...}``."""

    name: str = ""
    uid: str = ""


class ReservationAffinityTerms(_Base):
    reservation_selector_terms: list[NodeSelectorTerm] = []


class ReservationAffinity(_Base):
    """The pod annotation ``reservation-affinity`` (spec 2.1)."""

    name: str = ""
    reservation_selector: dict[str, str] = {}
    required_during_scheduling_ignored_during_execution: ReservationAffinityTerms | None = None
    tolerations: list[Toleration] = []


class ExactMatchReservationSpec(_Base):
    resource_names: list[str] = []


class ReservationRestrictedOptions(_Base):
    resources: list[str] = []


class ReservationResizeAllocatable(_Base):
    resources: ResourceList = {}


def reservation_uid(r: Reservation) -> str:
    """The reservation's uid, or its name when the object has none (a hand-written manifest)."""
    return r.metadata.uid or r.metadata.name


def allocate_once(r: Reservation) -> bool:
    return r.spec.allocate_once is None or r.spec.allocate_once


def is_reserve_pod(pod: Pod) -> bool:
    return pod.metadata.annotations.get(ANNOTATION_RESERVE_POD) == "true"


def allocated_reservation(pod: Pod) -> ReservationAllocated | None:
    """The reservation a bound pod allocated from (its ``reservation-allocated``), or None.

    An unreadable value reads as None: the pod then counts in full on its node, never less.
    """
    raw = pod.metadata.annotations.get(ANNOTATION_RESERVATION_ALLOCATED)
    if not raw:
        return None
    try:
        out: ReservationAllocated = decode_annotation(raw, ReservationAllocated)
    except (ValueError, msgspec.DecodeError):
        return None
    return out if out.uid or out.name else None


def encode_allocated(r: Reservation) -> str:
    return msgspec.json.encode(ReservationAllocated(name=r.metadata.name, uid=r.metadata.uid)).decode()


# --- checks (once per object version) ----------------------------------------------------------


def reservation_errors(r: Reservation) -> list[str]:
    """What is wrong with a Reservation, one message per field (empty when usable)."""
    errors: list[str] = []
    spec = r.spec
    if spec.template is None:
        errors.append(required("spec.template", "the reservation misses the template spec"))
    else:
        probe = Pod(metadata=spec.template.metadata, spec=spec.template.spec)
        try:
            checked_pod_requests(probe)
        except QuantityError as err:
            errors.append(invalid("spec.template.spec.containers", "", str(err)))
    if not spec.owners:
        errors.append(required("spec.owners", "the reservation misses the owner spec"))
    for i, owner in enumerate(spec.owners):
        if owner.object is None and owner.controller is None and owner.label_selector is None:
            errors.append(required(f"spec.owners[{i}]", "an owner needs object, controller or labelSelector"))
        try:
            validate_label_selector(owner.label_selector)
        except SelectorError as err:
            errors.append(invalid(f"spec.owners[{i}].labelSelector", "", str(err)))
    if spec.ttl is not None:
        try:
            if parse_duration(spec.ttl) < 0:
                errors.append(invalid("spec.ttl", spec.ttl, "must not be negative"))
        except DurationError as err:
            errors.append(invalid("spec.ttl", spec.ttl, str(err)))
    if spec.expires is not None:
        try:
            parse_time(spec.expires)
        except ValueError as err:
            errors.append(invalid("spec.expires", spec.expires, str(err)))
    if spec.pre_allocation:
        errors.append(invalid("spec.preAllocation", True, "pre-allocation is not implemented by koordsched"))
    if spec.allocate_policy not in ALLOCATE_POLICIES:
        errors.append(not_supported("spec.allocatePolicy", spec.allocate_policy, ALLOCATE_POLICIES[1:]))
    for field_name, rl in (
        ("status.allocatable", r.status.allocatable),
        ("status.allocated", r.status.allocated),
    ):
        try:
            resource_list(rl)
        except QuantityError as err:
            errors.append(invalid(field_name, "", str(err)))
    return errors


def check_reservation(r: Reservation) -> None:
    """Raises :class:`Refused` naming the reservation and every bad field."""
    errors = reservation_errors(r)
    if errors:
        raise Refused(f"Reservation {r.metadata.name}: " + "; ".join(errors))


def expiry_time(r: Reservation, created: float | None = None) -> float | None:
    """Unix seconds at which the reservation expires (``expires`` first, else creation + ttl), or None.

    ``created`` stands for a missing ``creationTimestamp`` (the simulator's start: a manifest
    written by hand has none, the API server would set it on create)."""
    if r.spec.expires:
        try:
            return parse_time(r.spec.expires)
        except ValueError:
            return None
    ttl = r.spec.ttl if r.spec.ttl is not None else DEFAULT_TTL
    try:
        seconds = parse_duration(ttl)
    except DurationError:
        return None
    if seconds <= 0:
        return None
    if not r.metadata.creation_timestamp:
        return None if created is None else created + seconds
    try:
        return parse_time(r.metadata.creation_timestamp) + seconds
    except ValueError:
        return None


def is_active(r: Reservation) -> bool:
    """Pending or Available (not Succeeded, Failed or being deleted)."""
    return r.status.phase in ("", PHASE_PENDING, PHASE_AVAILABLE) and not r.metadata.deletion_timestamp


def is_available(r: Reservation) -> bool:
    return (
        r.status.phase == PHASE_AVAILABLE and bool(r.status.node_name) and not r.metadata.deletion_timestamp
    )


# --- the reserve pod (spec 4.3 "Reservation as a pod") -----------------------------------------


def _priority(r: Reservation, template: ReservationTemplateSpec) -> int:
    if template.spec.priority is not None:
        return template.spec.priority
    raw = r.metadata.labels.get(LABEL_KOORD_PRIORITY) or template.metadata.labels.get(LABEL_KOORD_PRIORITY)
    if raw:
        try:
            value = int(raw)
        except ValueError:
            value = None
        if value is not None and -(2**31) <= value <= MAX_INT32:
            return value
    return MAX_INT32


def template_requests(r: Reservation) -> dict[str, int]:
    """The template's pod requests (raises QuantityError when unreadable)."""
    template = r.spec.template or ReservationTemplateSpec()
    return checked_pod_requests(Pod(metadata=template.metadata, spec=template.spec))


def allocatable_of(r: Reservation) -> dict[str, int]:
    """What the reservation holds: ``status.allocatable`` once Available, else the template requests,
    overridden by the resize annotation."""
    if r.status.allocatable:
        return resource_list(r.status.allocatable)
    out = template_requests(r)
    raw = r.metadata.annotations.get(ANNOTATION_RESIZE_ALLOCATABLE)
    if raw:
        resize: ReservationResizeAllocatable = decode_annotation(raw, ReservationResizeAllocatable)
        out.update(resource_list(resize.resources))
    return out


def reserve_pod(r: Reservation) -> Pod | None:
    """The reserve pod standing for ``r``: pending while the reservation is, bound to
    ``status.nodeName`` (holding ``status.allocatable``) once Available, None once it is over.

    Name and uid are the reservation's uid; labels and annotations are the template's
    overridden by the reservation's own; a template ``nodeName`` becomes the
    ``reservation-node`` annotation.
    """
    if not is_active(r):
        return None
    template = r.spec.template or ReservationTemplateSpec()
    uid = reservation_uid(r)
    annotations = {
        **template.metadata.annotations,
        **r.metadata.annotations,
        ANNOTATION_RESERVE_POD: "true",
        ANNOTATION_RESERVATION_NAME: r.metadata.name,
    }
    if template.spec.node_name:
        annotations[ANNOTATION_RESERVATION_NODE] = template.spec.node_name
    meta = ObjectMeta(
        name=uid,
        namespace=template.metadata.namespace or "default",
        uid=uid,
        resource_version=r.metadata.resource_version,
        creation_timestamp=r.metadata.creation_timestamp,
        labels={**template.metadata.labels, **r.metadata.labels},
        annotations=annotations,
    )
    spec = msgspec.structs.replace(
        template.spec, node_name="", priority=_priority(r, template), priority_class_name=""
    )
    if is_available(r):
        spec = msgspec.structs.replace(spec, node_name=r.status.node_name)
        if r.status.allocatable:
            # What it holds is what the status says, whatever the template asked.
            held = Container(
                name="reserve", resources=ResourceRequirements(requests=dict(r.status.allocatable))
            )
            spec = msgspec.structs.replace(spec, containers=[held], init_containers=[], overhead={})
    return Pod(metadata=meta, spec=spec, status=PodStatus(phase=""))


# --- owners (spec 4.3 "Owner matching") --------------------------------------------------------


def _object_matches(ref: ObjectReference, pod: Pod) -> bool:
    m = pod.metadata
    return (
        (not ref.uid or ref.uid == m.uid)
        and (not ref.name or ref.name == m.name)
        and (not ref.namespace or ref.namespace == m.namespace)
        and (not ref.api_version or ref.api_version == pod.api_version)
    )


def _controller_matches(ref: ReservationControllerReference, pod: Pod) -> bool:
    if ref.namespace and ref.namespace != pod.metadata.namespace:
        return False
    for o in pod.metadata.owner_references:
        if (
            (not ref.uid or ref.uid == o.uid)
            and (not ref.name or ref.name == o.name)
            and (not ref.kind or ref.kind == o.kind)
            and (not ref.api_version or ref.api_version == o.api_version)
            and (ref.controller is None or bool(ref.controller) == bool(o.controller))
        ):
            return True
    return False


def owner_matches(owner: ReservationOwner, pod: Pod) -> bool:
    """Every non-nil part of the owner matches (they are ANDed)."""
    if owner.object is not None and not _object_matches(owner.object, pod):
        return False
    if owner.controller is not None and not _controller_matches(owner.controller, pod):
        return False
    return owner.label_selector is None or match_label_selector(owner.label_selector, pod.metadata.labels)


def validate_affinity(aff: ReservationAffinity) -> None:
    terms = aff.required_during_scheduling_ignored_during_execution
    if terms is not None:
        for i, term in enumerate(terms.reservation_selector_terms):
            validate_node_selector_term(term, i)


def exact_match(pod_requests: Mapping[str, int], allocatable: Mapping[str, int], names: list[str]) -> bool:
    """``exact-match-reservation``: each listed resource's request equals the reservation's allocatable.

    [QUIRK 8, kept] a name absent from both answers "match" at once, skipping the names after it.
    """
    for name in names:
        a, b = pod_requests.get(name), allocatable.get(name)
        if a is None and b is None:
            return True
        if (a or 0) != (b or 0):
            return False
    return True


def ttl_seconds(r: Reservation) -> float:
    try:
        return parse_duration(r.spec.ttl if r.spec.ttl is not None else DEFAULT_TTL)
    except DurationError:
        return math.inf


__all__ = [
    "ANNOTATION_RESERVATION_ALLOCATED",
    "Refused",
    "Reservation",
    "check_reservation",
    "reserve_pod",
]


# --- status transitions (the Bind and the controller of spec 3.2; both backends write these) ----


def _rfc3339(wall: float) -> str:
    return datetime.fromtimestamp(int(wall), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _with_condition(
    conditions: list[ReservationCondition], new: ReservationCondition
) -> list[ReservationCondition]:
    out = []
    replaced = False
    for c in conditions:
        if c.type == new.type:
            if c.status == new.status and c.last_transition_time:
                new = msgspec.structs.replace(new, last_transition_time=c.last_transition_time)
            out.append(new)
            replaced = True
        else:
            out.append(c)
    if not replaced:
        out.append(new)
    return out


def _cond(type_: str, status: str, reason: str, message: str, wall: float) -> ReservationCondition:
    t = _rfc3339(wall)
    return ReservationCondition(
        type=type_, status=status, reason=reason, message=message, last_probe_time=t, last_transition_time=t
    )


def bound(r: Reservation, node_name: str, annotations: Mapping[str, str], wall: float) -> Reservation:
    """``SetReservationAvailable``: phase Available on ``node_name``, allocatable = the template requests
    (overridden by the resize annotation), conditions Scheduled/True and Ready/True; what PreBind
    plugins wrote (device-allocated, resource-status) lands in the Reservation's annotations."""
    try:
        alloc = allocatable_of(msgspec.structs.replace(r, status=ReservationStatus()))
    except (QuantityError, ValueError, msgspec.DecodeError):
        alloc = {}
    written = _written_quantities(alloc)
    conditions = _with_condition(
        r.status.conditions, _cond(CONDITION_SCHEDULED, "True", REASON_SCHEDULED, "", wall)
    )
    conditions = _with_condition(conditions, _cond(CONDITION_READY, "True", REASON_AVAILABLE, "", wall))
    status = msgspec.structs.replace(
        r.status, phase=PHASE_AVAILABLE, node_name=node_name, allocatable=written, conditions=conditions
    )
    meta = msgspec.structs.replace(r.metadata, annotations={**r.metadata.annotations, **annotations})
    return msgspec.structs.replace(r, metadata=meta, status=status)


def _written_quantities(amounts: Mapping[str, int]) -> ResourceList:
    """Amounts as API quantities (cpu in millicores when fractional)."""
    out: ResourceList = {}
    for name, amount in sorted(amounts.items()):
        if name == "cpu":
            out[name] = format_milli_cpu(amount)
        else:
            out[name] = str(amount)
    return out


def unschedulable(r: Reservation, message: str, wall: float) -> Reservation:
    """A failed attempt: condition Scheduled=False, reason Unschedulable; the phase is unchanged."""
    cond = _cond(CONDITION_SCHEDULED, "False", REASON_UNSCHEDULABLE, message, wall)
    status = msgspec.structs.replace(r.status, conditions=_with_condition(r.status.conditions, cond))
    if not status.phase:
        status = msgspec.structs.replace(status, phase=PHASE_PENDING)
    return msgspec.structs.replace(r, status=status)


def with_owners(r: Reservation, owners: list[Pod], allocated: Mapping[str, int], wall: float) -> Reservation:
    """The controller's sync: currentOwners and allocated (masked to allocatable's names) from the pods
    allocated from ``r``; with allocateOnce, any owner ends it (phase Succeeded, Ready False/Succeeded)."""
    refs = [
        ObjectReference(namespace=p.metadata.namespace, name=p.metadata.name, uid=p.metadata.uid)
        for p in sorted(owners, key=lambda p: p.key)
    ]
    names = set(r.status.allocatable)
    masked = {k: v for k, v in allocated.items() if k in names}
    status = msgspec.structs.replace(
        r.status, current_owners=refs, allocated=_written_quantities(masked) if masked else {}
    )
    if refs and allocate_once(r) and status.phase == PHASE_AVAILABLE:
        cond = _cond(CONDITION_READY, "False", REASON_SUCCEEDED, "", wall)
        status = msgspec.structs.replace(
            status, phase=PHASE_SUCCEEDED, conditions=_with_condition(status.conditions, cond)
        )
    return msgspec.structs.replace(r, status=status)


def expired(
    r: Reservation, wall: float, node_exists: bool = True, created: float | None = None
) -> Reservation | None:
    """The reservation failed (expired, or its node is gone), or None while it stands."""
    if not is_active(r):
        return None
    at = expiry_time(r, created)
    gone = r.status.phase == PHASE_AVAILABLE and not node_exists
    if not gone and (at is None or wall < at):
        return None
    cond = _cond(CONDITION_READY, "False", REASON_EXPIRED, "", wall)
    status = msgspec.structs.replace(
        r.status, phase=PHASE_FAILED, conditions=_with_condition(r.status.conditions, cond)
    )
    return msgspec.structs.replace(r, status=status)
