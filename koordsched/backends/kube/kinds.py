"""The kinds the scheduler watches: where each lives in the API and which Struct it decodes into.

Adding a CRD is one line here (its Struct needs a ``metadata: ObjectMeta``) plus one in
:func:`koordsched.backends.kube.handlers.reflectors_for`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from koordsched.api.core import Node, ObjectMeta, Pod, PriorityClass
from koordsched.api.koordinator import Device, NodeResourceTopology
from koordsched.api.slo import NodeMetric


class KubeObject(Protocol):
    """Anything with standard object metadata."""

    @property
    def metadata(self) -> ObjectMeta: ...


T = TypeVar("T", bound=KubeObject)


@dataclass(frozen=True)
class ResourceKind(Generic[T]):
    """A watched collection: ``path`` is the all-namespaces collection URL.

    ``readers`` names the plugins that read the kind, for the log line when it is not served.
    """

    kind: str
    path: str
    type: type[T]
    namespaced: bool
    field_selector: str = ""
    label_selector: str = ""
    readers: tuple[str, ...] = ()

    def key(self, obj: KubeObject) -> str:
        """The store key: ``namespace/name``, or ``name`` for cluster-scoped kinds."""
        return self.key_of(obj.metadata.namespace, obj.metadata.name)

    def key_of(self, namespace: str, name: str) -> str:
        return f"{namespace}/{name}" if self.namespaced else name


#: All pods, bound or not (bound pods count on their node whoever scheduled them), except
#: finished ones, which kube-scheduler's informer leaves out the same way: a pod that finishes
#: arrives as DELETED, so its resources are released.
PODS = ResourceKind(
    "Pod", "/api/v1/pods", Pod, namespaced=True, field_selector="status.phase!=Succeeded,status.phase!=Failed"
)
NODES = ResourceKind("Node", "/api/v1/nodes", Node, namespaced=False)
PRIORITY_CLASSES = ResourceKind(
    "PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses", PriorityClass, namespaced=False
)
DEVICES = ResourceKind(
    "Device",
    "/apis/scheduling.koordinator.sh/v1alpha1/devices",
    Device,
    namespaced=False,
    readers=("DeviceShare",),
)
NODE_RESOURCE_TOPOLOGIES = ResourceKind(
    "NodeResourceTopology",
    "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies",
    NodeResourceTopology,
    namespaced=False,
    readers=("NodeNUMAResource",),
)
NODE_METRICS = ResourceKind(
    "NodeMetric",
    "/apis/slo.koordinator.sh/v1alpha1/nodemetrics",
    NodeMetric,
    namespaced=False,
    readers=("LoadAwareScheduling",),
)
