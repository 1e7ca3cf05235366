"""The config as the scheduler uses it: defaults applied, plugins expanded per extension point."""

from __future__ import annotations

from dataclasses import dataclass

from koordsched.config.catalog import PluginArgs
from koordsched.config.types import KubeSchedulerConfiguration


@dataclass(frozen=True)
class LeaderElectionConfig:
    leader_elect: bool
    #: Seconds.
    lease_duration: float
    renew_deadline: float
    retry_period: float
    resource_lock: str
    resource_name: str
    resource_namespace: str


@dataclass(frozen=True)
class ClientConnectionConfig:
    kubeconfig: str
    accept_content_types: str
    content_type: str
    qps: float
    burst: int


@dataclass(frozen=True)
class ResolvedProfile:
    scheduler_name: str
    #: The profile's own value, or None to use the global one.
    percentage_of_nodes_to_score: int | None
    #: Every extension point (``preEnqueue`` ... ``postBind``; no ``multiPoint``) -> the plugins
    #: that run there, in order, each with its weight: the score weight (>= 1) at ``score``,
    #: 1 elsewhere.
    points: dict[str, list[tuple[str, int]]]
    #: Every enabled plugin that takes args -> its decoded, validated args.
    args: dict[str, PluginArgs]
    #: kube-scheduler's default plugins the profile would run there but koordsched lacks, in
    #: upstream's order (:func:`~koordsched.config.merge.missing_defaults`).
    missing_defaults: tuple[str, ...] = ()

    def enabled_plugins(self) -> list[str]:
        """Each enabled plugin once, in the order first met walking the extension points."""
        seen: dict[str, None] = {}
        for plugins in self.points.values():
            for name, _ in plugins:
                seen.setdefault(name, None)
        return list(seen)

    def plugins_at(self, point: str) -> list[str]:
        """Names of the plugins at one extension point, in order."""
        return [name for name, _ in self.points[point]]


@dataclass(frozen=True)
class SchedulerConfig:
    raw: KubeSchedulerConfiguration
    profiles: list[ResolvedProfile]
    parallelism: int
    #: 0 means adaptive.
    percentage_of_nodes_to_score: int
    pod_initial_backoff_seconds: float
    pod_max_backoff_seconds: float
    leader_election: LeaderElectionConfig
    client_connection: ClientConnectionConfig
    #: The file the config came from, ``<bytes>`` or ``<defaults>``.
    source: str
    #: kube-scheduler's ``--pod-max-in-unschedulable-pods-duration`` (seconds): a flag, not a field.
    pod_max_in_unschedulable_pods_duration: float = 300.0

    def not_implemented(self) -> list[str]:
        """One line per profile that runs without some of kube-scheduler's default plugins, naming
        them, and one per client content type koordsched does not speak: what start-up (``run``
        and ``simulate``) says, so that nothing asked for is dropped silently."""
        lines = [
            f'profile "{p.scheduler_name}": kube-scheduler\'s default plugins '
            f"{', '.join(p.missing_defaults)} are not implemented by koordsched and do not run"
            for p in self.profiles
            if p.missing_defaults
        ]
        # The client speaks JSON only; a protobuf request is named rather than dropped silently.
        cc = self.client_connection
        for field, value in (
            ("contentType", cc.content_type),
            ("acceptContentTypes", cc.accept_content_types),
        ):
            if value and value != "application/json":
                lines.append(
                    f'clientConnection.{field} "{value}": koordsched\'s client sends and accepts '
                    "application/json only; the setting has no effect"
                )
        return lines

    def profile(self, scheduler_name: str) -> ResolvedProfile | None:
        """The profile serving pods with this ``spec.schedulerName``, if any."""
        return next((p for p in self.profiles if p.scheduler_name == scheduler_name), None)
