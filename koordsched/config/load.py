"""Load a ``KubeSchedulerConfiguration`` (Koordinator's koord-scheduler config, unchanged).

``load_config`` reads, decodes, defaults, merges and validates; any problem is a
:class:`ConfigError` naming the field (and the file). ``default_config`` is what
kube-scheduler runs with no config file, limited to the plugins koordsched has.
"""

from __future__ import annotations

import os

import msgspec

from koordsched.config.catalog import PluginCatalog
from koordsched.config.decode import decode_config, read_config_file, read_document
from koordsched.config.errors import ConfigError
from koordsched.config.names import UPSTREAM_DEFAULT_MULTIPOINT
from koordsched.config.profiles import DEFAULT_SCHEDULER_NAME, check_profiles_agree, resolve_profile
from koordsched.config.resolved import (
    ClientConnectionConfig,
    LeaderElectionConfig,
    ResolvedProfile,
    SchedulerConfig,
)
from koordsched.config.types import KubeSchedulerConfiguration, KubeSchedulerProfile
from koordsched.config.validate import check_top_level, resolve_client_connection, resolve_leader_election

__all__ = [
    "UPSTREAM_DEFAULT_MULTIPOINT",
    "ClientConnectionConfig",
    "ConfigError",
    "LeaderElectionConfig",
    "ResolvedProfile",
    "SchedulerConfig",
    "default_config",
    "load_config",
    "read_config",
    "resolve_config",
]

BYTES_SOURCE = "<bytes>"
DEFAULTS_SOURCE = "<defaults>"


def load_config(source: str | os.PathLike[str] | bytes, registry: PluginCatalog) -> SchedulerConfig:
    """The config in a file (a path) or in ``bytes`` of YAML or JSON text."""
    raw = read_config(source)
    if isinstance(source, bytes):
        return resolve_config(raw, registry, BYTES_SOURCE)
    file = os.fspath(source)
    try:
        return resolve_config(raw, registry, file)
    except ConfigError as exc:
        raise exc.in_source(file) from exc.__cause__


def read_config(source: str | os.PathLike[str] | bytes) -> KubeSchedulerConfiguration:
    """The config decoded, not yet resolved against the plugins; errors name the file."""
    if isinstance(source, bytes):
        return decode_config(read_document(source))
    file = os.fspath(source)
    data = read_config_file(file)
    try:
        return decode_config(read_document(data))
    except ConfigError as exc:
        raise exc.in_source(file) from exc.__cause__


def default_config(registry: PluginCatalog, scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> SchedulerConfig:
    """Upstream's defaults (one profile, the default multiPoint set) for the plugins in ``registry``."""
    raw = KubeSchedulerConfiguration(profiles=[KubeSchedulerProfile(scheduler_name=scheduler_name)])
    return resolve_config(raw, registry, DEFAULTS_SOURCE)


def resolve_config(raw: KubeSchedulerConfiguration, registry: PluginCatalog, source: str) -> SchedulerConfig:
    """Defaults, plugin merging and validation applied to an already decoded config."""
    check_top_level(raw)
    client_connection = resolve_client_connection(raw.client_connection)
    leader_election = resolve_leader_election(raw.leader_election)
    raw_profiles = _defaulted_profiles(raw.profiles)
    profiles = [resolve_profile(p, f"profiles[{i}]", registry) for i, p in enumerate(raw_profiles)]
    check_profiles_agree(raw_profiles, profiles)
    return SchedulerConfig(
        raw=raw,
        profiles=profiles,
        parallelism=raw.parallelism,
        percentage_of_nodes_to_score=raw.percentage_of_nodes_to_score,
        pod_initial_backoff_seconds=float(raw.pod_initial_backoff_seconds),
        pod_max_backoff_seconds=float(raw.pod_max_backoff_seconds),
        leader_election=leader_election,
        client_connection=client_connection,
        source=source,
    )


def _defaulted_profiles(profiles: list[KubeSchedulerProfile]) -> list[KubeSchedulerProfile]:
    """No profile: one default one. A lone profile without a name: ``default-scheduler``."""
    if not profiles:
        return [KubeSchedulerProfile(scheduler_name=DEFAULT_SCHEDULER_NAME)]
    if len(profiles) == 1 and not profiles[0].scheduler_name:
        return [msgspec.structs.replace(profiles[0], scheduler_name=DEFAULT_SCHEDULER_NAME)]
    return profiles
