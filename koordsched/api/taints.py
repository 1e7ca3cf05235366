"""Taint and toleration matching, as ``v1.Toleration.ToleratesTaint`` and the TaintToleration plugin."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Final

from koordsched.api.core import Taint, Toleration

__all__ = [
    "NO_EXECUTE",
    "NO_SCHEDULE",
    "OP_EQUAL",
    "OP_EXISTS",
    "PREFER_NO_SCHEDULE",
    "UNSCHEDULABLE_TAINT",
    "UNSCHEDULABLE_TAINT_KEY",
    "count_intolerable_prefer_no_schedule",
    "find_untolerated_taint",
    "toleration_tolerates_taint",
    "tolerations_tolerate_taint",
]

NO_SCHEDULE: Final = "NoSchedule"
PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"
NO_EXECUTE: Final = "NoExecute"

OP_EQUAL: Final = "Equal"
OP_EXISTS: Final = "Exists"

UNSCHEDULABLE_TAINT_KEY: Final = "node.kubernetes.io/unschedulable"
#: The taint the scheduler treats ``spec.unschedulable: true`` as (NodeUnschedulable plugin).
UNSCHEDULABLE_TAINT: Final = Taint(key=UNSCHEDULABLE_TAINT_KEY, effect=NO_SCHEDULE)


def toleration_tolerates_taint(t: Toleration, taint: Taint) -> bool:
    """Upstream ``ToleratesTaint``: an empty effect or key is a wildcard, operator "" means Equal.

    Equal compares values, Exists ignores them, and an unknown operator tolerates nothing.
    """
    if t.effect and t.effect != taint.effect:
        return False
    if t.key and t.key != taint.key:
        return False
    op = t.operator
    if op == OP_EXISTS:
        return True
    if op in ("", OP_EQUAL):
        return t.value == taint.value
    return False


def tolerations_tolerate_taint(tolerations: Sequence[Toleration], taint: Taint) -> bool:
    """Any of the tolerations tolerates the taint."""
    return any(toleration_tolerates_taint(t, taint) for t in tolerations)


def find_untolerated_taint(
    taints: Sequence[Taint], tolerations: Sequence[Toleration], effects: Collection[str]
) -> Taint | None:
    """The first taint with an effect in ``effects`` that no toleration tolerates, else None."""
    for taint in taints:
        if taint.effect in effects and not tolerations_tolerate_taint(tolerations, taint):
            return taint
    return None


def count_intolerable_prefer_no_schedule(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    """PreferNoSchedule taints left untolerated, the TaintToleration score's raw count.

    Only tolerations whose effect is empty or PreferNoSchedule are considered, as upstream.
    """
    relevant = [t for t in tolerations if not t.effect or t.effect == PREFER_NO_SCHEDULE]
    return sum(
        1
        for taint in taints
        if taint.effect == PREFER_NO_SCHEDULE and not tolerations_tolerate_taint(relevant, taint)
    )
