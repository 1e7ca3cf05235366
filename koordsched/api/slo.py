"""NodeMetric (``slo.koordinator.sh/v1alpha1``, cluster-scoped, name = node name), as koordlet reports it.

LoadAwareScheduling reads it: the node's usage (now and aggregated over windows), each pod's
usage, and when it was last updated. Field names follow Koordinator v1.6's JSON (spec 3.6).
Quantities stay as the API server sends them; the plugin parses them once per update.
"""

from __future__ import annotations

from typing import Any

import msgspec

from koordsched.api.core import ObjectMeta, ResourceList

#: Aggregation types of ``aggregatedNodeUsages[].usage`` keys.
AGGREGATION_TYPES = ("avg", "p50", "p90", "p95", "p99")


class _Base(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    pass


class ResourceMap(_Base):
    resources: ResourceList = {}
    #: Per-device usage; not read by the scheduler, kept opaque.
    devices: list[dict[str, Any]] = []


class AggregatedUsage(_Base):
    #: Aggregation type (``avg``, ``p50``, ...) -> usage.
    usage: dict[str, ResourceMap] = {}
    #: A Go duration string (``5m0s``); empty when unset.
    duration: str = ""


class NodeMetricInfo(_Base):
    node_usage: ResourceMap = msgspec.field(default_factory=ResourceMap)
    aggregated_node_usages: list[AggregatedUsage] = []
    system_usage: ResourceMap = msgspec.field(default_factory=ResourceMap)
    aggregated_system_usages: list[AggregatedUsage] = []


class PodMetricInfo(_Base):
    name: str = ""
    namespace: str = ""
    pod_usage: ResourceMap = msgspec.field(default_factory=ResourceMap)
    priority: str = ""
    qos: str = ""
    extensions: dict[str, Any] | None = None


class AggregatePolicy(_Base):
    durations: list[str] = []


class NodeMetricCollectPolicy(_Base):
    aggregate_duration_seconds: int | None = None
    report_interval_seconds: int | None = None
    node_aggregate_policy: AggregatePolicy | None = None
    node_memory_collect_policy: str | None = None


class NodeMetricSpec(_Base):
    metric_collect_policy: NodeMetricCollectPolicy | None = None


class ReclaimableMetric(_Base):
    resource: ResourceMap = msgspec.field(default_factory=ResourceMap)


class NodeMetricStatus(_Base):
    #: RFC 3339 (``metav1.Time``); None when koordlet has not reported yet.
    update_time: str | None = None
    node_metric: NodeMetricInfo | None = None
    pods_metric: list[PodMetricInfo] = []
    prod_reclaimable_metric: ReclaimableMetric | None = None
    host_application_metric: list[dict[str, Any]] = []


class NodeMetric(_Base):
    api_version: str = "slo.koordinator.sh/v1alpha1"
    kind: str = "NodeMetric"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: NodeMetricSpec = msgspec.field(default_factory=NodeMetricSpec)
    status: NodeMetricStatus = msgspec.field(default_factory=NodeMetricStatus)
