"""NodeMetric objects for a benchmark cluster, so LoadAwareScheduling has real work to do.

Each node gets a koordlet-style report: cpu usage between 5 % and 60 % of its allocatable and
memory between 10 % and 70 % (seeded, so runs compare), a 5-minute p95 aggregate, and one
``updateTime``. The simulator starts its clock at the newest ``updateTime`` in the input, so
the metrics are fresh for the whole run and every pod it places is estimated on top of them.
"""

from __future__ import annotations

import random
from typing import Any

import msgspec

from koordsched.api.core import Node
from koordsched.api.quantity import milli_value, parse_quantity
from koordsched.api.slo import NodeMetric
from koordsched.backends.sim.loader import Cluster, LoadedObject

UPDATE_TIME = "2026-11-01T10:00:00Z"


def _usage(rng: random.Random, node: Node) -> dict[str, str]:
    alloc = node.status.allocatable
    cpu_milli = milli_value(alloc.get("cpu", 0))
    memory = int(parse_quantity(alloc.get("memory", 0)))
    return {
        "cpu": f"{int(cpu_milli * rng.uniform(0.05, 0.60))}m",
        "memory": str(int(memory * rng.uniform(0.10, 0.70))),
    }


def add_node_metrics(cluster: Cluster, seed: int = 0) -> int:
    """Append one NodeMetric per Node in ``cluster``; returns how many were added."""
    rng = random.Random(seed)
    metrics: list[LoadedObject] = []
    for obj in cluster.objects:
        if obj.kind != "Node":
            continue
        node = obj.obj
        assert isinstance(node, Node)
        usage = _usage(rng, node)
        doc: dict[str, Any] = {
            "metadata": {"name": node.metadata.name},
            "spec": {"metricCollectPolicy": {"aggregateDurationSeconds": 300, "reportIntervalSeconds": 60}},
            "status": {
                "updateTime": UPDATE_TIME,
                "nodeMetric": {
                    "nodeUsage": {"resources": usage},
                    "aggregatedNodeUsages": [{"usage": {"p95": {"resources": usage}}, "duration": "5m0s"}],
                },
            },
        }
        metric = msgspec.convert(doc, NodeMetric)
        metrics.append(LoadedObject("NodeMetric", node.metadata.name, metric, "object", "bench"))
    cluster.objects.extend(metrics)
    return len(metrics)
