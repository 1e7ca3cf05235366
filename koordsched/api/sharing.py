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

from koordsched.api.core import OwnerReference, Pod, PodSpec, PodStatus

#: Entries per table before it starts again (a few MB at most).
DEFAULT_LIMIT = 4096

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


class PodSharing:
    """Shares the spec, status, labels, annotations and owner references of pods that agree on them.

    :meth:`pod` must be given a pod nobody else holds yet (just decoded): it swaps the parts in
    place rather than copying the pod.
    """

    __slots__ = ("_dicts", "_owners", "_specs", "_statuses")

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._specs = _Table(limit)
        self._statuses = _Table(limit)
        self._dicts = _Table(limit)
        self._owners = _Table(limit)

    def pod(self, pod: Pod) -> Pod:
        meta = pod.metadata
        meta.namespace = sys.intern(meta.namespace)
        # Decoders make a new string per object: "v1" and "Pod" cost some 100 bytes a pod.
        pod.api_version = sys.intern(pod.api_version)
        pod.kind = sys.intern(pod.kind)
        # A decoder gives every pod its own empty dict or list where the field is absent (some
        # 120 bytes a pod for annotations and owner references): empty ones are shared too.
        meta.labels = self._dicts.get(meta.labels) if meta.labels else _NO_STRINGS
        meta.annotations = self._dicts.get(meta.annotations) if meta.annotations else _NO_STRINGS
        owners = meta.owner_references
        meta.owner_references = self._owners.get(owners) if owners else _NO_OWNERS
        pod.spec = self._specs.get(pod.spec)
        pod.status = self._statuses.get(pod.status)
        return pod

    def spec(self, spec: PodSpec) -> PodSpec:
        """An equal spec seen before, else ``spec`` (kept for the next)."""
        return self._specs.get(spec)

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
        }
