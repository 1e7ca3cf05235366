"""Gang shapes of the decision benchmark (Coscheduling), after scheduler_perf's gang workloads.

Nodes as in SchedulingBasic (32 CPU, 256Gi, 110 pods); pods ask for 100m CPU and 500Mi, in
gangs of ``GANG_SIZE`` (10) pods, so 10,000 pods make 1,000 gangs:

* ``gang``: one PodGroup (``minMember: 10``) per gang, pods labelled
  ``pod-group.scheduling.sigs.k8s.io``; every member waits at Permit until its gang's tenth is
  assumed, then the ten bind together;
* ``gang-annotations``: the same gangs declared by pod annotations
  (``gang.scheduling.koordinator.sh/name`` and ``min-available``), no PodGroup objects.

Members of a gang are listed apart (gang by gang, round-robin) so the queue, not the input
order, has to bring them together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from koordsched.api.core import Node, Pod
from koordsched.api.podgroup import PodGroup
from koordsched.backends.sim.loader import Cluster, LoadedObject

NAMESPACE = "gang-ns"
GANG_SIZE = 10


def _nodes(cluster: Cluster, count: int) -> None:
    alloc = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    for i in range(count):
        name = f"node-{i}"
        node = msgspec.convert(
            {
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": alloc, "capacity": alloc},
            },
            Node,
        )
        cluster.objects.append(LoadedObject("Node", name, node, "node", "bench"))


def _gangs(cluster: Cluster, pods: int, pod_groups: bool) -> None:
    gangs = max(1, pods // GANG_SIZE)
    if pod_groups:
        for g in range(gangs):
            pg = msgspec.convert(
                {"metadata": {"name": f"gang-{g}", "namespace": NAMESPACE}, "spec": {"minMember": GANG_SIZE}},
                PodGroup,
            )
            cluster.objects.append(LoadedObject("PodGroup", f"{NAMESPACE}/gang-{g}", pg, "object", "bench"))
    for i in range(pods):
        g = i % gangs
        name = f"gang-{g}-pod-{i // gangs}"
        meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE, "uid": f"uid-{i}"}
        if pod_groups:
            meta["labels"] = {"pod-group.scheduling.sigs.k8s.io": f"gang-{g}"}
        else:
            meta["annotations"] = {
                "gang.scheduling.koordinator.sh/name": f"gang-{g}",
                "gang.scheduling.koordinator.sh/min-available": str(GANG_SIZE),
            }
        spec = {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}],
        }
        pod = msgspec.convert({"metadata": meta, "spec": spec}, Pod)
        cluster.objects.append(LoadedObject("Pod", f"{NAMESPACE}/{name}", pod, "pod", "bench"))


def gang(nodes: int, pods: int) -> Cluster:
    cluster = Cluster()
    _nodes(cluster, nodes)
    _gangs(cluster, pods, pod_groups=True)
    return cluster


def gang_annotations(nodes: int, pods: int) -> Cluster:
    cluster = Cluster()
    _nodes(cluster, nodes)
    _gangs(cluster, pods, pod_groups=False)
    return cluster


SHAPES: dict[str, Callable[[int, int], Cluster]] = {"gang": gang, "gang-annotations": gang_annotations}
