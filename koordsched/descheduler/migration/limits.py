"""The retryable limits a pending PodMigrationJob must pass at arbitration (spec 7.2), and the
eviction rate limiter (``evictQPS``/``evictBurst``) and per-object limiters.

Counts are over the jobs in flight: passed arbitration and not finished. A limit that is
unset (or 0) does not limit, except the per-workload ones, derived from the replica count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from koordsched.api.durations import parse_duration
from koordsched.descheduler.migration.args import WORKLOAD, MigrationControllerArgs, scaled
from koordsched.descheduler.migration.filters import PodFilter, Workload


@dataclass(frozen=True)
class InFlight:
    """What a job in flight holds: its pod's node, namespace and workload."""

    node: str
    namespace: str
    workload: Workload | None


def limit_refusal(
    args: MigrationControllerArgs,
    pod_filter: PodFilter,
    node: str,
    namespace: str,
    workload: Workload | None,
    in_flight: Iterable[InFlight],
    unavailable_of: Callable[[Workload], int],
) -> str | None:
    """Why a job for a pod on ``node`` may not start now, or None."""
    flights = list(in_flight)
    if args.max_migrating_globally and len(flights) >= args.max_migrating_globally:
        return f"maxMigratingGlobally={args.max_migrating_globally} reached"
    per_node = sum(1 for f in flights if f.node == node)
    if args.max_migrating_per_node and per_node >= args.max_migrating_per_node:
        return f"maxMigratingPerNode={args.max_migrating_per_node} reached on node {node}"
    per_ns = sum(1 for f in flights if f.namespace == namespace)
    if args.max_migrating_per_namespace and per_ns >= args.max_migrating_per_namespace:
        return f"maxMigratingPerNamespace={args.max_migrating_per_namespace} reached in namespace {namespace}"
    if workload is not None:
        replicas = pod_filter.replicas_of(workload)
        if replicas is not None:
            migrating = sum(1 for f in flights if f.workload == workload)
            limit = pod_filter.max_migrating(workload, replicas)
            if migrating >= limit:
                return f"maxMigratingPerWorkload={limit} reached for {workload.key}"
            most = pod_filter.max_unavailable(workload, replicas)
            if unavailable_of(workload) + migrating >= most:
                return f"maxUnavailablePerWorkload={most} reached for {workload.key}"
    return None


@dataclass
class TokenBucket:
    """``rate.Limiter``: ``qps`` tokens a second, at most ``burst`` saved. qps 0: no limit."""

    qps: float
    burst: int
    _tokens: float = -1.0
    _at: float = 0.0

    def _refill(self, now: float) -> None:
        burst = float(max(self.burst, 1))
        if self._tokens < 0:
            self._tokens, self._at = burst, now
        if now > self._at:
            self._tokens = min(burst, self._tokens + (now - self._at) * self.qps)
            self._at = now

    def allow(self, now: float) -> bool:
        """Take a token when one is there (``Limiter.Allow``)."""
        if self.qps <= 0:
            return True
        self._refill(now)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def next_at(self, now: float) -> float:
        """When the next token will be there."""
        if self.qps <= 0:
            return now
        self._refill(now)
        return now if self._tokens >= 1.0 else now + (1.0 - self._tokens) / self.qps


@dataclass
class ObjectLimiter:
    """Per-workload (or namespace) migrations within a sliding window (``objectLimiters``)."""

    args: MigrationControllerArgs
    pod_filter: PodFilter
    _history: dict[str, list[float]] = field(default_factory=dict)

    def refusal(self, workload: Workload | None, namespace: str, now: float) -> str | None:
        for kind, lim in self.args.object_limiters.items():
            window = parse_duration(lim.duration)
            if window <= 0:
                continue
            if kind == WORKLOAD:
                if workload is None:
                    continue
                key = workload.key
                replicas = self.pod_filter.replicas_of(workload) or 0
                limit = (
                    scaled(lim.max_migrating, replicas, round_up=True)
                    if lim.max_migrating not in (None, 0)
                    else self.pod_filter.max_migrating(workload, replicas)
                )
            else:
                key = f"namespace/{namespace}"
                if lim.max_migrating in (None, 0):
                    continue
                limit = (
                    scaled(lim.max_migrating, 0, round_up=True) if isinstance(lim.max_migrating, int) else 0
                )
            recent = [t for t in self._history.get(key, []) if t > now - window]
            self._history[key] = recent
            if limit > 0 and len(recent) >= limit + max(lim.burst, 0):
                return f"objectLimiters[{kind}]: {len(recent)} migrations of {key} in the last {lim.duration}"
        return None

    def record(self, workload: Workload | None, namespace: str, now: float) -> None:
        if workload is not None:
            self._history.setdefault(workload.key, []).append(now)
        self._history.setdefault(f"namespace/{namespace}", []).append(now)
