"""client-go's rest-client metrics on any registry, for a component that only talks to the API server.

The descheduler serves its own registry (not the scheduler's families), yet its API client is
timed the same way; these are the two families client-go registers through
component-base/metrics/prometheus/restclient, with their names, help texts, labels and buckets.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from koordsched.observability.fastmetrics import CounterChild, FastCounter, FastHistogram, HistogramChild
from koordsched.observability.metric_families import REST_CLIENT_LATENCY_BUCKETS


class RestClientFamilies:
    """``rest_client_requests_total`` and ``rest_client_request_duration_seconds``; satisfies
    :class:`~koordsched.observability.metrics.RestClientMetrics`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = FastCounter(
            "rest_client_requests_total",
            "[ALPHA] Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"],
            registry=registry,
        )
        self.request_duration = FastHistogram(
            "rest_client_request_duration_seconds",
            "[ALPHA] Request latency in seconds. Broken down by verb, and host.",
            ["verb", "host"],
            buckets=REST_CLIENT_LATENCY_BUCKETS,
            registry=registry,
        )
        self._children: dict[tuple[str, str, str], tuple[CounterChild, HistogramChild]] = {}

    def observe_rest_request(self, verb: str, code: str, host: str, seconds: float) -> None:
        """One API request: client-go labels ``method`` and ``verb`` both with the HTTP method."""
        key = (verb, code, host)
        children = self._children.get(key)
        if children is None:
            children = (self.requests.labels(code, verb, host), self.request_duration.labels(verb, host))
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)
