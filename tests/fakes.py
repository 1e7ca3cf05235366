"""The fake scheduler handle (and its clock, binder and reservation nominator) that plugins are
called with in tests.

One handle does what the scheduler's does for a plugin: a snapshot, the watched kinds in
versioned ObjectStores, real waiting pods, the profile's plugins by name, recorded activations
and warnings. Tests fill it through ``put`` or ``objects(kind)[key] = obj``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from koordsched.api.core import Pod
from koordsched.api.kinds import ObjectKind
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Clock, WaitingPod
from koordsched.framework.objects import ObjectStore
from koordsched.framework.reservation_points import ReservationPoints
from koordsched.framework.reservations import NominatedReservation
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.types import BindingPlan, PodInfo
from koordsched.framework.waiting_pods import WaitingPods
from koordsched.observability.metrics import NullMetrics, PluginMetrics

#: FakeClock's wall time at ``t == 0``.
WALL_ZERO = 1_700_000_000.0


class FakeClock:
    """Monotonic time ``t`` (set it to move on); wall time is ``WALL_ZERO + t``."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def wall(self) -> float:
        return WALL_ZERO + self.t


class FakeBinder:
    """Records binds; raises ``error`` instead when one is set."""

    def __init__(self) -> None:
        self.bound: list[tuple[str, str, BindingPlan]] = []
        self.error: Exception | None = None

    async def bind(self, pod: Pod, node_name: str, plan: BindingPlan) -> None:
        if self.error is not None:
            raise self.error
        self.bound.append((pod.key, node_name, plan))


class FakeNominator:
    """The nominator point (the Reservation plugin's) answering what a test set: put it in a
    handle's ``plugin_map`` and the plugins that ask ``reservation_points()`` are told."""

    name = "Reservation"

    def __init__(
        self,
        by_node: Mapping[str, NominatedReservation] | None = None,
        allocated: NominatedReservation | None = None,
    ) -> None:
        self.by_node = dict(by_node or {})
        self.allocated = allocated

    def nominated_reservations(self, state: CycleState) -> Mapping[str, NominatedReservation]:
        return self.by_node

    def nominated_reservation(self, state: CycleState, node: str) -> NominatedReservation | None:
        a = self.allocated
        return a if a is not None and a.node == node else None


class FakeHandle:
    def __init__(
        self,
        snapshot: Snapshot | None = None,
        *,
        clock: Clock | None = None,
        stores: dict[str, ObjectStore] | None = None,
    ) -> None:
        self._snapshot = snapshot if snapshot is not None else Snapshot()
        self._clock: Any = clock if clock is not None else FakeClock()
        self._binder = FakeBinder()
        self._metrics: PluginMetrics = NullMetrics()
        #: Watched objects by kind name, as the scheduler keeps them (two handles may share them).
        self.stores: dict[str, ObjectStore] = stores if stores is not None else {}
        #: Pods waiting at Permit; tests add WaitingPodImpl objects.
        self.waiting = WaitingPods()
        #: The profile's plugins by name (``plugins()``).
        self.plugin_map: dict[str, Any] = {}
        #: Keys of the pods ``activate_pods`` was asked to move to the active queue.
        self.activated: list[str] = []
        #: (pod key, reason, message) of each ``warn``.
        self.warned: list[tuple[str, str, str]] = []
        #: Holder (a reservation's uid, or name) -> the pods allocated from it (``reserved_owners``).
        self.owners: dict[str, dict[str, PodInfo]] = {}

    @property
    def metrics(self) -> PluginMetrics:
        return self._metrics

    @metrics.setter
    def metrics(self, sink: PluginMetrics) -> None:
        self._metrics = sink

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def clock(self) -> Any:
        return self._clock

    @property
    def binder(self) -> FakeBinder:
        return self._binder

    @binder.setter
    def binder(self, binder: Any) -> None:
        """A binder with more of the port (e.g. ``FakeNodeLockBinder``'s node lock)."""
        self._binder = binder

    def warn(self, pod: Pod, reason: str, message: str) -> None:
        self.warned.append((pod.key, reason, message))

    def waiting_pod(self, uid: str) -> WaitingPod | None:
        return self.waiting.get(uid)

    def iterate_waiting_pods(self, fn: Callable[[WaitingPod], None]) -> None:
        for wp in self.waiting:
            fn(wp)

    def objects(self, kind: ObjectKind[Any]) -> Mapping[str, Any]:
        return self.store_for(kind)

    def store_for(self, kind: ObjectKind[Any]) -> ObjectStore:
        """The writable store behind ``objects(kind)``."""
        store = self.stores.get(kind.kind)
        if store is None:
            store = self.stores[kind.kind] = ObjectStore()
        return store

    def put(self, kind: ObjectKind[Any], *objs: Any) -> None:
        """Store objects (typed, or manifests decoded to the kind's type) under their keys."""
        store = self.store_for(kind)
        for obj in objs:
            decoded = obj if isinstance(obj, kind.type) else msgspec.convert(obj, kind.type)
            meta = decoded.metadata
            store[kind.key_of(meta.namespace, meta.name)] = decoded

    def activate_pods(self, pods: list[PodInfo]) -> None:
        self.activated.extend(p.key for p in pods)

    def plugins(self) -> Mapping[str, Any]:
        return self.plugin_map

    def reserved_owners(self, holder: str) -> Mapping[str, PodInfo]:
        return self.owners.get(holder, {})

    def reservation_points(self) -> ReservationPoints:
        # Found anew on each call: a test may add plugins to plugin_map at any time.
        return ReservationPoints(self.plugin_map.values())
