"""``/metrics/resources``: kube-scheduler's ``kube_pod_resource_request`` and ``kube_pod_resource_limit``.

kube-scheduler serves these on a path of their own (pkg/scheduler/metrics/resources), computed
from its pod lister at every scrape: one series per pod and resource, labelled ``namespace``,
``pod``, ``node`` (empty while pending), ``scheduler`` (``spec.schedulerName``), ``priority``
(``spec.priority``, empty when unset), ``resource`` and ``unit``. The value is the pod's effective
request (or limit) as the scheduler and kubelet count it: containers and sidecars summed, the
largest init step, plus overhead. Zero amounts are left out, as upstream leaves them out.

The scheduler hands in :class:`PodResources` rows with amounts in its canonical integers (CPU in
millicores, everything else in base units); this module only turns them into samples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import msgspec
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

LABELS = ("namespace", "pod", "node", "scheduler", "priority", "resource", "unit")
REQUEST = "kube_pod_resource_request"
LIMIT = "kube_pod_resource_limit"
_REQUEST_HELP = (
    "[STABLE] Resources requested by workloads on the cluster, broken down by pod. This shows the "
    "resource usage the scheduler and kubelet expect per pod for resources along with the unit for "
    "the resource if any."
)
_LIMIT_HELP = (
    "[STABLE] Resources limit for workloads on the cluster, broken down by pod. This shows the "
    "resource usage the scheduler and kubelet expect per pod for resources along with the unit for "
    "the resource if any."
)


class PodResources(msgspec.Struct, frozen=True):
    """One pod as ``/metrics/resources`` reports it; amounts in canonical integers."""

    namespace: str
    name: str
    node: str
    scheduler: str
    priority: int | None
    requests: Mapping[str, int]
    limits: Mapping[str, int]


def unit_of(resource: str) -> str:
    """kube-scheduler's unit label: cores, bytes, integer (attachable volumes), else empty."""
    if resource == "cpu":
        return "cores"
    if resource in ("memory", "storage", "ephemeral-storage") or resource.startswith("hugepages-"):
        return "bytes"
    if resource.startswith("attachable-volumes-"):
        return "integer"
    return ""


def _value(resource: str, amount: int) -> float:
    # CPU is held in millicores; the metric is in cores, as Quantity.AsApproximateFloat64 gives it.
    return amount / 1000 if resource == "cpu" else float(amount)


class PodResourcesCollector:
    """The two families, computed from ``track``'s source whenever the registry is collected."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._source: Callable[[], Iterable[PodResources]] | None = None
        registry.register(self)

    def track(self, source: Callable[[], Iterable[PodResources]]) -> None:
        self._source = source

    def describe(self) -> list[Metric]:
        return [
            GaugeMetricFamily(REQUEST, _REQUEST_HELP, labels=LABELS),
            GaugeMetricFamily(LIMIT, _LIMIT_HELP, labels=LABELS),
        ]

    def collect(self) -> list[Metric]:
        requests = GaugeMetricFamily(REQUEST, _REQUEST_HELP, labels=LABELS)
        limits = GaugeMetricFamily(LIMIT, _LIMIT_HELP, labels=LABELS)
        pods = list(self._source()) if self._source is not None else []
        for pod in pods:
            priority = "" if pod.priority is None else str(pod.priority)
            head = [pod.namespace, pod.name, pod.node, pod.scheduler, priority]
            for family, amounts in ((requests, pod.requests), (limits, pod.limits)):
                for resource, amount in sorted(amounts.items()):
                    if amount:
                        family.add_metric([*head, resource, unit_of(resource)], _value(resource, amount))
        return [requests, limits]
