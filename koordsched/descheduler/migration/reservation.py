"""The Reservation a ReservationFirst job creates for its pod's replacement (Koordinator's
CreateOrUpdateReservationOptions, spec 8 "PMJ reconcile"), as the wire object to POST.

The template is the pod (its labels and spec) without its ``nodeName``; the owner is the
pod's controller (so the replacement its controller creates allocates it); it is allocated once;
its TTL is the job's. Its required node affinity gains ``metadata.name NotIn [source node]`` in
every term, as Koordinator's, so the reservation never lands back on the node it leaves.
"""

from __future__ import annotations

import copy
from typing import Any, Final

import msgspec

from koordsched.api.core import Pod
from koordsched.api.reservation import (
    CONDITION_READY,
    CONDITION_SCHEDULED,
    PHASE_FAILED,
    REASON_EXPIRED,
    REASON_UNSCHEDULABLE,
    Reservation,
)
from koordsched.descheduler.migration import job as pmj
from koordsched.descheduler.migration.controller import ReservationState

#: Marks the Reservations the migration controller made (the job's name as the value).
LABEL_MIGRATION_JOB: Final = "koordinator.sh/migration-job"
#: Used when the job has no TTL.
DEFAULT_TTL: Final = "5m"
_REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"


def skip_node_affinity(affinity: dict[str, Any] | None, node: str) -> dict[str, Any] | None:
    """``affinity`` (wire form, not modified) with ``node`` excluded by name from every required
    term (one term of just that when there is none); unchanged when ``node`` is ""."""
    if not node:
        return affinity
    out = copy.deepcopy(affinity) if affinity else {}
    node_affinity = out.get("nodeAffinity") or {}
    required = node_affinity.get(_REQUIRED) or {}
    terms = required.get("nodeSelectorTerms") or []
    skip = {"key": "metadata.name", "operator": "NotIn", "values": [node]}
    for term in terms:
        term["matchFields"] = [*(term.get("matchFields") or []), skip]
    if not terms:
        terms = [{"matchFields": [skip]}]
    required["nodeSelectorTerms"] = terms
    node_affinity[_REQUIRED] = required
    out["nodeAffinity"] = node_affinity
    return out


def restrict_affinity(affinity: dict[str, Any] | None, planned: dict[str, Any]) -> dict[str, Any]:
    """``affinity`` (wire form, not modified) with its required node terms ANDed with the
    ``planned`` affinity's (a plugin's destination nodes): terms are ORed, so every pair is
    one term. The pod's other constraints stay: its replacement is held to them too."""
    out = copy.deepcopy(affinity) if affinity else {}
    plan_terms = ((planned.get("nodeAffinity") or {}).get(_REQUIRED) or {}).get("nodeSelectorTerms") or []
    node_affinity = out.get("nodeAffinity") or {}
    required = node_affinity.get(_REQUIRED) or {}
    own_terms = required.get("nodeSelectorTerms") or [{}]
    required["nodeSelectorTerms"] = [
        {
            **own,
            **(
                {"matchExpressions": [*own.get("matchExpressions", []), *plan.get("matchExpressions", [])]}
                if own.get("matchExpressions") or plan.get("matchExpressions")
                else {}
            ),
            **(
                {"matchFields": [*own.get("matchFields", []), *plan.get("matchFields", [])]}
                if own.get("matchFields") or plan.get("matchFields")
                else {}
            ),
        }
        for own in own_terms
        for plan in plan_terms
    ] or own_terms
    node_affinity[_REQUIRED] = required
    out["nodeAffinity"] = node_affinity
    return out


def reservation_owners(pod: Pod) -> list[dict[str, Any]]:
    """The pod's controller (its whole OwnerReference plus the namespace); a pod without one is
    its own owner by name, so that at most a pod recreated under that name takes it."""
    ns = pod.metadata.namespace
    owner = next((r for r in pod.metadata.owner_references if r.controller), None)
    if owner is None:
        return [{"object": {"kind": "Pod", "namespace": ns, "name": pod.metadata.name}}]
    ref = {k: v for k, v in msgspec.to_builtins(owner).items() if v is not None}
    return [{"controller": {**ref, "namespace": ns}}]


def reservation_body(
    pod: Pod, job: pmj.PodMigrationJob, template_affinity: dict[str, Any] | None
) -> dict[str, Any]:
    """The Reservation to create for ``job`` (named after it). ``template_affinity``: the job
    template's pod affinity (a plugin's planned nodes), ANDed with the pod's own."""
    spec = msgspec.to_builtins(pod.spec)
    spec.pop("nodeName", None)
    affinity = spec.get("affinity")
    if template_affinity is not None:
        affinity = restrict_affinity(affinity, template_affinity)
    spec["affinity"] = skip_node_affinity(affinity, pod.spec.node_name)
    meta = pod.metadata
    # Labels only: the pod's annotations hold what it was allocated (devices, cpus), which
    # the reserve pod must not appear to hold.
    template_meta: dict[str, Any] = {"namespace": meta.namespace, "labels": dict(meta.labels)}
    return {
        "apiVersion": pmj.API_VERSION,
        "kind": "Reservation",
        "metadata": {"name": job.metadata.name, "labels": {LABEL_MIGRATION_JOB: job.metadata.name}},
        "spec": {
            "template": {"metadata": template_meta, "spec": spec},
            "owners": reservation_owners(pod),
            "ttl": job.spec.ttl or DEFAULT_TTL,
            "allocateOnce": True,
        },
    }


def reservation_state(r: Reservation) -> ReservationState:
    """What reconcile reads of a Reservation (both backends): phase, node, whether it expired
    (Failed, condition Ready with reason Expired) and the scheduler's unschedulable message."""
    conds = {c.type: c for c in r.status.conditions}
    ready, scheduled = conds.get(CONDITION_READY), conds.get(CONDITION_SCHEDULED)
    expired = r.status.phase == PHASE_FAILED and ready is not None and ready.reason == REASON_EXPIRED
    message = scheduled.message if scheduled is not None and scheduled.reason == REASON_UNSCHEDULABLE else ""
    return ReservationState(r.status.phase, r.status.node_name, expired=expired, message=message)
