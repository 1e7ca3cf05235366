"""The kinds the scheduler watches: where each lives in the API and which Struct it decodes into.

The core kinds are here; the kinds plugins read come from their specs
(``Registry.object_kinds``, see :func:`plugin_kinds`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from koordsched.api.core import Node, ObjectMeta, Pod, PriorityClass
from koordsched.api.kinds import ObjectKind
from koordsched.api.sharing import NodeSharing, PodSharing
from koordsched.framework.registry import Registry


class KubeObject(Protocol):
    """Anything with standard object metadata."""

    @property
    def metadata(self) -> ObjectMeta: ...


T = TypeVar("T", bound=KubeObject)


@dataclass(frozen=True)
class ResourceKind(Generic[T]):
    """A watched collection: ``path`` is the all-namespaces collection URL.

    ``readers`` names the plugins that read the kind, for the log line when it is not served.
    ``optional``: a CRD the cluster may lack (see :attr:`ObjectKind.optional`).
    """

    kind: str
    path: str
    type: type[T]
    namespaced: bool
    field_selector: str = ""
    label_selector: str = ""
    readers: tuple[str, ...] = ()
    optional: bool = False
    #: Older collection URLs the reflector falls back to, in order, when ``path`` is not served.
    fallback_paths: tuple[str, ...] = ()
    #: Makes, per reflector, what each freshly decoded object goes through before it is stored:
    #: pods of one template then hold one copy of their spec, labels ... (``api.sharing``).
    sharing: Callable[[], Callable[[Any], Any]] | None = None

    def key(self, obj: KubeObject) -> str:
        """The store key: ``namespace/name``, or ``name`` for cluster-scoped kinds."""
        return self.key_of(obj.metadata.namespace, obj.metadata.name)

    def key_of(self, namespace: str, name: str) -> str:
        # Interned: the scheduler's PodInfo.key is the same string, held once for both.
        return sys.intern(f"{namespace}/{name}") if self.namespaced else name


#: All pods, bound or not (bound pods count on their node whoever scheduled them), except
#: finished ones, which kube-scheduler's informer leaves out the same way: a pod that finishes
#: arrives as DELETED, so its resources are released.
PODS = ResourceKind(
    "Pod",
    "/api/v1/pods",
    Pod,
    namespaced=True,
    field_selector="status.phase!=Succeeded,status.phase!=Failed",
    sharing=lambda: PodSharing().pod,
)
NODES = ResourceKind("Node", "/api/v1/nodes", Node, namespaced=False, sharing=lambda: NodeSharing().node)
PRIORITY_CLASSES = ResourceKind(
    "PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses", PriorityClass, namespaced=False
)


def plugin_kinds(
    registry: Registry, scopes: Mapping[str, tuple[str, str]] | None = None
) -> tuple[ResourceKind[Any], ...]:
    """The kinds the registry's plugins read, each with the names of its readers.

    Koordinator's CRDs are ``optional`` (a cluster may lack them: no Koordinator, no GPUs, no
    koordlet); the core and apps kinds (Namespaces, Services, ReplicaSets ...) are required.
    ``scopes`` (``Scheduler.watch_scopes``): kinds of which one object is read, watched alone.
    """
    scopes = scopes or {}
    return tuple(
        resource_kind(k, readers, scopes.get(k.kind)) for k, readers in registry.object_kinds().values()
    )


def resource_kind(
    kind: ObjectKind[Any], readers: tuple[str, ...] = (), scope: tuple[str, str] | None = None
) -> ResourceKind[Any]:
    """The watched collection of ``kind``; with ``scope`` (namespace, name) of a namespaced kind,
    that one object's namespace, filtered by name."""
    path, field_selector = kind.path, ""
    if scope is not None and kind.namespaced:
        namespace, name = scope
        base, plural = kind.path.rsplit("/", 1)
        path, field_selector = f"{base}/namespaces/{namespace}/{plural}", f"metadata.name={name}"
    return ResourceKind(
        kind.kind,
        path,
        kind.type,
        kind.namespaced,
        field_selector=field_selector,
        readers=readers,
        optional=kind.optional,
        fallback_paths=kind.fallback_paths,
    )
