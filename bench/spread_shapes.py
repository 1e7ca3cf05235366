"""Topology spread shapes of the decision benchmark, after kube-scheduler's scheduler_perf.

Nodes as in SchedulingBasic (32 CPU, 256Gi, 110 pods, a hostname label) spread round-robin
over three zones (``topology.kubernetes.io/zone``: moon-1, moon-2, moon-3, as scheduler_perf
labels them); pods ask for 100m CPU and 500Mi and carry the label ``color: blue``:

* ``spread`` (TopologySpreading, with the issue's maxSkew 1 instead of the template's 5):
  ``maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule`` selecting ``color: blue``;
  at the end the three zones' counts must differ by at most one;
* ``preferred-spread`` (PreferredTopologySpreading's template): the same constraint with
  ``maxSkew: 5`` and ``ScheduleAnyway``;
* ``default-spread`` (DefaultTopologySpreading): no constraint of its own, but a Service selects
  ``color: blue``, so the system default constraints (hostname maxSkew 3, zone maxSkew 5, both
  ScheduleAnyway) apply with the Service's selector.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import msgspec

from koordsched.api.core import Node, Pod
from koordsched.api.workloads import Service
from koordsched.backends.sim.loader import Cluster, LoadedObject

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
ZONES = ("moon-1", "moon-2", "moon-3")
NAMESPACE = "service-ns"
LABELS = {"color": "blue"}


def zone_of(node_name: str) -> str:
    """The zone the shapes give ``node-<i>``."""
    return ZONES[int(node_name.rsplit("-", 1)[1]) % len(ZONES)]


def _nodes(cluster: Cluster, count: int) -> None:
    alloc = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    for i in range(count):
        name = f"node-{i}"
        node = msgspec.convert(
            {
                "metadata": {"name": name, "labels": {HOSTNAME: name, ZONE: ZONES[i % len(ZONES)]}},
                "status": {"allocatable": alloc, "capacity": alloc},
            },
            Node,
        )
        cluster.objects.append(LoadedObject("Node", name, node, "node", "bench"))


def _pods(cluster: Cluster, count: int, constraints: list[dict[str, Any]]) -> None:
    for i in range(count):
        name = f"spreading-pod-{i}"
        spec: dict[str, Any] = {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}],
        }
        if constraints:
            spec["topologySpreadConstraints"] = constraints
        meta = {"name": name, "namespace": NAMESPACE, "uid": f"uid-{i}", "labels": LABELS}
        pod = msgspec.convert({"metadata": meta, "spec": spec}, Pod)
        cluster.objects.append(LoadedObject("Pod", f"{NAMESPACE}/{name}", pod, "pod", "bench"))


def _constraint(max_skew: int, when: str) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": max_skew,
            "topologyKey": ZONE,
            "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": dict(LABELS)},
        }
    ]


def spread(nodes: int, pods: int) -> Cluster:
    cluster = Cluster()
    _nodes(cluster, nodes)
    _pods(cluster, pods, _constraint(1, "DoNotSchedule"))
    return cluster


def preferred_spread(nodes: int, pods: int) -> Cluster:
    cluster = Cluster()
    _nodes(cluster, nodes)
    _pods(cluster, pods, _constraint(5, "ScheduleAnyway"))
    return cluster


def default_spread(nodes: int, pods: int) -> Cluster:
    cluster = Cluster()
    service = msgspec.convert(
        {"metadata": {"name": "service", "namespace": NAMESPACE}, "spec": {"selector": dict(LABELS)}}, Service
    )
    cluster.objects.append(LoadedObject("Service", f"{NAMESPACE}/service", service, "object", "bench"))
    _nodes(cluster, nodes)
    _pods(cluster, pods, [])
    return cluster


SHAPES: dict[str, Callable[[int, int], Cluster]] = {
    "spread": spread,
    "preferred-spread": preferred_spread,
    "default-spread": default_spread,
}


def zone_counts(placements: dict[str, str | None]) -> dict[str, int]:
    """Pods per zone, from pod key -> node name (unscheduled pods left out)."""
    return dict(sorted(Counter(zone_of(n) for n in placements.values() if n is not None).items()))
