"""Top-level checks kube-scheduler makes, and the defaulting of zero values that precedes them.

Upstream (``apis/config/v1/defaults.go`` and component-base) treats some zero values as
"not set": ``0s`` durations, an empty lock name or namespace, qps 0 and burst 0 all get
the defaults. Explicit ``parallelism: 0`` or ``podInitialBackoffSeconds: 0`` do not, and
fail validation.

Numbers are also held to the Go types of the fields, which Go's decoder enforces:
``parallelism`` and ``burst`` are int32, ``qps`` a float32 (YAML's ``.nan``/``.inf`` do not
survive Go's YAML-to-JSON step either), durations int64 nanoseconds. The backoff seconds are
int64 there but become a ``time.Duration``, which overflows silently past 292 years: refused.
"""

from __future__ import annotations

import math

from koordsched.api.durations import MAX_DURATION_SECONDS, DurationError, parse_duration
from koordsched.config.errors import ConfigError
from koordsched.config.resolved import ClientConnectionConfig, LeaderElectionConfig
from koordsched.config.types import (
    ClientConnectionConfiguration,
    KubeSchedulerConfiguration,
    LeaderElectionConfiguration,
)

#: client-go's ``leaderelection.JitterFactor``: renewDeadline must exceed retryPeriod by it.
LEADER_ELECTION_JITTER = 1.2
#: The only lock koordsched implements (upstream also accepts only this one since 1.24).
LEASES = "leases"

_LE_DEFAULTS = LeaderElectionConfiguration()
_CC_DEFAULTS = ClientConnectionConfiguration()

INT32_MAX = 2**31 - 1
#: The largest finite float32 (``math.MaxFloat32``).
FLOAT32_MAX = 3.4028234663852886e38


def check_int32(where: str, value: int) -> None:
    if not -(2**31) <= value <= INT32_MAX:
        raise ConfigError(where, f"must fit in an int32 (at most {INT32_MAX}), got {value}")


def check_seconds(where: str, value: int) -> None:
    """Whole seconds that become a Go ``time.Duration``."""
    if value > MAX_DURATION_SECONDS:
        raise ConfigError(
            where,
            f"must be at most {MAX_DURATION_SECONDS} (the longest time.Duration in seconds), got {value}",
        )


def check_top_level(raw: KubeSchedulerConfiguration) -> None:
    if raw.extenders:
        raise ConfigError("extenders", "extenders are not supported")
    check_int32("parallelism", raw.parallelism)
    if raw.parallelism <= 0:
        raise ConfigError("parallelism", f"must be greater than 0, got {raw.parallelism}")
    check_percentage("percentageOfNodesToScore", raw.percentage_of_nodes_to_score)
    check_seconds("podInitialBackoffSeconds", raw.pod_initial_backoff_seconds)
    check_seconds("podMaxBackoffSeconds", raw.pod_max_backoff_seconds)
    if raw.pod_initial_backoff_seconds <= 0:
        raise ConfigError(
            "podInitialBackoffSeconds", f"must be greater than 0, got {raw.pod_initial_backoff_seconds}"
        )
    if raw.pod_max_backoff_seconds < raw.pod_initial_backoff_seconds:
        raise ConfigError(
            "podMaxBackoffSeconds",
            f"must be >= podInitialBackoffSeconds ({raw.pod_initial_backoff_seconds}), "
            f"got {raw.pod_max_backoff_seconds}",
        )


def check_percentage(where: str, value: int | None) -> None:
    if value is not None and not 0 <= value <= 100:
        raise ConfigError(where, f"must be in 0..100, got {value}")


def resolve_client_connection(raw: ClientConnectionConfiguration) -> ClientConnectionConfig:
    if not math.isfinite(raw.qps) or raw.qps > FLOAT32_MAX:
        raise ConfigError("clientConnection.qps", f"must be a finite float32 number, got {raw.qps}")
    if raw.qps < 0:
        raise ConfigError("clientConnection.qps", f"must not be negative, got {raw.qps}")
    check_int32("clientConnection.burst", raw.burst)
    if raw.burst < 0:
        raise ConfigError("clientConnection.burst", f"must not be negative, got {raw.burst}")
    return ClientConnectionConfig(
        kubeconfig=raw.kubeconfig,
        accept_content_types=raw.accept_content_types,
        content_type=raw.content_type,
        qps=raw.qps or _CC_DEFAULTS.qps,
        burst=raw.burst or _CC_DEFAULTS.burst,
    )


def resolve_leader_election(raw: LeaderElectionConfiguration) -> LeaderElectionConfig:
    """Durations parsed, zero values defaulted, and (when electing) checked as client-go does."""
    out = LeaderElectionConfig(
        leader_elect=raw.leader_elect,
        lease_duration=_duration("leaseDuration", raw.lease_duration, _LE_DEFAULTS.lease_duration),
        renew_deadline=_duration("renewDeadline", raw.renew_deadline, _LE_DEFAULTS.renew_deadline),
        retry_period=_duration("retryPeriod", raw.retry_period, _LE_DEFAULTS.retry_period),
        resource_lock=raw.resource_lock or _LE_DEFAULTS.resource_lock,
        resource_name=raw.resource_name or _LE_DEFAULTS.resource_name,
        resource_namespace=raw.resource_namespace or _LE_DEFAULTS.resource_namespace,
    )
    if out.leader_elect:
        _check_leader_election(out)
    return out


def _check_leader_election(le: LeaderElectionConfig) -> None:
    for field, value in (
        ("leaseDuration", le.lease_duration),
        ("renewDeadline", le.renew_deadline),
        ("retryPeriod", le.retry_period),
    ):
        if value <= 0:
            raise ConfigError(f"leaderElection.{field}", f"must be greater than 0, got {value:g}s")
    if le.lease_duration <= le.renew_deadline:
        raise ConfigError(
            "leaderElection.leaseDuration",
            f"must be greater than renewDeadline ({le.renew_deadline:g}s), got {le.lease_duration:g}s",
        )
    if le.renew_deadline <= LEADER_ELECTION_JITTER * le.retry_period:
        raise ConfigError(
            "leaderElection.renewDeadline",
            f"must be greater than retryPeriod * {LEADER_ELECTION_JITTER} "
            f"({LEADER_ELECTION_JITTER * le.retry_period:g}s), got {le.renew_deadline:g}s",
        )
    if le.resource_lock != LEASES:
        raise ConfigError(
            "leaderElection.resourceLock",
            f'must be "{LEASES}" (the only lock koordsched implements), got "{le.resource_lock}"; '
            f"kube-scheduler 1.28 refuses it too: couldn't create resource lock: "
            f"{_removed_lock(le.resource_lock)}",
        )


def _removed_lock(lock: str) -> str:
    """client-go 1.28's error for a lock type other than leases (``resourcelock.New``)."""
    removed = {
        "endpoints": "endpoints lock is removed, migrate to endpointsleases (using version v0.27.x)",
        "configmaps": "configmaps lock is removed, migrate to configmapsleases (using version v0.27.x)",
        "endpointsleases": f"endpointsleases lock is removed, migrate to {LEASES}",
        "configmapsleases": f"configmapsleases lock is removed, migrated to {LEASES}",
    }
    return removed.get(lock, f"Invalid lock-type {lock}")


def _duration(field: str, text: str, default: str) -> float:
    try:
        seconds = parse_duration(text)
    except DurationError as exc:
        raise ConfigError(f"leaderElection.{field}", str(exc)) from exc
    return seconds if seconds != 0 else parse_duration(default)
