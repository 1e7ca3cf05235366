"""The framework handle: what plugins see of the scheduler (``framework.interface.Handle``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from koordsched.api.kinds import ObjectKind
from koordsched.framework.interface import Binder, Clock, Plugin, WaitingPod
from koordsched.framework.objects import ObjectStore
from koordsched.framework.runtime import Framework
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.types import PodInfo
from koordsched.framework.waiting_pods import WaitingPods
from koordsched.scheduler.cache import Cache

T = TypeVar("T")


class FrameworkHandle:
    """One per profile. The scheduler's parts are shared by every profile's handle.

    ``activate`` is the queue's, given once the queue exists (it is built from the
    frameworks, which are built with their handles).
    """

    def __init__(
        self,
        cache: Cache,
        clock: Clock,
        binder: Binder,
        waiting_pods: WaitingPods,
        objects: dict[str, dict[str, Any]],
    ) -> None:
        self._cache = cache
        self._clock = clock
        self._binder = binder
        self._waiting = waiting_pods
        self._objects = objects
        self.framework: Framework | None = None
        self.activate: Callable[[list[PodInfo]], None] | None = None

    def plugins(self) -> Mapping[str, Plugin]:
        # Plugins are built before the framework holding them exists: empty until then.
        return self.framework.plugins if self.framework is not None else {}

    @property
    def snapshot(self) -> Snapshot:
        return self._cache.snapshot

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def binder(self) -> Binder:
        return self._binder

    def waiting_pod(self, uid: str) -> WaitingPod | None:
        return self._waiting.get(uid)

    def iterate_waiting_pods(self, fn: Callable[[WaitingPod], None]) -> None:
        for wp in self._waiting:
            fn(wp)

    def objects(self, kind: ObjectKind[T]) -> Mapping[str, T]:
        # on_object stores only objects of the kind's declared type under a declared kind.
        store = self._objects.get(kind.kind)
        if store is None:
            # A versioned store, so plugins can tell when to rebuild an index of it.
            store = self._objects[kind.kind] = ObjectStore()
        return cast("Mapping[str, T]", store)

    def activate_pods(self, pods: list[PodInfo]) -> None:
        if self.activate is not None:
            self.activate(pods)

    def lend_reserved(self, holders: list[str]) -> None:
        self._cache.lend(holders)

    def allocate_from(self, pod_uid: str, holder: str | None) -> None:
        self._cache.allocate_from(pod_uid, holder)

    def reserved_owners(self, holder: str) -> Mapping[str, PodInfo]:
        return self._cache.owners_of(holder)
