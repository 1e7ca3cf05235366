"""Kinds of objects that plugins read besides Pods, Nodes and PriorityClasses (CRDs, mostly).

A plugin's spec names the kinds it reads (``PluginSpec.kinds``); the scheduler and both
backends learn from there what to watch or load, how to key and check each object and
whether it belongs to one node. Nothing outside this module and the plugins names a kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from koordsched.api.koordinator import Device, NodeResourceTopology
from koordsched.api.node_metric import parse_node_metric
from koordsched.api.slo import NodeMetric
from koordsched.api.transform import rewrite_device


@dataclass(frozen=True)
class ObjectKind:
    """One kind: its Struct, where the API server serves it and how the scheduler treats it."""

    kind: str
    type: type[Any]
    #: The all-namespaces collection URL.
    path: str
    namespaced: bool
    #: One object per node, named after it: a change to the object is a change to that node.
    per_node: bool = False
    #: Checks values the Struct cannot (quantities, timestamps); raises ValueError naming the field.
    check: Callable[[Any], object] | None = None
    #: Rewrites an object on the way in, as koord-scheduler's informer transformers do.
    rewrite: Callable[[Any], Any] | None = None

    def key_of(self, namespace: str, name: str) -> str:
        """The store key: ``namespace/name``, or ``name`` for cluster-scoped kinds."""
        return f"{namespace}/{name}" if self.namespaced else name


DEVICES = ObjectKind(
    "Device",
    Device,
    "/apis/scheduling.koordinator.sh/v1alpha1/devices",
    namespaced=False,
    per_node=True,
    rewrite=rewrite_device,
)
NODE_RESOURCE_TOPOLOGIES = ObjectKind(
    "NodeResourceTopology",
    NodeResourceTopology,
    "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies",
    namespaced=False,
    per_node=True,
)
NODE_METRICS = ObjectKind(
    "NodeMetric",
    NodeMetric,
    "/apis/slo.koordinator.sh/v1alpha1/nodemetrics",
    namespaced=False,
    per_node=True,
    check=parse_node_metric,
)
