"""A small cluster for LoadAwareScheduling tests: nodes, NodeMetrics in the handle's store, pods.

Wall time is fixed at ``NOW`` (Unix seconds) unless a test moves ``cluster.clock.t``;
NodeMetric update times and pod assign times are given relative to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec
import numpy as np

from koordsched.api.core import Node
from koordsched.api.kinds import NODE_METRICS
from koordsched.api.resources import resource_list
from koordsched.api.slo import NodeMetric
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.types import PodInfo
from koordsched.plugins.loadaware import LoadAwareScheduling, LoadAwareSchedulingArgs
from tests.builders import container, node, pod, pod_info
from tests.fakes import FakeHandle

NOW = 1_700_000_000.0
GI = 1024**3
MI = 1024**2


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Clock:
    def __init__(self) -> None:
        self.t = NOW

    def now(self) -> float:
        return self.t - NOW

    def wall(self) -> float:
        return self.t


def make_node(
    name: str, cpu: str = "10", memory: str = "10Gi", annotations: dict[str, str] | None = None
) -> Node:
    return node(name, cpu, memory, annotations=annotations, hostname=False, capacity=False)


def usage(cpu: str | None = None, memory: str | None = None) -> dict[str, Any]:
    resources = {}
    if cpu is not None:
        resources["cpu"] = cpu
    if memory is not None:
        resources["memory"] = memory
    return {"resources": resources}


def make_metric(
    name: str,
    *,
    age: float | None = 10.0,
    cpu: str | None = None,
    memory: str | None = None,
    aggregated: list[dict[str, Any]] | None = None,
    pods: list[dict[str, Any]] | None = None,
    report_interval: int | None = None,
    node_metric: bool = True,
    raw_node_usage: dict[str, Any] | None = None,
) -> NodeMetric:
    """A NodeMetric updated ``age`` seconds before NOW (None: never), using ``cpu``/``memory``."""
    status: dict[str, Any] = {}
    if age is not None:
        status["updateTime"] = rfc3339(NOW - age)
    if node_metric:
        status["nodeMetric"] = {
            "nodeUsage": raw_node_usage if raw_node_usage is not None else usage(cpu, memory),
            "aggregatedNodeUsages": aggregated or [],
        }
    if pods:
        status["podsMetric"] = pods
    spec: dict[str, Any] = {}
    if report_interval is not None:
        spec["metricCollectPolicy"] = {"reportIntervalSeconds": report_interval}
    return msgspec.convert({"metadata": {"name": name}, "spec": spec, "status": status}, NodeMetric)


def pod_metric(
    name: str, cpu: str | None = None, memory: str | None = None, priority: str = ""
) -> dict[str, Any]:
    return {"name": name, "namespace": "default", "podUsage": usage(cpu, memory), "priority": priority}


def make_pod(
    name: str = "pod",
    requests: Mapping[str, str] | None = None,
    *,
    limits: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    node: str = "",
    scheduled_at: float | None = None,
    owner_kind: str = "",
    priority: int | None = None,
    init_requests: Mapping[str, str] | None = None,
    overhead: Mapping[str, str] | None = None,
) -> PodInfo:
    """A pod; ``scheduled_at`` (wall seconds) is its PodScheduled condition's transition time,
    ``owner_kind`` the kind of its owner."""
    spec: dict[str, Any] = {}
    if init_requests is not None:
        spec["initContainers"] = [container("init", init_requests)]
    if overhead is not None:
        spec["overhead"] = dict(overhead)
    status = None
    if scheduled_at is not None:
        condition = {"type": "PodScheduled", "status": "True", "lastTransitionTime": rfc3339(scheduled_at)}
        status = {"conditions": [condition]}
    owners = [{"kind": owner_kind, "name": "owner", "apiVersion": "apps/v1"}] if owner_kind else None
    return pod_info(
        pod(
            name,
            uid=f"uid-{name}",
            scheduler=None,
            labels=labels,
            node_name=node,
            priority=priority,
            owners=owners,
            status=status,
            containers=[container("c", requests, limits=limits or {})],
            **spec,
        )
    )


def one_cpu_pod(name: str = "p", **kw: Any) -> PodInfo:
    """The tests' standard incoming pod: 1 cpu, 1Gi memory."""
    return make_pod(name, {"cpu": "1", "memory": "1Gi"}, **kw)


#: Labels making a pod koord-batch / koord-free / koord-prod (unlabelled pods with requests are
#: Burstable, hence LS, hence koord-prod by default).
BATCH = {"koordinator.sh/priority-class": "koord-batch"}
FREE = {"koordinator.sh/priority-class": "koord-free"}
PROD = {"koordinator.sh/priority-class": "koord-prod"}
MID = {"koordinator.sh/priority-class": "koord-mid"}


class Cluster:
    def __init__(self, args: LoadAwareSchedulingArgs | None = None, **arg_fields: Any) -> None:
        if args is None:
            args = (
                msgspec.convert(arg_fields, LoadAwareSchedulingArgs)
                if arg_fields
                else LoadAwareSchedulingArgs()
            )
        self.handle = FakeHandle(clock=Clock())
        self.snap = self.handle.snapshot
        self.clock = self.handle.clock
        self.plugin = LoadAwareScheduling(args, self.handle)

    def add_node(self, name: str, cpu: str = "10", memory: str = "10Gi", **kw: Any) -> None:
        node = make_node(name, cpu, memory, **kw)
        self.snap.add_node(node, resource_list(node.status.allocatable))

    def set_metric(self, metric: NodeMetric | None, name: str | None = None) -> None:
        """Put (or, with None, delete) a node's NodeMetric as ``EventHandlers.on_object`` does."""
        store = self.handle.store_for(NODE_METRICS)
        key = name if metric is None else metric.metadata.name
        assert key is not None
        if metric is None:
            store.pop(key, None)
        else:
            store[key] = metric
        self.snap.touch(key)

    def place(self, pod: PodInfo, node: str) -> PodInfo:
        self.snap.add_pod(self.snap.by_name[node], pod)
        return pod

    def rows(self) -> np.ndarray:
        return np.arange(self.snap.n, dtype=np.int64)

    def filter(self, pod: PodInfo) -> dict[str, str | None]:
        """Node -> None if the pod passes there, else the reason."""
        state = CycleState()
        codes = self.plugin.filter_batch(state, pod, self.rows())
        out: dict[str, str | None] = {}
        for info, code in zip(self.snap.infos, codes.tolist(), strict=True):
            if code == 0:
                out[info.name] = None
            else:
                status = self.plugin.explain(state, pod, int(code))
                assert status.rejected, status.message()
                out[info.name] = status.message()
        return out

    def scores(self, pod: PodInfo) -> dict[str, int]:
        scores = self.plugin.score_batch(CycleState(), pod, self.rows())
        return {info.name: int(s) for info, s in zip(self.snap.infos, scores.tolist(), strict=True)}
