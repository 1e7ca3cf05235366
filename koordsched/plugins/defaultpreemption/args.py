"""DefaultPreemptionArgs (kubescheduler.config.k8s.io/v1): defaults and validation as upstream."""

from __future__ import annotations

from koordsched.config.catalog import PluginArgs
from koordsched.plugins.helper import invalid, raise_field_errors


class DefaultPreemptionArgs(PluginArgs):
    #: The least share of the nodes where preemption might help to dry-run, in percent.
    min_candidate_nodes_percentage: int = 10
    #: The least number of such nodes to dry-run.
    min_candidate_nodes_absolute: int = 100

    def validate(self) -> None:
        """``ValidateDefaultPreemptionArgs``."""
        raise_field_errors(
            candidate_count_errors(self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute)
        )


def candidate_count_errors(
    pct: int | None, absolute: int | None, both_zero_refused: bool = True
) -> list[str]:
    """Upstream's checks of the two candidate counts (``None``: unset, not checked); Reservation's
    args run the same ones when its preemption is enabled."""
    errors = []
    if pct is not None and not 0 <= pct <= 100:
        errors.append(invalid("minCandidateNodesPercentage", pct, "not in valid range [0, 100]"))
    if absolute is not None and absolute < 0:
        errors.append(invalid("minCandidateNodesAbsolute", absolute, "not in valid range [0, inf)"))
    if both_zero_refused and pct == 0 and absolute == 0:
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
    return errors


def num_candidates(args: DefaultPreemptionArgs, num_nodes: int) -> int:
    """``calculateNumCandidates``: how many candidate nodes the dry run looks for."""
    n = num_nodes * args.min_candidate_nodes_percentage // 100
    n = max(n, args.min_candidate_nodes_absolute)
    return min(n, num_nodes)
