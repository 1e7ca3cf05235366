"""Small builders so tests read like manifests."""

from __future__ import annotations

from typing import Any

import msgspec

from koordsched.api.core import Node, Pod


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: int = 110, **extra: Any) -> Node:
    labels = extra.pop("labels", {})
    taints = extra.pop("taints", [])
    unschedulable = extra.pop("unschedulable", False)
    alloc = {"cpu": cpu, "memory": memory, "pods": str(pods), **extra}
    return msgspec.convert(
        {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "spec": {"taints": taints, "unschedulable": unschedulable},
            "status": {"allocatable": alloc, "capacity": alloc},
        },
        Node,
    )


def pod(
    name: str,
    cpu: str | None = "100m",
    memory: str | None = "128Mi",
    *,
    namespace: str = "default",
    scheduler: str = "koord-scheduler",
    node_name: str = "",
    priority: int | None = None,
    **spec: Any,
) -> Pod:
    requests: dict[str, Any] = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    requests.update(spec.pop("requests", {}))
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "resources": {"requests": requests}}],
            **spec,
        },
    }
    if node_name:
        body["spec"]["nodeName"] = node_name
    if priority is not None:
        body["spec"]["priority"] = priority
    return msgspec.convert(body, Pod)
