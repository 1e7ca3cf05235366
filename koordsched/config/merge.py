"""Which plugins run at each extension point: upstream's merge, then multiPoint expansion.

Two upstream steps, kept apart as they are there:

* ``mergePluginSet`` (config defaulting, per point including multiPoint): ``disabled``
  drops defaults ("*" drops them all); a custom ``enabled`` entry naming a default takes
  its place; other custom entries are appended.
* ``expandMultiPointPlugins`` (framework start): a multiPoint plugin joins each point it
  implements unless disabled there or listed there explicitly. An explicit listing wins
  and moves to the front: overrides, then multiPoint-only plugins, then the other
  explicit ones.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from koordsched.config.catalog import PluginCatalog
from koordsched.config.errors import ConfigError
from koordsched.config.names import (
    ALL,
    UPSTREAM_DEFAULT_MULTIPOINT,
    UPSTREAM_DEFAULT_POINTS,
    WELL_KNOWN_PLUGINS,
)
from koordsched.config.types import MULTI_POINT, POINT_FIELDS, Plugins, PluginSet

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Entry:
    """One enabled plugin, with the place in the config it came from (None: a default)."""

    name: str
    weight: int | None
    where: str | None


@dataclass(frozen=True)
class MergedSet:
    enabled: list[Entry]
    disabled: frozenset[str]


def default_multipoint(registry: PluginCatalog) -> list[Entry]:
    """Upstream's default multiPoint list, keeping only the plugins koordsched implements."""
    return [Entry(name, weight, None) for name, weight in UPSTREAM_DEFAULT_MULTIPOINT if name in registry]


def missing_defaults(plugins: Plugins, registry: PluginCatalog) -> list[str]:
    """The default plugins this profile would run in kube-scheduler that ``registry`` lacks.

    :func:`default_multipoint` leaves them out (nothing could run them); start-up names them so
    that a profile is never run short of a default plugin silently. One the profile disables
    (at multiPoint, or at every point it implements, by name or with "*") is not missing.
    """
    multi = {p.name for p in plugins.multi_point.disabled}
    missing = []
    for name, _ in UPSTREAM_DEFAULT_MULTIPOINT:
        if name in registry or name in multi or ALL in multi:
            continue
        points = UPSTREAM_DEFAULT_POINTS.get(name, frozenset(POINT_FIELDS))
        disabled_at = ({p.name for p in plugins.at(point).disabled} for point in sorted(points))
        if all(name in names or ALL in names for names in disabled_at):
            continue
        missing.append(name)
    return missing


def unknown_plugin(name: str, registry: PluginCatalog) -> str:
    """Why ``name`` cannot be used: not implemented (a real plugin) or unknown (likely a typo)."""
    if name in WELL_KNOWN_PLUGINS:
        return f'plugin "{name}" is not implemented by koordsched'
    close = difflib.get_close_matches(name, sorted(set(registry.names()) | WELL_KNOWN_PLUGINS), n=1)
    hint = f' (did you mean "{close[0]}"?)' if close else ""
    return f'unknown plugin "{name}"{hint}'


def check_plugin_set(plugin_set: PluginSet, where: str, point: str, registry: PluginCatalog) -> None:
    """Names exist, weights are sane, nothing is listed twice, each plugin implements ``point``."""
    first_at: dict[str, int] = {}
    for i, plugin in enumerate(plugin_set.enabled):
        here = f"{where}.enabled[{i}]"
        spec = registry.get(plugin.name)
        if spec is None:
            raise ConfigError(here, unknown_plugin(plugin.name, registry))
        if plugin.name in first_at:
            raise ConfigError(
                here,
                f'plugin "{plugin.name}" is enabled twice (also at {where}.enabled[{first_at[plugin.name]}])',
            )
        first_at[plugin.name] = i
        if plugin.weight is not None and plugin.weight < 0:
            raise ConfigError(f"{here}.weight", f"must not be negative, got {plugin.weight}")
        if plugin.weight is not None and plugin.weight > _INT32_MAX:
            raise ConfigError(f"{here}.weight", f"must fit in an int32, got {plugin.weight}")
        if point != MULTI_POINT and point not in spec.points:
            raise ConfigError(here, f'plugin "{plugin.name}" does not implement {point}')
    for i, plugin in enumerate(plugin_set.disabled):
        # Disabling a plugin koordsched lacks is harmless; an unheard-of name is a typo.
        if plugin.name != ALL and plugin.name not in registry and plugin.name not in WELL_KNOWN_PLUGINS:
            raise ConfigError(f"{where}.disabled[{i}]", unknown_plugin(plugin.name, registry))


def merge_plugin_set(defaults: Sequence[Entry], custom: PluginSet, where: str) -> MergedSet:
    """Upstream's ``mergePluginSet``: the defaults for one point, edited by the config's set."""
    disabled = frozenset(p.name for p in custom.disabled)
    custom_entries = [Entry(p.name, p.weight, f"{where}.enabled[{i}]") for i, p in enumerate(custom.enabled)]
    # As upstream's map: with a name listed twice, the later entry is the one that replaces.
    index_of = {entry.name: i for i, entry in enumerate(custom_entries)}
    replaced: set[int] = set()
    enabled: list[Entry] = []
    if ALL not in disabled:
        for default in defaults:
            if default.name in disabled:
                continue
            i = index_of.get(default.name)
            if i is None:
                enabled.append(default)
            else:
                enabled.append(custom_entries[i])
                replaced.add(i)
    enabled.extend(entry for i, entry in enumerate(custom_entries) if i not in replaced)
    return MergedSet(enabled, disabled)


def expand_point(point: str, explicit: MergedSet, multi: MergedSet, registry: PluginCatalog) -> list[Entry]:
    """Upstream's ``expandMultiPointPlugins`` for one extension point."""
    if ALL in explicit.disabled:
        return list(explicit.enabled)
    explicit_names = {entry.name for entry in explicit.enabled}
    overrides: set[str] = set()
    multi_only: list[Entry] = []
    for entry in multi.enabled:
        if point not in registry[entry.name].points or entry.name in explicit.disabled:
            continue
        if entry.name in explicit_names:
            overrides.add(entry.name)
        else:
            multi_only.append(entry)
    return (
        [entry for entry in explicit.enabled if entry.name in overrides]
        + multi_only
        + [entry for entry in explicit.enabled if entry.name not in overrides]
    )
