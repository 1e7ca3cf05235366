"""Builders for the ElasticQuota plugin tests: quotas, pods in namespaces, a handle with a store."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec

from koordsched.api.core import Pod
from koordsched.api.elastic_quota import (
    ANNOTATION_NAMESPACES,
    ANNOTATION_SHARED_WEIGHT,
    LABEL_ALLOW_LENT_RESOURCE,
    LABEL_IS_PARENT,
    LABEL_PARENT,
    LABEL_POD_PREEMPTIBLE,
    LABEL_QUOTA_NAME,
    ElasticQuota,
)
from koordsched.api.resources import pod_requests
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.types import PodInfo
from koordsched.plugins.elasticquota import ElasticQuotaArgs, ElasticQuotaPlugin
from tests.builders import make_node
from tests.fakes import FakeHandle


def quota(
    name: str,
    namespace: str = "",
    *,
    max: Mapping[str, Any] | None = None,
    min: Mapping[str, Any] | None = None,
    parent: str = "",
    is_parent: bool = False,
    allow_lent: bool | None = None,
    shared_weight: Mapping[str, Any] | None = None,
    namespaces: list[str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> ElasticQuota:
    all_labels = dict(labels or {})
    if parent:
        all_labels[LABEL_PARENT] = parent
    if is_parent:
        all_labels[LABEL_IS_PARENT] = "true"
    if allow_lent is not None:
        all_labels[LABEL_ALLOW_LENT_RESOURCE] = "true" if allow_lent else "false"
    annotations: dict[str, str] = {}
    if shared_weight is not None:
        annotations[ANNOTATION_SHARED_WEIGHT] = json.dumps(dict(shared_weight))
    if namespaces is not None:
        annotations[ANNOTATION_NAMESPACES] = json.dumps(namespaces)
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": namespace or name,
                "labels": all_labels,
                "annotations": annotations,
            },
            "spec": {"max": dict(max or {}), "min": dict(min or {})},
        },
        ElasticQuota,
    )


def qpod(
    name: str,
    namespace: str = "default",
    cpu: str = "1",
    *,
    quota_name: str = "",
    non_preemptible: bool = False,
    memory: str | None = None,
) -> PodInfo:
    labels: dict[str, str] = {}
    if quota_name:
        labels[LABEL_QUOTA_NAME] = quota_name
    if non_preemptible:
        labels[LABEL_POD_PREEMPTIBLE] = "false"
    requests = {"cpu": cpu}
    if memory is not None:
        requests["memory"] = memory
    pod = msgspec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{namespace}-{name}",
                "labels": labels,
            },
            "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
        },
        Pod,
    )
    return PodInfo(pod, pod_requests(pod))


def cluster(cpu_per_node: int, nodes: int = 1) -> FakeHandle:
    """A handle over ``nodes`` nodes of ``cpu_per_node`` cores each (64 GiB memory each)."""
    snap = Snapshot()
    for i in range(nodes):
        snap.add_node(make_node(f"n{i}"), {"cpu": cpu_per_node * 1000, "memory": 64 * 1024**3, "pods": 110})
    return FakeHandle(snap)


def plugin(handle: FakeHandle, **args: Any) -> ElasticQuotaPlugin:
    return ElasticQuotaPlugin(msgspec.convert(args, ElasticQuotaArgs), handle)
