"""ReservationArgs (kubescheduler.config.k8s.io/v1): spec 4.3."""

from __future__ import annotations

from koordsched.config.catalog import PluginArgs
from koordsched.plugins.helper import invalid, raise_field_errors


class ReservationArgs(PluginArgs):
    #: Preempt for reservations in PostFilter (default false). Preemption with reservations is
    #: not built yet: true is refused at load rather than silently ignored.
    enable_preemption: bool = False
    #: v1 leaves these unset (QUIRK 21); they only matter with preemption.
    min_candidate_nodes_percentage: int | None = None
    min_candidate_nodes_absolute: int | None = None

    def validate(self) -> None:
        errors = []
        if self.enable_preemption:
            errors.append(
                invalid(
                    "enablePreemption", True, "preemption for reservations is not implemented by koordsched"
                )
            )
        pct = self.min_candidate_nodes_percentage
        if pct is not None and not 0 <= pct <= 100:
            errors.append(invalid("minCandidateNodesPercentage", pct, "not in valid range [0, 100]"))
        absolute = self.min_candidate_nodes_absolute
        if absolute is not None and absolute < 0:
            errors.append(invalid("minCandidateNodesAbsolute", absolute, "not in valid range [0, inf)"))
        raise_field_errors(errors)
