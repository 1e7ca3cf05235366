"""One profile's plugins and args resolved, and the checks that span profiles.

There is a single scheduling queue, so every profile must sort it the same way; and each
profile needs exactly one QueueSort and at least one Bind plugin to schedule anything.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from koordsched.config.catalog import PluginArgs, PluginCatalog
from koordsched.config.errors import ConfigError
from koordsched.config.merge import (
    check_plugin_set,
    default_multipoint,
    expand_point,
    merge_plugin_set,
    missing_defaults,
)
from koordsched.config.plugin_args import resolve_plugin_args
from koordsched.config.resolved import ResolvedProfile
from koordsched.config.types import MULTI_POINT, POINT_FIELDS, KubeSchedulerProfile, Plugins
from koordsched.config.validate import check_percentage

DEFAULT_SCHEDULER_NAME = "default-scheduler"
SCORE = "score"


def resolve_profile(raw: KubeSchedulerProfile, where: str, registry: PluginCatalog) -> ResolvedProfile:
    """``raw`` (already given its default name, if any) as the framework will run it."""
    if not raw.scheduler_name:
        raise ConfigError(f"{where}.schedulerName", "required when there is more than one profile")
    check_percentage(f"{where}.percentageOfNodesToScore", raw.percentage_of_nodes_to_score)
    plugins = raw.plugins or Plugins()
    for point in (MULTI_POINT, *POINT_FIELDS):
        check_plugin_set(plugins.at(point), f"{where}.plugins.{point}", point, registry)
    multi = merge_plugin_set(
        default_multipoint(registry), plugins.multi_point, f"{where}.plugins.{MULTI_POINT}"
    )
    points: dict[str, list[tuple[str, int]]] = {}
    for point in POINT_FIELDS:
        explicit = merge_plugin_set([], plugins.at(point), f"{where}.plugins.{point}")
        entries = expand_point(point, explicit, multi, registry)
        # An explicit Score entry's weight wins even when unset (then 1), as upstream's
        # getScoreWeights reads Score.Enabled before MultiPoint.Enabled.
        points[point] = [(e.name, (e.weight or 1) if point == SCORE else 1) for e in entries]
    enabled = list(dict.fromkeys(name for entries in points.values() for name, _ in entries))
    profile = ResolvedProfile(
        scheduler_name=raw.scheduler_name,
        percentage_of_nodes_to_score=raw.percentage_of_nodes_to_score,
        points=points,
        args=resolve_plugin_args(raw.plugin_config, where, enabled, registry),
        missing_defaults=tuple(missing_defaults(plugins, registry)),
    )
    _check_required_points(profile, where)
    return profile


def _check_required_points(profile: ResolvedProfile, where: str) -> None:
    queue_sort = profile.plugins_at("queueSort")
    if len(queue_sort) != 1:
        got = ", ".join(f'"{n}"' for n in queue_sort) or "none"
        raise ConfigError(
            f"{where}.plugins.queueSort", f"exactly one queue sort plugin is required, got {got}"
        )
    if not profile.points["bind"]:
        raise ConfigError(f"{where}.plugins.bind", "at least one bind plugin is required")


def check_profiles_agree(raws: Sequence[KubeSchedulerProfile], profiles: Sequence[ResolvedProfile]) -> None:
    """Unique scheduler names, and one queue sort plugin with the same args for all."""
    first_at: dict[str, int] = {}
    for i, profile in enumerate(profiles):
        if profile.scheduler_name in first_at:
            raise ConfigError(
                f"profiles[{i}].schedulerName",
                f'duplicate "{profile.scheduler_name}" (also profiles[{first_at[profile.scheduler_name]}])',
            )
        first_at[profile.scheduler_name] = i
    canon = profiles[0]
    sort_name = canon.plugins_at("queueSort")[0]
    for i, profile in enumerate(profiles[1:], start=1):
        if profile.plugins_at("queueSort") != [sort_name]:
            raise ConfigError(
                f"profiles[{i}].plugins.queueSort",
                f'must be the same for all profiles: profiles[0] uses "{sort_name}", '
                f'this one "{profile.plugins_at("queueSort")[0]}"',
            )
        if _comparable(profile.args.get(sort_name)) != _comparable(canon.args.get(sort_name)):
            raise ConfigError(
                _args_place(raws[i], i, sort_name), "queue sort args must be the same for all profiles"
            )


def _comparable(args: PluginArgs | None) -> PluginArgs | None:
    """Args without apiVersion/kind, which may be given in one profile and not another."""
    return None if args is None else msgspec.structs.replace(args, api_version=None, kind=None)


def _args_place(raw: KubeSchedulerProfile, index: int, plugin: str) -> str:
    for j, entry in enumerate(raw.plugin_config):
        if entry.name == plugin:
            return f"profiles[{index}].pluginConfig[{j}].args"
    return f"profiles[{index}].pluginConfig"
