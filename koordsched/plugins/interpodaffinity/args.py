"""InterPodAffinityArgs (kubescheduler.config.k8s.io/v1): defaults and validation as upstream."""

from __future__ import annotations

from koordsched.config.catalog import PluginArgs
from koordsched.plugins.helper import invalid, raise_field_errors

MIN_HARD_POD_AFFINITY_WEIGHT = 0
MAX_HARD_POD_AFFINITY_WEIGHT = 100


class InterPodAffinityArgs(PluginArgs):
    #: The score weight of a placed pod's *required* affinity term that the incoming pod
    #: matches (the symmetric half of required affinity); 0 turns it off.
    hard_pod_affinity_weight: int = 1
    #: Skip scoring a pod that has no preferred terms of its own, instead of scoring it by
    #: the placed pods' terms (a pod that has some is still scored by both).
    ignore_preferred_terms_of_existing_pods: bool = False

    def validate(self) -> None:
        """``ValidateInterPodAffinityArgs``: the weight must be within [0-100]."""
        w = self.hard_pod_affinity_weight
        errors = []
        if not MIN_HARD_POD_AFFINITY_WEIGHT <= w <= MAX_HARD_POD_AFFINITY_WEIGHT:
            detail = f"not in valid range [{MIN_HARD_POD_AFFINITY_WEIGHT}-{MAX_HARD_POD_AFFINITY_WEIGHT}]"
            errors.append(invalid("hardPodAffinityWeight", w, detail))
        raise_field_errors(errors)
