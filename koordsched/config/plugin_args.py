"""``pluginConfig``: each plugin's args decoded into its own ``<Name>Args`` Struct and validated.

Upstream decodes args strictly against the kind registered for the plugin and gives every
enabled plugin that has an args kind its defaults; koordsched does the same with the
Struct in the plugin's :class:`PluginSpec`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from koordsched.config.catalog import ArgsError, PluginArgs, PluginCatalog
from koordsched.config.errors import ConfigError
from koordsched.config.merge import unknown_plugin
from koordsched.config.types import CONFIG_VERSIONS, PluginConfig

_TYPE_META = ("apiVersion", "kind")


def args_kind(plugin: str) -> str:
    return f"{plugin}Args"


def resolve_plugin_args(
    plugin_config: Sequence[PluginConfig], where: str, enabled: Sequence[str], registry: PluginCatalog
) -> dict[str, PluginArgs]:
    """Args for every enabled plugin that takes them: configured ones, else the defaults.

    Configured args are checked even for plugins that end up not enabled, as upstream does.
    """
    configured: dict[str, PluginArgs] = {}
    first_at: dict[str, int] = {}
    for j, entry in enumerate(plugin_config):
        here = f"{where}.pluginConfig[{j}]"
        if entry.name in first_at:
            raise ConfigError(
                f"{here}.name",
                f'duplicate config for plugin "{entry.name}" (also at pluginConfig[{first_at[entry.name]}])',
            )
        first_at[entry.name] = j
        args = _decode_args(entry, here, registry)
        if args is not None:
            configured[entry.name] = args
    out: dict[str, PluginArgs] = {}
    for name in enabled:
        spec = registry[name]
        if spec.args_type is None:
            continue
        if name in configured:
            out[name] = configured[name]
            continue
        default = spec.args_type()
        _validate(default, f"{where}.pluginConfig", f"default {args_kind(name)}")
        out[name] = default
    return out


def _decode_args(entry: PluginConfig, here: str, registry: PluginCatalog) -> PluginArgs | None:
    spec = registry.get(entry.name)
    if spec is None:
        raise ConfigError(f"{here}.name", unknown_plugin(entry.name, registry))
    raw: dict[str, Any] = entry.args or {}
    kind = args_kind(entry.name)
    if "kind" in raw and raw["kind"] != kind:
        raise ConfigError(
            f"{here}.args.kind", f'must be "{kind}" for plugin "{entry.name}", got "{raw["kind"]}"'
        )
    if "apiVersion" in raw and raw["apiVersion"] not in CONFIG_VERSIONS:
        wanted = " or ".join(f'"{v}"' for v in CONFIG_VERSIONS)
        raise ConfigError(f"{here}.args.apiVersion", f'must be {wanted}, got "{raw["apiVersion"]}"')
    if spec.args_type is None:
        extra = sorted(str(key) for key in raw if key not in _TYPE_META)
        if extra:
            raise ConfigError(f"{here}.args", f'plugin "{entry.name}" takes no args, got field `{extra[0]}`')
        return None
    label = f"{here}.args ({kind})"
    try:
        args = msgspec.convert(raw, spec.args_type)
    except msgspec.ValidationError as exc:
        raise ConfigError(label, str(exc)) from exc
    _validate(args, label, None)
    return args


def _validate(args: PluginArgs, where: str, what: str | None) -> None:
    try:
        args.validate()
    except ArgsError as exc:
        detail = str(exc) if what is None else f"{what} are invalid: {exc}"
        raise ConfigError(where, detail) from exc
