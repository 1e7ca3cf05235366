"""ReservationArgs (kubescheduler.config.k8s.io/v1): spec 4.3."""

from __future__ import annotations

from koordsched.config.catalog import PluginArgs
from koordsched.plugins.helper import invalid, raise_field_errors


class ReservationArgs(PluginArgs):
    #: Preempt in PostFilter before reporting why no reservation served (default false).
    enable_preemption: bool = False
    #: v1 leaves these unset (QUIRK 21); they only matter with preemption, where unset takes
    #: v1beta3's defaults (10 and 100).
    min_candidate_nodes_percentage: int | None = None
    min_candidate_nodes_absolute: int | None = None

    def validate(self) -> None:
        errors = []
        pct = self.min_candidate_nodes_percentage
        if pct is not None and not 0 <= pct <= 100:
            errors.append(invalid("minCandidateNodesPercentage", pct, "not in valid range [0, 100]"))
        absolute = self.min_candidate_nodes_absolute
        if absolute is not None and absolute < 0:
            errors.append(invalid("minCandidateNodesAbsolute", absolute, "not in valid range [0, inf)"))
        if self.enable_preemption and pct == 0 and absolute == 0:
            # DefaultPreemption's own rule, which Koordinator's preemption runs through.
            errors.append(
                invalid(
                    "minCandidateNodesPercentage",
                    pct,
                    "cannot be zero at the same time as minCandidateNodesAbsolute",
                )
            )
            errors.append(
                invalid(
                    "minCandidateNodesAbsolute",
                    absolute,
                    "cannot be zero at the same time as minCandidateNodesPercentage",
                )
            )
        raise_field_errors(errors)
