"""The preemption shape of the decision benchmark (issue 12), after scheduler_perf's PreemptionBasic.

Every node (4 CPU, 32Gi, room for 110 pods) is full of low-priority pods, bound in the input:
four of 900m CPU and 500Mi each, priority 0, started at different times. The pods to schedule
are high-priority preemptors (priority 1000) asking 3 CPU and 500Mi: none fits anywhere, so each
one's first attempt runs DefaultPreemption (a dry run over max(10 %, 100) nodes, three victims
per node: 400m free plus three 900m victims), deletes its victims, and is nominated; its second
attempt binds it on the nominated node. scheduler_perf's PreemptionBasic uses 500 nodes, 2,000
low-priority pods and 500 preemptors; the issue asks for 5,000 nodes and 2,000 preemptors.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from koordsched.api.core import Node, Pod
from koordsched.backends.sim.loader import Cluster, LoadedObject

LOW_PER_NODE = 4
NAMESPACE = "preemption"


def _pod(name: str, cpu: str, priority: int, node: str = "", started: int = 0) -> Pod:
    spec: dict[str, object] = {
        "schedulerName": "koord-scheduler",
        "priority": priority,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "500Mi"}}}],
    }
    body: dict[str, object] = {
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"},
        "spec": spec,
    }
    if node:
        spec["nodeName"] = node
        minute, second = divmod(started % 3600, 60)
        body["status"] = {"phase": "Running", "startTime": f"2026-01-01T00:{minute:02d}:{second:02d}Z"}
    return msgspec.convert(body, Pod)


def preemption(nodes: int, pods: int) -> Cluster:
    cluster = Cluster()
    alloc = {"cpu": "4", "memory": "32Gi", "pods": "110"}
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
    k = 0
    for i in range(nodes):
        for _ in range(LOW_PER_NODE):
            low = _pod(f"low-{k}", "900m", 0, f"node-{i}", started=k)
            cluster.objects.append(LoadedObject("Pod", f"{NAMESPACE}/low-{k}", low, "pod", "bench"))
            k += 1
    for i in range(pods):
        high = _pod(f"high-{i}", "3", 1000)
        cluster.objects.append(LoadedObject("Pod", f"{NAMESPACE}/high-{i}", high, "pod", "bench"))
    return cluster


SHAPES: dict[str, Callable[[int, int], Cluster]] = {"preemption": preemption}
