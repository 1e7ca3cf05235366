"""One copy of what many pods hold alike, so a large cluster costs memory per pod, not per field.

Pods of one Deployment, Job or benchmark template arrive with the same spec, labels, owner and
status; decoded one by one, each would hold its own copy of every string, dict and Struct (about
2.5 KB for a small pod). :class:`PodSharing` swaps each such part of a freshly decoded pod for
an equal one it has seen before, so the pod keeps only what is its own (name, uid, resource
version).

This is safe because nothing changes a decoded object in place: every change to a pod is a new
object (``msgspec.structs.replace``), as it is a new version in the API server. The tables are
bounded: once one holds ``limit`` entries it starts again empty, so a cluster whose pods are all
different pays a little CPU and holds at most ``limit`` parts alive that no pod uses any more.
"""

from __future__ import annotations

import sys
from typing import Any, TypeVar

import msgspec

from koordsched.api.core import Node, OwnerReference, Pod, PodSpec, PodStatus

#: Entries per table before it starts again (a few MB at most).
DEFAULT_LIMIT = 4096
#: Bound specs (one per template and node) kept before the table starts again: one template
#: on 15,000 nodes still fits.
BOUND_LIMIT = 16384

V = TypeVar("V")

#: The one empty labels/annotations dict and owner list of shared pods (never changed in place).
_NO_STRINGS: dict[str, str] = {}
_NO_OWNERS: list[OwnerReference] = []

_encode = msgspec.msgpack.Encoder().encode


class _Table:
    """Equal values by their encoding: one of each kept."""

    __slots__ = ("_seen", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._seen: dict[bytes, Any] = {}

    def get(self, value: V) -> V:
        try:
            key = _encode(value)
        except (OverflowError, TypeError, ValueError):
            return value  # e.g. an integer past 64 bits (refused later, by the field's check)
        found = self._seen.get(key)
        if found is not None:
            return found  # type: ignore[no-any-return]
        if len(self._seen) >= self.limit:
            self._seen.clear()
        self._seen[key] = value
        return value

    def __len__(self) -> int:
        return len(self._seen)


class _Strings:
    """Equal strings: one of each kept (not interned: most are dropped with their pod)."""

    __slots__ = ("_seen", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._seen: dict[str, str] = {}

    def get(self, value: str) -> str:
        found = self._seen.get(value)
        if found is not None:
            return found
        if len(self._seen) >= self.limit:
            self._seen.clear()
        self._seen[value] = value
        return value

    def __len__(self) -> int:
        return len(self._seen)


class PodSharing:
    """Shares the spec, status, labels, annotations, owner references, creation time and
    generateName of pods that agree on them.

    :meth:`pod` must be given a pod nobody else holds yet (just decoded): it swaps the parts in
    place rather than copying the pod.
    """

    __slots__ = ("_bound", "_bound_limit", "_dicts", "_owners", "_specs", "_statuses", "_strings")

    def __init__(self, limit: int = DEFAULT_LIMIT, bound_limit: int = BOUND_LIMIT) -> None:
        self._specs = _Table(limit)
        self._statuses = _Table(limit)
        self._dicts = _Table(limit)
        self._owners = _Table(limit)
        self._strings = _Strings(limit)
        # (id of the template, node) -> (template, the bound spec): the template is held so
        # that its id stays its own while the entry lives.
        self._bound: dict[tuple[int, str], tuple[PodSpec, PodSpec]] = {}
        self._bound_limit = bound_limit

    def pod(self, pod: Pod) -> Pod:
        meta = pod.metadata
        meta.namespace = sys.intern(meta.namespace)
        # Pods created together share their creation second; replicas share their generateName.
        if meta.creation_timestamp:
            meta.creation_timestamp = self._strings.get(meta.creation_timestamp)
        if meta.generate_name:
            meta.generate_name = self._strings.get(meta.generate_name)
        # Decoders make a new string per object: "v1" and "Pod" cost some 100 bytes a pod.
        pod.api_version = sys.intern(pod.api_version)
        pod.kind = sys.intern(pod.kind)
        # A decoder gives every pod its own empty dict or list where the field is absent (some
        # 120 bytes a pod for annotations and owner references): empty ones are shared too.
        meta.labels = self._dicts.get(meta.labels) if meta.labels else _NO_STRINGS
        meta.annotations = self._dicts.get(meta.annotations) if meta.annotations else _NO_STRINGS
        owners = meta.owner_references
        meta.owner_references = self._owners.get(owners) if owners else _NO_OWNERS
        pod.spec = self.spec(pod.spec)
        pod.status = self._statuses.get(pod.status)
        return pod

    def spec(self, spec: PodSpec) -> PodSpec:
        """An equal spec seen before, else ``spec`` (kept for the next).

        A bound pod's spec differs from its template's only in ``nodeName``, so a cluster's
        bound pods have as many distinct specs as (template, node) pairs, more than a table
        keeps (5,000 nodes, one template). A bound spec is therefore made from the shared
        unbound one (its containers, tolerations ... are the template's), once per node.
        """
        node = spec.node_name
        if not node:
            return self._specs.get(spec)
        template = self._specs.get(msgspec.structs.replace(spec, node_name=""))
        key = (id(template), node)
        found = self._bound.get(key)
        if found is not None and found[0] is template:
            return found[1]
        bound = msgspec.structs.replace(template, node_name=node)
        if len(self._bound) >= self._bound_limit:
            self._bound.clear()
        self._bound[key] = (template, bound)
        return bound

    def status(self, status: PodStatus) -> PodStatus:
        """An equal status seen before, else ``status`` (kept for the next)."""
        return self._statuses.get(status)

    def sizes(self) -> dict[str, int]:
        """Entries per table (tests, logs)."""
        return {
            "specs": len(self._specs),
            "statuses": len(self._statuses),
            "dicts": len(self._dicts),
            "owners": len(self._owners),
            "bound": len(self._bound),
            "strings": len(self._strings),
        }


class NodeSharing:
    """Shares what nodes of one kind agree on: their status (else its capacity, allocatable,
    conditions and each image entry) and their taints.

    Labels are left alone (``kubernetes.io/hostname`` makes them differ). :meth:`node` must be
    given a node nobody else holds yet (just decoded): it swaps the parts in place.
    """

    __slots__ = ("_dicts", "_images", "_lists", "_statuses")

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._statuses = _Table(limit)
        self._dicts = _Table(limit)
        self._lists = _Table(limit)
        self._images = _Table(limit)

    def node(self, node: Node) -> Node:
        node.api_version = sys.intern(node.api_version)
        node.kind = sys.intern(node.kind)
        status = self._statuses.get(node.status)
        if status is node.status:  # not seen whole: its parts may have been
            status.capacity = self._dicts.get(status.capacity)
            status.allocatable = self._dicts.get(status.allocatable)
            status.conditions = self._lists.get(status.conditions)
            if status.images:
                # Image lists differ from node to node; their entries mostly do not.
                status.images = [self._images.get(image) for image in status.images]
        node.status = status
        node.spec.taints = self._lists.get(node.spec.taints)
        return node

    def sizes(self) -> dict[str, int]:
        """Entries per table (tests, logs)."""
        return {
            "statuses": len(self._statuses),
            "dicts": len(self._dicts),
            "lists": len(self._lists),
            "images": len(self._images),
        }
