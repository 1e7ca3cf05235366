"""koord-descheduler's metrics, in the registry the serving port exposes.

``descheduler_pods_evicted`` is Koordinator's (and the Kubernetes descheduler's) counter, labelled
``result`` (``success``/``error``), ``strategy`` (the plugin that asked), ``namespace``, ``node``.
``descheduler_pod_migration_jobs`` (koordsched's) is the number of PodMigrationJobs by phase.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

SUCCESS = "success"
ERROR = "error"


class DeschedulerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.pods_evicted = Counter(
            "descheduler_pods_evicted",
            "Number of evicted pods, by the result, by the strategy, by the namespace, by the node name. "
            "'error' result means a pod could not be evicted",
            ["result", "strategy", "namespace", "node"],
            registry=registry,
        )
        self.migration_jobs = Gauge(
            "descheduler_pod_migration_jobs",
            "PodMigrationJobs this descheduler holds, by phase",
            ["phase"],
            registry=registry,
        )

    def evicted(self, ok: bool, strategy: str, namespace: str, node: str) -> None:
        self.pods_evicted.labels(SUCCESS if ok else ERROR, strategy, namespace, node).inc()

    def jobs(self, by_phase: dict[str, int]) -> None:
        for phase, n in by_phase.items():
            self.migration_jobs.labels(phase).set(n)
