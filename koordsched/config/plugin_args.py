"""``pluginConfig``: each plugin's args decoded into its own ``<Name>Args`` Struct and validated.

Upstream decodes args strictly against the kind registered for the plugin and gives every
enabled plugin that has an args kind its defaults; koordsched does the same with the
Struct in the plugin's :class:`PluginSpec`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from koordsched.config.args_decode import args_kind, decode_plugin_args, validate_args
from koordsched.config.catalog import PluginArgs, PluginCatalog
from koordsched.config.errors import ConfigError
from koordsched.config.merge import unknown_plugin
from koordsched.config.types import CONFIG_VERSIONS, PluginConfig


def resolve_plugin_args(
    plugin_config: Sequence[PluginConfig], where: str, enabled: Sequence[str], registry: PluginCatalog
) -> dict[str, PluginArgs]:
    """Args for every enabled plugin that takes them: configured ones, else the defaults.

    Configured args are checked even for plugins that end up not enabled, as upstream does.
    """
    unknown = partial(unknown_plugin, registry=registry)
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
        args = decode_plugin_args(entry, here, registry, versions=CONFIG_VERSIONS, unknown=unknown)
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
        validate_args(default, f"{where}.pluginConfig", f"default {args_kind(name)}")
        out[name] = default
    return out
