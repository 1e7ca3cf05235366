"""The ``scoringStrategy`` shape Koordinator's DeviceShare and NodeNUMAResource args share."""

from __future__ import annotations

from typing import Final

import msgspec

#: ``scoringStrategy.type`` values both plugins accept.
LEAST_ALLOCATED: Final = "LeastAllocated"
MOST_ALLOCATED: Final = "MostAllocated"


class _Part(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    pass


class ResourceSpec(_Part):
    name: str
    #: Not defaulted: 0 fails the plugins' validation, as in Koordinator.
    weight: int = 0


class ScoringStrategy(_Part):
    type: str = ""
    resources: list[ResourceSpec] = []
