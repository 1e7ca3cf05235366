"""Read a ``DeschedulerConfiguration`` file: decode strictly, default, validate, resolve.

Errors are :class:`~koordsched.config.errors.ConfigError`, naming the field path and value,
as the scheduler's config loader does. Defaults are Koordinator's ``SetDefaults_*``: one
unnamed profile is called ``koord-descheduler``; the default plugin sets are Evict = Filter =
``[MigrationController]`` and no Deschedule or Balance plugins (``disabled: [{name: "*"}]``
drops the defaults of a point); every enabled plugin that has args gets its defaults.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

import msgspec

from koordsched.api.core import LabelSelector
from koordsched.api.durations import DurationError, parse_duration
from koordsched.api.selectors import SelectorError, validate_label_selector
from koordsched.config.args_decode import args_kind, decode_plugin_args, validate_args
from koordsched.config.catalog import PluginArgs
from koordsched.config.decode import error_from_validation, read_config_file, read_document
from koordsched.config.errors import ConfigError
from koordsched.descheduler.catalog import PluginCatalog
from koordsched.descheduler.config.types import (
    CONFIG_KIND,
    CONFIG_VERSION,
    DEFAULT_PROFILE_NAME,
    POINTS,
    DeschedulerConfiguration,
    DeschedulerProfile,
    PluginConfig,
    Plugins,
    PluginSet,
)

MIGRATION_CONTROLLER: Final = "MigrationController"
#: ``getDefaultPlugins``: no Deschedule or Balance plugins by default.
DEFAULT_PLUGINS: Final[dict[str, tuple[str, ...]]] = {
    "deschedule": (),
    "balance": (),
    "evict": (MIGRATION_CONTROLLER,),
    "filter": (MIGRATION_CONTROLLER,),
}


@dataclass
class ResolvedProfile:
    name: str
    #: Extension point -> enabled plugin names, in order.
    plugins: dict[str, list[str]]
    #: Plugin name -> its decoded args (configured, else defaults), for every plugin that
    #: takes args and is enabled or configured.
    args: dict[str, PluginArgs]
    node_selector: LabelSelector | None = None

    def enabled(self, point: str) -> list[str]:
        return self.plugins.get(point, [])

    def args_of(self, name: str) -> PluginArgs | None:
        return self.args.get(name)


@dataclass
class DeschedulerConfig:
    profiles: list[ResolvedProfile]
    #: Seconds between rounds; 0: a single round.
    interval: float = 0.0
    dry_run: bool = False
    node_selector: LabelSelector | None = None
    max_pods_per_node: int | None = None
    max_pods_per_namespace: int | None = None
    max_pods_total: int | None = None
    lease_name: str = "koord-descheduler"
    lease_namespace: str = "koordinator-system"
    client_qps: float = 50.0
    client_burst: int = 100
    source: str = "defaults"
    raw: DeschedulerConfiguration = field(default_factory=DeschedulerConfiguration)


def load_descheduler_config(path: str | os.PathLike[str] | None, catalog: PluginCatalog) -> DeschedulerConfig:
    """The config in ``path`` (None: Koordinator's defaults), resolved against ``catalog``."""
    if path is None:
        doc: dict[str, Any] = {"apiVersion": CONFIG_VERSION, "kind": CONFIG_KIND}
        return resolve(decode(doc), catalog, "defaults")
    source = str(path)
    data = read_config_file(path)
    try:
        return resolve(decode(read_document(data)), catalog, source)
    except ConfigError as err:
        raise err.in_source(source) from None


def decode(doc: dict[str, Any]) -> DeschedulerConfiguration:
    api_version = doc.get("apiVersion")
    if api_version != CONFIG_VERSION:
        got = "missing" if api_version is None else f'got "{api_version}"'
        raise ConfigError("apiVersion", f'must be "{CONFIG_VERSION}", {got}')
    kind = doc.get("kind")
    if kind != CONFIG_KIND:
        got = "missing" if kind is None else f'got "{kind}"'
        raise ConfigError("kind", f'must be "{CONFIG_KIND}", {got}')
    try:
        return msgspec.convert(doc, DeschedulerConfiguration)
    except msgspec.ValidationError as exc:
        raise error_from_validation(exc, root=CONFIG_KIND) from exc


def resolve(cfg: DeschedulerConfiguration, catalog: PluginCatalog, source: str) -> DeschedulerConfig:
    try:
        interval = parse_duration(cfg.descheduling_interval)
    except DurationError as err:
        raise ConfigError("deschedulingInterval", str(err)) from None
    if interval < 0 or not math.isfinite(interval):
        raise ConfigError(
            "deschedulingInterval", f'Invalid value: "{cfg.descheduling_interval}": must be 0 or positive'
        )
    for where, value in (
        ("maxNoOfPodsToEvictPerNode", cfg.max_no_of_pods_to_evict_per_node),
        ("maxNoOfPodsToEvictPerNamespace", cfg.max_no_of_pods_to_evict_per_namespace),
        ("maxNoOfPodsToEvictTotal", cfg.max_no_of_pods_to_evict_total),
    ):
        if value is not None and value < 0:
            raise ConfigError(where, f"Invalid value: {value}: must be greater than or equal to 0")
    _check_selector("nodeSelector", cfg.node_selector)
    if cfg.client_connection.qps < 0:
        raise ConfigError("clientConnection.qps", f"Invalid value: {cfg.client_connection.qps}: must be >= 0")
    profiles = cfg.profiles or [DeschedulerProfile()]
    if len(profiles) == 1 and not profiles[0].name:
        profiles = [msgspec.structs.replace(profiles[0], name=DEFAULT_PROFILE_NAME)]
    resolved: list[ResolvedProfile] = []
    seen: dict[str, int] = {}
    for i, prof in enumerate(profiles):
        where = f"profiles[{i}]"
        if not prof.name:
            raise ConfigError(
                f"{where}.name", "Required value: every profile needs a name when there are several"
            )
        if prof.name in seen:
            raise ConfigError(
                f"{where}.name", f'Duplicate value: "{prof.name}" (also profiles[{seen[prof.name]}])'
            )
        seen[prof.name] = i
        _check_selector(f"{where}.nodeSelector", prof.node_selector)
        resolved.append(_resolve_profile(prof, where, catalog))
    le = cfg.leader_election
    return DeschedulerConfig(
        profiles=resolved,
        interval=interval,
        dry_run=cfg.dry_run,
        node_selector=cfg.node_selector,
        max_pods_per_node=cfg.max_no_of_pods_to_evict_per_node,
        max_pods_per_namespace=cfg.max_no_of_pods_to_evict_per_namespace,
        max_pods_total=cfg.max_no_of_pods_to_evict_total,
        lease_name=le.resource_name or "koord-descheduler",
        lease_namespace=le.resource_namespace or "koordinator-system",
        client_qps=cfg.client_connection.qps or 50.0,
        client_burst=cfg.client_connection.burst or 100,
        source=source,
        raw=cfg,
    )


def _check_selector(where: str, sel: LabelSelector | None) -> None:
    try:
        validate_label_selector(sel)
    except SelectorError as err:
        raise ConfigError(where, str(err)) from None


def _resolve_profile(prof: DeschedulerProfile, where: str, catalog: PluginCatalog) -> ResolvedProfile:
    plugins = prof.plugins or Plugins()
    enabled: dict[str, list[str]] = {}
    for point in POINTS:
        enabled[point] = _merge(
            getattr(plugins, point), DEFAULT_PLUGINS[point], f"{where}.plugins.{point}", catalog, point
        )
    if (enabled["balance"] or enabled["deschedule"]) and len(enabled["evict"]) != 1:
        raise ConfigError(
            f"{where}.plugins.evict",
            "exactly one Evict plugin must be enabled when Deschedule or Balance plugins are, "
            f"got {enabled['evict']}",
        )
    args = _resolve_args(prof.plugin_config, where, {n for names in enabled.values() for n in names}, catalog)
    return ResolvedProfile(prof.name, enabled, args, prof.node_selector)


def _merge(
    ps: PluginSet, defaults: Sequence[str], where: str, catalog: PluginCatalog, point: str
) -> list[str]:
    disabled = {p.name for p in ps.disabled}
    out = [] if "*" in disabled else [d for d in defaults if d not in disabled]
    for j, p in enumerate(ps.enabled):
        here = f"{where}.enabled[{j}].name"
        spec = catalog.get(p.name)
        if spec is None:
            raise ConfigError(here, _unknown(p.name, catalog))
        if point not in spec.points:
            implemented = ", ".join(sorted(spec.points)) or "none"
            raise ConfigError(
                here,
                f'plugin "{p.name}" does not implement extension point {point} '
                f"(it implements: {implemented})",
            )
        if p.name in out:
            if p.name in defaults:
                continue  # enabling a default plugin again keeps it once, in its default place
            raise ConfigError(here, f'Duplicate value: "{p.name}"')
        out.append(p.name)
    return out


def _unknown(name: str, catalog: PluginCatalog) -> str:
    return f'unknown descheduler plugin "{name}" (koordsched has: {", ".join(catalog.names())})'


def _resolve_args(
    plugin_config: Sequence[PluginConfig], where: str, enabled: set[str], catalog: PluginCatalog
) -> dict[str, PluginArgs]:
    unknown = partial(_unknown, catalog=catalog)
    out: dict[str, PluginArgs] = {}
    first_at: dict[str, int] = {}
    for j, entry in enumerate(plugin_config):
        here = f"{where}.pluginConfig[{j}]"
        if entry.name in first_at:
            raise ConfigError(
                f"{here}.name", f'Duplicate value: "{entry.name}" (also pluginConfig[{first_at[entry.name]}])'
            )
        first_at[entry.name] = j
        args = decode_plugin_args(entry, here, catalog, versions=(CONFIG_VERSION,), unknown=unknown)
        if args is not None:
            out[entry.name] = args
    for name in sorted(enabled - set(out)):
        spec = catalog.get(name)
        if spec is not None and spec.args_type is not None:
            default = spec.args_type()
            validate_args(default, f"{where}.pluginConfig (default {args_kind(name)})")
            out[name] = default
    return out
