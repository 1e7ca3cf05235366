"""The descheduler plugins a profile may name: their args kind and extension points.

The config loader sees plugins only through this table (:class:`PluginCatalog`), so the
config does not import the plugins; :mod:`koordsched.descheduler.registry` builds the
in-tree one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from koordsched.config.catalog import PluginArgs


@dataclass(frozen=True)
class DeschedulerPluginSpec:
    name: str
    #: ``<Name>Args``'s Struct; None when the plugin takes no args.
    args_type: type[PluginArgs] | None
    #: The extension points it implements: ``deschedule``, ``balance``, ``evict``, ``filter``.
    points: frozenset[str]


class PluginCatalog:
    def __init__(self, specs: Iterable[DeschedulerPluginSpec]) -> None:
        self._specs: dict[str, DeschedulerPluginSpec] = {s.name: s for s in specs}

    def get(self, name: str) -> DeschedulerPluginSpec | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return sorted(self._specs)

    @property
    def specs(self) -> Mapping[str, DeschedulerPluginSpec]:
        return self._specs
