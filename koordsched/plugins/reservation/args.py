"""ReservationArgs (kubescheduler.config.k8s.io/v1): spec 4.3."""

from __future__ import annotations

from koordsched.config.catalog import PluginArgs
from koordsched.plugins.defaultpreemption.args import candidate_count_errors
from koordsched.plugins.helper import raise_field_errors


class ReservationArgs(PluginArgs):
    #: Preempt in PostFilter before reporting why no reservation served (default false).
    enable_preemption: bool = False
    #: v1 leaves these unset (QUIRK 21); they only matter with preemption, where unset takes
    #: v1beta3's defaults (10 and 100).
    min_candidate_nodes_percentage: int | None = None
    min_candidate_nodes_absolute: int | None = None

    def validate(self) -> None:
        # DefaultPreemption's own checks, which Koordinator's preemption runs through; both
        # counts zero only matters when the preemption is on.
        raise_field_errors(
            candidate_count_errors(
                self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute, self.enable_preemption
            )
        )
