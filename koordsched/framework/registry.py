"""Plugin registry: name -> factory, typed args and the extension points the plugin implements."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordsched import kernels
from koordsched.api.kinds import ObjectKind
from koordsched.config.catalog import PluginArgs
from koordsched.framework.controllers import Controller, ControllerFactory
from koordsched.framework.interface import Handle, Plugin, WatchScopedPlugin, implemented_points

#: Builds a plugin from its args and the handle. The args are typed ``Any`` here because each
#: plugin takes its own ``<Name>Args`` type (or None); the config decoded them into exactly
#: ``PluginSpec.args_type`` before, so a factory always gets its own type.
PluginFactory = Callable[[Any, Handle], Plugin]


@dataclass(frozen=True)
class PluginSpec:
    name: str
    factory: PluginFactory
    #: The ``<Name>Args`` Struct, or None when the plugin takes no args.
    args_type: type[PluginArgs] | None = None
    points: frozenset[str] = field(default_factory=frozenset)
    #: The kinds of objects the plugin reads through ``Handle.objects`` (watched, or loaded by the simulator).
    kinds: tuple[ObjectKind[Any], ...] = ()
    #: Runs the plugin's own numba kernels once, before the scheduler reports ready.
    warm_up: Callable[[], None] | None = None
    #: The plugin's controllers (see :mod:`koordsched.framework.controllers`), built by the backends.
    controllers: ControllerFactory | None = None

    @classmethod
    def of(
        cls,
        plugin_cls: type,
        args_type: type[PluginArgs] | None = None,
        *,
        kinds: tuple[ObjectKind[Any], ...] = (),
        warm_up: Callable[[], None] | None = None,
        controllers: ControllerFactory | None = None,
    ) -> PluginSpec:
        """Spec for a plugin class whose constructor is ``(args, handle)`` and that has a ``name``."""
        name = getattr(plugin_cls, "name", None)
        if not isinstance(name, str):
            raise TypeError(f"{plugin_cls.__name__}.name must be a str")
        points = implemented_points(plugin_cls)
        return cls(name, plugin_cls, args_type, points, kinds, warm_up, controllers)

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

    def object_kinds(self) -> dict[str, tuple[ObjectKind[Any], tuple[str, ...]]]:
        """Kind name -> (the kind, the plugins that read it), in registration order."""
        out: dict[str, tuple[ObjectKind[Any], tuple[str, ...]]] = {}
        for spec in self._specs.values():
            for k in spec.kinds:
                known = out.get(k.kind)
                if known is not None and known[0] != k:
                    raise ValueError(
                        f"plugins {known[1]} and {spec.name!r} declare kind {k.kind!r} differently"
                    )
                out[k.kind] = (k, (*known[1], spec.name) if known is not None else (spec.name,))
        return out

    def watch_scopes(self, profiles: Iterable[Mapping[str, object]]) -> dict[str, tuple[str, str]]:
        """Kind name -> the one (namespace, name) every reader of the kind reads, over the plugins
        of each profile by name; a kind some reader reads whole, or readers disagree on, is absent."""
        readers = {kind: names for kind, (_, names) in self.object_kinds().items()}
        scopes: dict[str, set[tuple[str, str] | None]] = {}
        for plugins in profiles:
            for kind, names in readers.items():
                for name in names:
                    plugin = plugins.get(name)
                    if plugin is None:
                        continue
                    scoped = plugin.watch_scopes() if isinstance(plugin, WatchScopedPlugin) else {}
                    scopes.setdefault(kind, set()).add(scoped.get(kind))
        return {
            kind: scope
            for kind, seen in scopes.items()
            if len(seen) == 1 and (scope := next(iter(seen))) is not None
        }

    def controllers(self, profiles: Iterable[Mapping[str, object]]) -> list[Controller]:
        """The controllers of every plugin some profile runs, in registry order; ``profiles`` are
        the plugins of each profile by name (``Framework.plugins``)."""
        plugin_maps = list(profiles)
        out: list[Controller] = []
        for spec in self._specs.values():
            if spec.controllers is None:
                continue
            instances = [plugins[spec.name] for plugins in plugin_maps if spec.name in plugins]
            if instances:
                out.extend(spec.controllers(instances))
        return out

    def warm_up(self) -> None:
        """Run the shared kernels and every plugin's own once, so no cycle pays a compile."""
        kernels.warm_up()
        for spec in self._specs.values():
            if spec.warm_up is not None:
                spec.warm_up()
