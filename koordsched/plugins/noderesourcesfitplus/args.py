"""NodeResourcesFitPlusArgs (Koordinator v1.6.1: ``kubescheduler.config.k8s.io/v1`` and ``v1beta3``).

Koordinator has no defaults and no validation for these args: a resource whose ``type`` is
neither MostAllocated nor LeastAllocated silently scores 0 there. ``validate`` refuses such a
type and a negative weight instead (a deliberate difference: a typo should not change
placements without a word), and a weight so large that the weighted sum could overflow.
"""

from __future__ import annotations

from typing import Final

import msgspec

from koordsched.config.catalog import PluginArgs
from koordsched.plugins.helper import invalid, raise_field_errors, unsupported

MOST_ALLOCATED: Final = "MostAllocated"
LEAST_ALLOCATED: Final = "LeastAllocated"
RESOURCE_TYPES: Final = (MOST_ALLOCATED, LEAST_ALLOCATED)

_INT64_MAX: Final = (1 << 63) - 1
_MAX_SCORE: Final = 100


class ResourceTypeWeight(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    #: Not defaulted: an absent type is refused by ``validate``.
    type: str = ""
    weight: int = 0


class NodeResourcesFitPlusArgs(PluginArgs):
    #: Resource name -> how it is scored. Only resources the pod requests are scored.
    resources: dict[str, ResourceTypeWeight] = {}

    def validate(self) -> None:
        errors: list[str] = []
        # Every configured weight may count at once; each resource scores at most 100.
        max_weight = _INT64_MAX // _MAX_SCORE // max(1, len(self.resources))
        for name, spec in self.resources.items():
            if spec.type not in RESOURCE_TYPES:
                errors.append(unsupported(f"resources[{name}].type", spec.type, RESOURCE_TYPES))
            if spec.weight < 0:
                errors.append(invalid(f"resources[{name}].weight", spec.weight, "must not be negative"))
            elif spec.weight > max_weight:
                errors.append(
                    invalid(
                        f"resources[{name}].weight",
                        spec.weight,
                        f"must be at most {max_weight}, or the weighted sum overflows",
                    )
                )
        raise_field_errors(errors)
