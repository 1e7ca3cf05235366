"""An in-memory descheduler Handle for plugin tests, and builders for nodes, pods and NodeMetrics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from koordsched.api.core import Node, Pod
from koordsched.api.slo import NodeMetric
from koordsched.descheduler.framework import EvictOptions
from tests.builders import node as build_node
from tests.builders import pod as build_pod

T0 = 1_700_000_000.0
UPDATE = "2023-11-14T22:13:20Z"  # T0 as RFC 3339


def node(name: str, cpu: str = "10", memory: str = "100Gi", **extra: Any) -> Node:
    return build_node(name, cpu=cpu, memory=memory, **extra)


def pod(
    name: str,
    node_name: str,
    *,
    namespace: str = "default",
    owner: str | None = "rs",
    priority: int | None = None,
    labels: dict[str, str] | None = None,
    created: str = "2024-01-01T00:00:00Z",
    cpu: str = "1",
    memory: str = "1Gi",
    annotations: dict[str, str] | None = None,
    owner_kind: str = "ReplicaSet",
    volumes: list[dict[str, Any]] | None = None,
) -> Pod:
    owners = None
    if owner is not None:
        controller = {"apiVersion": "apps/v1", "kind": owner_kind, "name": owner, "uid": f"uid-{owner}"}
        owners = [{**controller, "controller": True}]
    return build_pod(
        name,
        cpu,
        memory,
        namespace=namespace,
        uid=f"uid-{name}",
        node_name=node_name,
        priority=priority,
        labels=labels,
        annotations=annotations,
        owners=owners,
        created=created,
        status={"phase": "Running"},
        **({"volumes": volumes} if volumes else {}),
    )


def metric(
    name: str,
    cpu: str,
    memory: str = "10Gi",
    pods: Sequence[tuple[Pod, str, str]] = (),
    update: str = UPDATE,
) -> NodeMetric:
    """A NodeMetric: node usage, and (pod, cpu, memory) per pod."""
    return msgspec.convert(
        {
            "metadata": {"name": name},
            "status": {
                "updateTime": update,
                "nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu, "memory": memory}}},
                "podsMetric": [
                    {
                        "namespace": p.metadata.namespace,
                        "name": p.metadata.name,
                        "podUsage": {"resources": {"cpu": c, "memory": m}},
                    }
                    for p, c, m in pods
                ],
            },
        },
        NodeMetric,
    )


@dataclass
class RecordingEvictor:
    refuse: set[str] = field(default_factory=set)
    evicted: list[tuple[str, EvictOptions]] = field(default_factory=list)

    def filter(self, pod: Pod) -> bool:
        return pod.metadata.name not in self.refuse

    def evict(self, pod: Pod, options: EvictOptions) -> bool:
        self.evicted.append((pod.metadata.name, options))
        return True


@dataclass
class ListFit:
    """Node fit answering from a fixed set of (pod, node) refusals."""

    refused: set[tuple[str, str]] = field(default_factory=set)

    def fits(self, pod: Pod, nodes: Sequence[str]) -> list[str]:
        return [n for n in nodes if (pod.metadata.name, n) not in self.refused]


@dataclass
class FakeHandle:
    nodes: list[Node]
    pods: list[Pod]
    metrics: dict[str, NodeMetric]
    now: float = T0
    evictor_impl: RecordingEvictor = field(default_factory=RecordingEvictor)
    fit: ListFit = field(default_factory=ListFit)

    def pods_on(self, node: str) -> list[Pod]:
        return [p for p in self.pods if p.spec.node_name == node]

    def node_metric(self, node: str) -> NodeMetric | None:
        return self.metrics.get(node)

    def wall(self) -> float:
        return self.now

    @property
    def evictor(self) -> RecordingEvictor:
        return self.evictor_impl

    @property
    def node_fit(self) -> ListFit:
        return self.fit
