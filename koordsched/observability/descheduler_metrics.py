"""koord-descheduler's ``/metrics``: its own registry, with descheduler series only.

The descheduler embeds a scheduler for its cache and node-fit checks, but that scheduler never
schedules: its ``scheduler_*`` series would show this process as a scheduler with pending pods
in the scheduler's dashboard. So the descheduler serves this registry instead:

* ``descheduler_pods_evicted`` (Koordinator's, and the Kubernetes descheduler's): eviction
  answers labelled ``result`` (``success``/``error``), ``strategy`` (the plugin that asked),
  ``namespace`` and ``node`` (the pod's). A counter without ``_total``, as Go's client names it;
* ``descheduler_pod_migration_jobs`` (koordsched's): the leader's PodMigrationJobs by phase;
* ``leader_election_master_status{name="koord-descheduler"}``: 1 while this process leads, 0 while
  it stands by (client-go's gauge, named by koord-descheduler's election config, not the Lease);
* client-go's ``rest_client_*`` for the descheduler's API client;
* prometheus-client's process, platform and garbage-collector collectors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

# The private name is metric_families' collector for Go counters without ``_total``.
from koordsched.observability.metric_families import _BareCounterVec
from koordsched.observability.rest_client_metrics import RestClientFamilies

if TYPE_CHECKING:
    from koordsched.observability.metrics import MetricsExposition, RestClientMetrics

SUCCESS: Final = "success"
ERROR: Final = "error"
PODS_EVICTED: Final = "descheduler_pods_evicted"
LEADER_ELECTION_MASTER_STATUS: Final = "leader_election_master_status"
#: koord-descheduler's ``LeaderElectionConfig.Name``: the gauge's ``name``, whatever the Lease is called.
LEADER_ELECTION_NAME: Final = "koord-descheduler"

# prometheus-client writes a counter's TYPE line under ``<name>_total``, so the bare counter is
# collected untyped and its TYPE line set to Go's ``counter`` in the exposition.
_UNTYPED_LINE: Final = f"# TYPE {PODS_EVICTED} untyped\n".encode()
_COUNTER_LINE: Final = f"# TYPE {PODS_EVICTED} counter\n".encode()


class DeschedulerMetrics:
    """The descheduler's families on ``registry`` (a private one by default)."""

    def __init__(self, registry: CollectorRegistry | None = None, *, process_metrics: bool = False) -> None:
        reg = CollectorRegistry() if registry is None else registry
        self.registry = reg
        if process_metrics:
            ProcessCollector(registry=reg)
            PlatformCollector(registry=reg)
            GCCollector(registry=reg)
        self.pods_evicted = _BareCounterVec(
            PODS_EVICTED,
            "[ALPHA] Number of evicted pods, by the result, by the strategy, by the namespace, by the node "
            "name. 'error' result means a pod could not be evicted",
            ["result", "strategy", "namespace", "node"],
            registry=reg,
        )
        self.migration_jobs = Gauge(
            "descheduler_pod_migration_jobs",
            "PodMigrationJobs this descheduler holds, by phase",
            ["phase"],
            registry=reg,
        )
        self.leader_status = Gauge(
            LEADER_ELECTION_MASTER_STATUS,
            "[ALPHA] Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
            "1 indicates master. 'name' is the string used to identify the lease. Please make sure to "
            "group by name.",
            ["name"],
            registry=reg,
        )
        self.rest_client = RestClientFamilies(reg)

    def evicted(self, ok: bool, strategy: str, namespace: str, node: str) -> None:
        self.pods_evicted.inc(SUCCESS if ok else ERROR, strategy, namespace, node)

    def jobs(self, by_phase: dict[str, int]) -> None:
        for phase, n in by_phase.items():
            self.migration_jobs.labels(phase).set(n)

    def set_leader_status(self, name: str, leading: bool) -> None:
        """client-go's switch: 0 once the elector exists (a standby), 1 from the acquire, 0 when lost."""
        self.leader_status.labels(name).set(1 if leading else 0)

    # --- the API client (RestClientMetrics) ---

    def observe_rest_request(self, verb: str, code: str, host: str, seconds: float) -> None:
        self.rest_client.observe_rest_request(verb, code, host, seconds)

    # --- export (MetricsExposition) ---

    def exposition(self) -> bytes:
        """The registry in Prometheus text format, as ``/metrics`` serves it."""
        return generate_latest(self.registry).replace(_UNTYPED_LINE, _COUNTER_LINE, 1)

    def resources_exposition(self) -> bytes:
        """``/metrics/resources`` is kube-scheduler's pod resource report: nothing for a descheduler."""
        return b""


if TYPE_CHECKING:
    # Static proof that DeschedulerMetrics is what the serving port and the API client take.
    _REST: type[RestClientMetrics] = DeschedulerMetrics
    _EXPOSITION: type[MetricsExposition] = DeschedulerMetrics
