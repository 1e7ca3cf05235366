"""ElasticQuota shapes of the decision benchmark.

``quota-tree``: nodes as in SchedulingBasic (32 CPU, 256Gi, 110 pods) and 100 ElasticQuotas in a
tree: 10 parents (``org-<p>``, max 108 cpu, min 45 cpu) under the root, each with 9 leaves
(``team-<p>-<l>``, max 12 cpu, min 5 cpu, in a namespace of the same name, so pods are charged to
them without a label). The pods (100m CPU, 500Mi, as SchedulingBasic) are spread round-robin over
the 90 leaves: at 10,000 pods a leaf asks 11.1 cpu, within its max, so every pod binds and the
time is the quota bookkeeping's (PreFilter against the runtime quota, Reserve, the runtime
computed when requests change), not failed attempts. ``quota-capped`` is the same with leaves of
max 10 cpu: about 10 % of the pods stay Pending with ``Insufficient quotas``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from koordsched.api.core import Node, Pod
from koordsched.api.elastic_quota import LABEL_IS_PARENT, LABEL_PARENT, ElasticQuota
from koordsched.backends.sim.loader import Cluster, LoadedObject

PARENTS = 10
LEAVES = 9


def _quota(name: str, max_cpu: int, min_cpu: int, labels: dict[str, str]) -> LoadedObject:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": name, "labels": labels},
        "spec": {"max": {"cpu": str(max_cpu), "memory": "10Ti"}, "min": {"cpu": str(min_cpu)}},
    }
    return LoadedObject(
        "ElasticQuota", f"{name}/{name}", msgspec.convert(body, ElasticQuota), "object", "bench"
    )


def _cluster(nodes: int, pods: int, leaf_max: int) -> Cluster:
    cluster = Cluster()
    leaves: list[str] = []
    for p in range(PARENTS):
        parent = f"org-{p}"
        cluster.objects.append(_quota(parent, leaf_max * LEAVES, 45, {LABEL_IS_PARENT: "true"}))
        for leaf in range(LEAVES):
            name = f"team-{p}-{leaf}"
            leaves.append(name)
            cluster.objects.append(_quota(name, leaf_max, 5, {LABEL_PARENT: parent}))
    alloc = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    for i in range(nodes):
        name = f"node-{i}"
        node = msgspec.convert(
            {
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": alloc, "capacity": alloc},
            },
            Node,
        )
        cluster.objects.append(LoadedObject("Node", name, node, "node", "bench"))
    for i in range(pods):
        ns = leaves[i % len(leaves)]
        name = f"pod-{i}"
        pod = msgspec.convert(
            {
                "metadata": {"name": name, "namespace": ns, "uid": f"uid-{i}"},
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "containers": [
                        {"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}
                    ],
                },
            },
            Pod,
        )
        cluster.objects.append(LoadedObject("Pod", f"{ns}/{name}", pod, "pod", "bench"))
    return cluster


def quota_tree(nodes: int, pods: int) -> Cluster:
    return _cluster(nodes, pods, 12)


def quota_capped(nodes: int, pods: int) -> Cluster:
    return _cluster(nodes, pods, 10)


SHAPES: dict[str, Callable[[int, int], Cluster]] = {"quota-tree": quota_tree, "quota-capped": quota_capped}
