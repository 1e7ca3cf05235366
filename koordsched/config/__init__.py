"""koord-scheduler's ``KubeSchedulerConfiguration``, loaded and resolved the way kube-scheduler does."""

from koordsched.api.durations import DurationError, parse_duration
from koordsched.config.errors import ConfigError
from koordsched.config.load import default_config, load_config, resolve_config
from koordsched.config.names import KOORDINATOR_PLUGINS, UPSTREAM_DEFAULT_MULTIPOINT, WELL_KNOWN_PLUGINS
from koordsched.config.resolved import (
    ClientConnectionConfig,
    LeaderElectionConfig,
    ResolvedProfile,
    SchedulerConfig,
)
from koordsched.config.types import CONFIG_KIND, CONFIG_VERSIONS, KubeSchedulerConfiguration

__all__ = [
    "CONFIG_KIND",
    "CONFIG_VERSIONS",
    "KOORDINATOR_PLUGINS",
    "UPSTREAM_DEFAULT_MULTIPOINT",
    "WELL_KNOWN_PLUGINS",
    "ClientConnectionConfig",
    "ConfigError",
    "DurationError",
    "KubeSchedulerConfiguration",
    "LeaderElectionConfig",
    "ResolvedProfile",
    "SchedulerConfig",
    "default_config",
    "load_config",
    "parse_duration",
    "resolve_config",
]
