"""Inter-pod affinity shapes of the decision benchmark, after kube-scheduler's scheduler_perf.

Nodes as in SchedulingBasic (32 CPU, 256Gi, 110 pods, a hostname label); pods ask for 100m CPU
and 500Mi, in the namespace ``sched-1``, and carry:

* ``antiaffinity`` (SchedulingPodAntiAffinity's template): the label ``color: green`` and a
  required anti-affinity to ``color: green`` on ``kubernetes.io/hostname``, so every pod needs a
  node of its own;
* ``preferred-affinity`` (SchedulingPreferredPodAffinity's template): the label ``color: red``
  and a preferred (weight 1) affinity to ``color: red`` on ``kubernetes.io/hostname``.

Both terms name the namespaces ``sched-0`` and ``sched-1``, as the templates do.
"""

from __future__ import annotations

from typing import Any

import msgspec

from koordsched.api.core import Node, Pod
from koordsched.backends.sim.loader import Cluster, LoadedObject

HOSTNAME = "kubernetes.io/hostname"
NAMESPACE = "sched-1"


def _nodes(cluster: Cluster, count: int) -> None:
    alloc = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    for i in range(count):
        name = f"node-{i}"
        node = msgspec.convert(
            {
                "metadata": {"name": name, "labels": {HOSTNAME: name}},
                "status": {"allocatable": alloc, "capacity": alloc},
            },
            Node,
        )
        cluster.objects.append(LoadedObject("Node", name, node, "node", "bench"))


def _pods(
    cluster: Cluster, count: int, prefix: str, labels: dict[str, str], affinity: dict[str, Any]
) -> None:
    for i in range(count):
        name = f"{prefix}-{i}"
        pod = msgspec.convert(
            {
                "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{i}", "labels": labels},
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "affinity": affinity,
                    "containers": [
                        {"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}
                    ],
                },
            },
            Pod,
        )
        cluster.objects.append(LoadedObject("Pod", f"{NAMESPACE}/{name}", pod, "pod", "bench"))


def _term(color: str) -> dict[str, Any]:
    return {
        "labelSelector": {"matchLabels": {"color": color}},
        "topologyKey": HOSTNAME,
        "namespaces": ["sched-1", "sched-0"],
    }


def antiaffinity_cluster(nodes: int, pods: int) -> Cluster:
    cluster = Cluster()
    _nodes(cluster, nodes)
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("green")]}}
    _pods(cluster, pods, "anti-affinity-pod", {"color": "green", "name": "test"}, anti)
    return cluster


def preferred_affinity_cluster(nodes: int, pods: int) -> Cluster:
    cluster = Cluster()
    _nodes(cluster, nodes)
    preferred = {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": _term("red")}
            ]
        }
    }
    _pods(cluster, pods, "preferred-affinity-pod", {"color": "red"}, preferred)
    return cluster


#: Shape name -> builder, for ``decision.py --affinity``.
SHAPES = {"antiaffinity": antiaffinity_cluster, "preferred-affinity": preferred_affinity_cluster}
