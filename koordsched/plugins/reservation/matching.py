"""Which reservations a pod may allocate from, node by node (Koordinator's BeforePreFilter, spec 4.3).

Owners are ORed, the parts of one owner ANDed. A pod naming a reservation in its
``reservation-affinity`` skips the selector, taint and unschedulable checks; otherwise they
run in Koordinator's order, each miss counted for PostFilter's reasons.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from koordsched.api.annotations import decode_annotation
from koordsched.api.core import Pod
from koordsched.api.reservation import (
    ANNOTATION_EXACT_MATCH_RESERVATION,
    ANNOTATION_RESERVATION_AFFINITY,
    ExactMatchReservationSpec,
    ReservationAffinity,
    exact_match,
    owner_matches,
    validate_affinity,
)
from koordsched.api.selectors import SelectorError, match_label_selector, match_node_selector_term
from koordsched.api.taints import tolerations_tolerate_taint
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.types import PodInfo
from koordsched.plugins.reservation.index import ReservationInfo

_HARD_EFFECTS = ("NoSchedule", "NoExecute")


class PodSpecError(ValueError):
    """A reservation annotation on the pod cannot be read; the message names it."""


@dataclass(slots=True)
class PodReservationSpec:
    """The pod's reservation annotations, parsed once per PodInfo."""

    has_affinity: bool
    affinity: ReservationAffinity | None
    exact_names: list[str] | None


_NO_RESERVATION_SPEC = PodReservationSpec(False, None, None)


def pod_spec(pod: PodInfo) -> PodReservationSpec:
    cached = pod.extra.get("Reservation/spec")
    if isinstance(cached, PodReservationSpec):
        return cached
    ann = pod.pod.metadata.annotations
    if ANNOTATION_RESERVATION_AFFINITY not in ann and not ann.get(ANNOTATION_EXACT_MATCH_RESERVATION):
        # Most pods name no reservation: one shared answer, nothing kept per pod.
        return _NO_RESERVATION_SPEC
    raw = ann.get(ANNOTATION_RESERVATION_AFFINITY)
    affinity: ReservationAffinity | None = None
    if raw:
        try:
            affinity = decode_annotation(raw, ReservationAffinity)
            assert affinity is not None
            validate_affinity(affinity)
        except (ValueError, msgspec.DecodeError, SelectorError) as err:
            raise PodSpecError(
                f"invalid reservation affinity annotation {ANNOTATION_RESERVATION_AFFINITY}, err: {err}"
            ) from None
    exact: list[str] | None = None
    raw = ann.get(ANNOTATION_EXACT_MATCH_RESERVATION)
    if raw:
        try:
            spec: ExactMatchReservationSpec = decode_annotation(raw, ExactMatchReservationSpec)
        except (ValueError, msgspec.DecodeError) as err:
            raise PodSpecError(
                f"invalid exact-match reservation annotation {ANNOTATION_EXACT_MATCH_RESERVATION}, err: {err}"
            ) from None
        exact = spec.resource_names
    out = PodReservationSpec(ANNOTATION_RESERVATION_AFFINITY in ann, affinity, exact)
    pod.extra["Reservation/spec"] = out
    return out


@dataclass(slots=True)
class MatchDiagnosis:
    """Koordinator's per-reservation counters, turned into PostFilter's reasons."""

    owner_matched: int = 0
    name_matched: int = 0
    name_unmatched: int = 0
    unschedulable_unmatched: int = 0
    affinity_unmatched: int = 0
    not_exact_matched: int = 0
    taints_unmatched: dict[str, int] = field(default_factory=dict)

    def reasons(self) -> list[str]:
        out = []
        if self.name_matched:
            out.append(f"{self.name_matched} Reservation(s) exactly matches the requested reservation name")
        if self.name_unmatched:
            out.append(f"{self.name_unmatched} Reservation(s) didn't match the requested reservation name")
        if self.affinity_unmatched:
            out.append(f"{self.affinity_unmatched} Reservation(s) didn't match affinity rules")
        if self.unschedulable_unmatched:
            out.append(f"{self.unschedulable_unmatched} Reservation(s) is unschedulable")
        if self.not_exact_matched:
            out.append(f"{self.not_exact_matched} Reservation(s) is not exact matched")
        for key, n in sorted(self.taints_unmatched.items()):
            out.append(f"{n} Reservation(s) had untolerated taint {key}")
        if self.owner_matched:
            out.append(f"{self.owner_matched} Reservation(s) matched owner total")
        return out


def _affinity_matches(aff: ReservationAffinity, r: ReservationInfo, node: NodeInfo) -> bool:
    labels = {**node.labels, **r.labels}
    for k, v in aff.reservation_selector.items():
        if labels.get(k) != v:
            return False
    terms = aff.required_during_scheduling_ignored_during_execution
    if terms is not None and terms.reservation_selector_terms:
        return any(match_node_selector_term(t, labels, node.name) for t in terms.reservation_selector_terms)
    return True


def _untolerated(aff: ReservationAffinity | None, r: ReservationInfo) -> str | None:
    tolerations = aff.tolerations if aff is not None else []
    for taint in r.taints:
        if taint.effect in _HARD_EFFECTS and not tolerations_tolerate_taint(tolerations, taint):
            return f"{{{taint.key}: {taint.value}}}"
    return None


def matches_reservation(
    pod: Pod,
    requests: dict[str, int],
    spec: PodReservationSpec,
    r: ReservationInfo,
    node: NodeInfo,
    diag: MatchDiagnosis,
) -> bool:
    """Whether ``pod`` (an owner or not) may allocate from ``r`` on ``node``; counts the misses."""
    if r.problem or not any(owner_matches(o, pod) for o in r.owners):
        return False
    diag.owner_matched += 1
    aff = spec.affinity
    exact_ok = spec.exact_names is None or exact_match(requests, r.allocatable, spec.exact_names)
    if aff is not None and aff.name:
        if aff.name != r.name:
            diag.name_unmatched += 1
            return False
        diag.name_matched += 1
        if not exact_ok:
            diag.not_exact_matched += 1
        return exact_ok
    if r.unschedulable:
        diag.unschedulable_unmatched += 1
        return False
    taint = _untolerated(aff, r)
    if taint is not None:
        diag.taints_unmatched[taint] = diag.taints_unmatched.get(taint, 0) + 1
        return False
    if aff is not None and not _affinity_matches(aff, r, node):
        diag.affinity_unmatched += 1
        return False
    if not exact_ok:
        diag.not_exact_matched += 1
        return False
    return True


__all__ = ["MatchDiagnosis", "PodReservationSpec", "PodSpecError", "match_label_selector", "pod_spec"]
