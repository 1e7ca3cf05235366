"""The framework handle: what plugins see of the scheduler (``framework.interface.Handle``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from koordsched.api.core import Pod
from koordsched.api.kinds import ObjectKind
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.diagnosis import Diagnosis
from koordsched.framework.interface import (
    Binder,
    Clock,
    Codes,
    NodeStatusMap,
    NodeTrial,
    Plugin,
    Rows,
    WaitingPod,
)
from koordsched.framework.nominated import Trial, run_filters_with_nominated
from koordsched.framework.objects import ObjectStore
from koordsched.framework.reservation_points import ReservationPoints
from koordsched.framework.runtime import Framework
from koordsched.framework.snapshot import NodeInfo, Snapshot
from koordsched.framework.status import Status
from koordsched.framework.types import PodInfo
from koordsched.framework.waiting_pods import WaitingPods
from koordsched.observability.metrics import NullMetrics, PluginMetrics
from koordsched.scheduler.cache import Cache

T = TypeVar("T")

_NO_POINTS = ReservationPoints()


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
        metrics: PluginMetrics | None = None,
        warn: Callable[[Pod, str, str], None] | None = None,
    ) -> None:
        self._cache = cache
        self._clock = clock
        self._binder = binder
        self._waiting = waiting_pods
        self._objects = objects
        self._metrics: PluginMetrics = metrics if metrics is not None else NullMetrics()
        self.framework: Framework | None = None
        self.activate: Callable[[list[PodInfo]], None] | None = None
        #: The output port's ``warn`` (a Warning event), where the port has one.
        self._warn = warn

    def plugins(self) -> Mapping[str, Plugin]:
        # Plugins are built before the framework holding them exists: empty until then.
        return self.framework.plugins if self.framework is not None else {}

    def reservation_points(self) -> ReservationPoints:
        # As plugins(): none until the framework holding the plugins exists.
        return self.framework.reservation_points if self.framework is not None else _NO_POINTS

    @property
    def snapshot(self) -> Snapshot:
        return self._cache.snapshot

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def binder(self) -> Binder:
        return self._binder

    @property
    def metrics(self) -> PluginMetrics:
        return self._metrics

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

    def warn(self, pod: Pod, reason: str, message: str) -> None:
        if self._warn is not None:
            self._warn(pod, reason, message)

    def _fw(self) -> Framework:
        if self.framework is None:
            raise RuntimeError("the handle's framework is not built yet")
        return self.framework

    def run_filters_with_nominated(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return run_filters_with_nominated(self._fw(), state, pod, node)

    def node_trial(self, state: CycleState, node: NodeInfo) -> NodeTrial:
        return Trial(self._fw(), state, node)

    def is_assumed(self, uid: str) -> bool:
        return self._cache.is_assumed(uid)

    def nominated_node(self, pod: PodInfo) -> str:
        return self._fw().cluster_pods.node_of(pod.uid) or pod.pod.status.nominated_node_name

    def filter_rows(self, state: CycleState, pod: PodInfo, rows: Rows) -> tuple[Rows, NodeStatusMap]:
        fw = self._fw()
        diagnosis = Diagnosis(num_all_nodes=len(rows))
        feasible = fw.filter_rows(state, pod, rows, diagnosis)
        return feasible, diagnosis.node_statuses(state, pod, self._cache.snapshot)

    def pre_filter_extensions_active(self, state: CycleState) -> bool:
        return self._fw().pre_filter_extensions_active(state)

    def filter_copies(self, state: CycleState, pods: Sequence[PodInfo], rows: Rows) -> Codes | None:
        return self._fw().filter_copies(state, pods, rows)

    def lend_reserved(self, holders: list[str]) -> None:
        self._cache.lend(holders)

    def allocate_from(self, pod_uid: str, holder: str | None) -> None:
        self._cache.allocate_from(pod_uid, holder)

    def reserved_owners(self, holder: str) -> Mapping[str, PodInfo]:
        return self._cache.owners_of(holder)
