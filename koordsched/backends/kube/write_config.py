"""``koordsched run --write-config-to FILE``: write the effective configuration and exit 0.

As kube-scheduler: the file is the configuration after the flags are applied, with every
default filled in and each profile completed (the plugins that run at each extension point, in
order, with their weights, and every plugin's args with their defaults), as YAML. It is a valid
``--config``: each extension point lists its plugins after disabling the defaults (``"*"``), so
reading it back runs the same plugins. Nothing connects to the cluster and nothing is served.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import msgspec
import yaml

from koordsched.api.durations import format_duration
from koordsched.config.errors import ConfigError
from koordsched.config.load import read_config, resolve_config
from koordsched.config.resolved import ResolvedProfile, SchedulerConfig
from koordsched.config.types import MULTI_POINT, POINT_FIELDS

log = logging.getLogger(__name__)

__all__ = ["effective_config", "write_config"]

_ALL = [{"name": "*"}]


def effective_config(config: SchedulerConfig) -> dict[str, Any]:
    """The configuration as kube-scheduler's ``--write-config-to`` writes it (camelCase keys)."""
    out: dict[str, Any] = msgspec.to_builtins(config.raw)
    le = config.leader_election
    out["leaderElection"] = {
        "leaderElect": le.leader_elect,
        "leaseDuration": format_duration(le.lease_duration),
        "renewDeadline": format_duration(le.renew_deadline),
        "retryPeriod": format_duration(le.retry_period),
        "resourceLock": le.resource_lock,
        "resourceName": le.resource_name,
        "resourceNamespace": le.resource_namespace,
    }
    cc = config.client_connection
    out["clientConnection"] = {
        "kubeconfig": cc.kubeconfig,
        "acceptContentTypes": cc.accept_content_types,
        "contentType": cc.content_type,
        "qps": cc.qps,
        "burst": cc.burst,
    }
    out["profiles"] = [_profile(p) for p in config.profiles]
    return out


def _profile(profile: ResolvedProfile) -> dict[str, Any]:
    plugins: dict[str, Any] = {MULTI_POINT: {"disabled": _ALL}}
    for point in POINT_FIELDS:
        entries = [
            {"name": name, "weight": weight} if point == "score" else {"name": name}
            for name, weight in profile.points.get(point, [])
        ]
        plugins[point] = {"enabled": entries, "disabled": _ALL} if entries else {"disabled": _ALL}
    out: dict[str, Any] = {"schedulerName": profile.scheduler_name, "plugins": plugins}
    if profile.percentage_of_nodes_to_score is not None:
        out["percentageOfNodesToScore"] = profile.percentage_of_nodes_to_score
    out["pluginConfig"] = [
        {"name": name, "args": msgspec.to_builtins(args)} for name, args in sorted(profile.args.items())
    ]
    return out


def write_config(source: str, apply: Any, path: str) -> int:
    """Read ``source``, apply the flags (``apply``: raw config -> raw config), resolve it against
    the plugins and write it to ``path``: 0, 2 for an invalid configuration, 1 when the file
    cannot be written."""
    from koordsched.plugins.registry import in_tree_registry

    try:
        raw = apply(read_config(source))
        config = resolve_config(raw, in_tree_registry(), source)
    except ConfigError as err:
        log.error("invalid configuration: %s", err)
        return 2
    text = yaml.safe_dump(effective_config(config), sort_keys=False)
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as err:
        log.error("cannot write the configuration to %s: %s", path, err.strerror or err)
        return 1
    log.info("Wrote configuration to %s", os.fspath(path))
    return 0
