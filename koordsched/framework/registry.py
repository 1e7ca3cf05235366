"""Plugin registry: name -> factory, typed args and the extension points the plugin implements."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from koordsched.config.catalog import PluginArgs
from koordsched.framework.interface import Handle, implemented_points

PluginFactory = Callable[[Any, Handle], Any]


@dataclass(frozen=True)
class PluginSpec:
    name: str
    factory: PluginFactory
    #: The ``<Name>Args`` Struct, or None when the plugin takes no args.
    args_type: type[PluginArgs] | None = None
    points: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, plugin_cls: type, args_type: type[PluginArgs] | None = None) -> PluginSpec:
        """Spec for a plugin class whose constructor is ``(args, handle)`` and that has a ``name``."""
        name = getattr(plugin_cls, "name", None)
        if not isinstance(name, str):
            raise TypeError(f"{plugin_cls.__name__}.name must be a str")
        return cls(name=name, factory=plugin_cls, args_type=args_type, points=implemented_points(plugin_cls))

    def default_args(self) -> PluginArgs | None:
        return None if self.args_type is None else self.args_type()


class Registry:
    def __init__(self, specs: list[PluginSpec] | None = None) -> None:
        self._specs: dict[str, PluginSpec] = {}
        for spec in specs or []:
            self.register(spec)

    def register(self, spec: PluginSpec) -> None:
        if spec.name in self._specs:
            raise ValueError(f"plugin {spec.name!r} is already registered")
        self._specs[spec.name] = spec

    def merge(self, other: Registry) -> Registry:
        out = Registry(list(self._specs.values()))
        for spec in other:
            out.register(spec)
        return out

    def get(self, name: str) -> PluginSpec | None:
        return self._specs.get(name)

    def __getitem__(self, name: str) -> PluginSpec:
        return self._specs[name]

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[PluginSpec]:
        return iter(self._specs.values())

    def names(self) -> list[str]:
        return sorted(self._specs)
