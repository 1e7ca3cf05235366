"""The reservation shape of the decision benchmark (issue 14).

SchedulingBasic nodes (32 CPU, 256Gi, 110 pods) and, ahead of the pods, Reservations that
are scheduled like pods (reserve pods, highest priority) and then hold 4 CPU and 8Gi each for
their owners (``allocateOnce: false``, owner: the label ``resv-group: g<i>``). Every third pod
owns a reservation (1 CPU, 2Gi: up to four share one reservation); the others ask for 100m CPU
and 500Mi as in SchedulingBasic and may not use reserved capacity. At the end every owner must
have been allocated from its reservation (``reservation-allocated``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from koordsched.api.core import Node, Pod
from koordsched.api.reservation import Reservation
from koordsched.backends.sim.loader import Cluster, LoadedObject

GROUP = "resv-group"


def reservation_cluster(nodes: int, pods: int, reservations: int = 1000) -> Cluster:
    cluster = Cluster()
    alloc = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    for i in range(reservations):
        name = f"resv-{i}"
        r = msgspec.convert(
            {
                "metadata": {"name": name, "uid": f"resv-uid-{i}"},
                "spec": {
                    "template": {
                        "metadata": {"namespace": "bench"},
                        "spec": {
                            "schedulerName": "koord-scheduler",
                            "containers": [
                                {"name": "c", "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}
                            ],
                        },
                    },
                    "owners": [{"labelSelector": {"matchLabels": {GROUP: f"g{i}"}}}],
                    "allocateOnce": False,
                    "ttl": "0",
                },
            },
            Reservation,
        )
        cluster.objects.append(LoadedObject("Reservation", name, r, "object", "bench"))
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
        name = f"pod-{i}"
        owner = i % 3 == 0
        requests = {"cpu": "1", "memory": "2Gi"} if owner else {"cpu": "100m", "memory": "500Mi"}
        labels = {GROUP: f"g{(i // 3) % reservations}"} if owner else {}
        pod = msgspec.convert(
            {
                "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{i}", "labels": labels},
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "containers": [{"name": "c", "resources": {"requests": requests}}],
                },
            },
            Pod,
        )
        cluster.objects.append(LoadedObject("Pod", f"bench/{name}", pod, "pod", "bench"))
    return cluster


def owners_allocated(
    annotations: Mapping[str, Mapping[str, str]], labels: Mapping[str, Any]
) -> tuple[int, int]:
    """(owner pods, owner pods allocated from a reservation) among the results."""
    owners = [k for k, lab in labels.items() if GROUP in lab]
    allocated = sum(
        1 for k in owners if "scheduling.koordinator.sh/reservation-allocated" in annotations.get(k, {})
    )
    return len(owners), allocated
