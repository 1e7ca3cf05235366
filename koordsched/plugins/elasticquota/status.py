"""What the scheduler writes back on each ElasticQuota, as Koordinator's quota status controller
does every second (``updateElasticQuotaStatusIfChanged``): ``status.used``, and the runtime,
request and non-preemptible-used annotations as JSON resource lists.

Koordinator writes more annotations (guaranteed, allocated, child-request,
non-preemptible-request) that only its own features fill; they are left alone here. A write is
due only when what the object shows differs, zero amounts aside (``quotav1.RemoveZeros``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import msgspec

from koordsched.api.annotations import decode_json
from koordsched.api.elastic_quota import (
    ANNOTATION_NON_PREEMPTIBLE_USED,
    ANNOTATION_REQUEST,
    ANNOTATION_RUNTIME,
    ElasticQuota,
)
from koordsched.api.quantity import QuantityError
from koordsched.api.resources import resource_list
from koordsched.plugins.elasticquota.messages import quantity
from koordsched.plugins.elasticquota.plugin import QuotaSummary


def quantities(amounts: Mapping[str, int]) -> dict[str, str]:
    """A ResourceList as Go marshals it: quantity strings, keys sorted."""
    return {r: quantity(r, amounts[r]) for r in sorted(amounts)}


def _nonzero(amounts: Mapping[str, int]) -> dict[str, int]:
    return {r: v for r, v in amounts.items() if v}


def _shown(raw: Mapping[str, object] | str | None) -> dict[str, int] | None:
    """What an object shows, in canonical integers without zeros; None when it cannot be read
    (then it is written, which replaces it with a readable value)."""
    if raw is None or raw == "":
        return {}
    try:
        rl = decode_json(raw, dict[str, str | int | float]) if isinstance(raw, str) else raw
        return _nonzero(resource_list(rl))  # type: ignore[arg-type]
    except (msgspec.DecodeError, QuantityError):
        return None


@dataclass(frozen=True)
class StatusUpdate:
    """The writes one quota needs; either part may be None (already shown)."""

    annotations: dict[str, str] | None
    used: dict[str, str] | None

    @property
    def empty(self) -> bool:
        return self.annotations is None and self.used is None


def status_update(eq: ElasticQuota, summary: QuotaSummary) -> StatusUpdate:
    """What to write on ``eq`` so that it shows ``summary``."""
    annotations: dict[str, str] = {}
    for key, amounts in (
        (ANNOTATION_RUNTIME, summary.runtime),
        (ANNOTATION_REQUEST, summary.request),
        (ANNOTATION_NON_PREEMPTIBLE_USED, summary.non_preemptible_used),
    ):
        if _shown(eq.metadata.annotations.get(key)) != _nonzero(amounts):
            annotations[key] = msgspec.json.encode(quantities(amounts)).decode()
    used = None
    if _shown(eq.status.used) != _nonzero(summary.used):
        used = quantities(summary.used)
    return StatusUpdate(annotations or None, used)


#: (name, resource, tree, is_parent, parent, field) and the amount, as Koordinator records them.
QuotaValue = tuple[tuple[str, str, str, str, str, str], int]


def quota_values(summaries: list[QuotaSummary]) -> tuple[list[QuotaValue], list[QuotaValue]]:
    """``scheduler_elastic_quota_spec`` and ``_status`` values (``syncElasticQuotaMetrics``): the
    spec's min, max and sharedWeight; the status' runtime, request, non-preemptible-used and used.
    Amounts are canonical (cpu in millicores), as Koordinator records ``MilliValue`` for cpu."""
    spec: list[QuotaValue] = []
    status: list[QuotaValue] = []
    for s in summaries:
        if s.refusal:
            continue
        base = (s.name, s.tree_id, "true" if s.is_parent else "false", s.parent)

        def add(
            into: list[QuotaValue], amounts: Mapping[str, int], field: str, base: tuple[str, ...] = base
        ) -> None:
            into.extend(((base[0], r, base[1], base[2], base[3], field), amounts[r]) for r in sorted(amounts))

        add(spec, s.min, "min")
        add(spec, s.max, "max")
        add(spec, s.shared_weight, "sharedWeight")
        add(status, s.runtime, "runtime")
        add(status, s.request, "request")
        add(status, s.non_preemptible_used, "non-preemptible-used")
        add(status, s.used, "used")
    return spec, status
