"""The scheduling queue: activeQ, backoffQ, unschedulable pods and gated pods.

Semantics follow kube-scheduler's PriorityQueue:

* activeQ is ordered by the QueueSort plugin's key, then by arrival;
* a pod that failed goes to backoffQ if a cluster event arrived while it was being
  scheduled (it may fit now) or if it failed with an error, else to the unschedulable
  set, where it waits for an event that one of its rejecting plugins cares about, or
  for ``unschedulable_timeout`` (5 min);
* backoff is ``initial * 2^(attempts-1)`` capped at ``max``;
* PreEnqueue plugins (scheduling gates) keep a pod out of activeQ entirely.

The queue does no I/O and reads time from the injected clock, so the simulator can
run it on virtual time. ``wait`` is the only coroutine: the kube backend's loop
sleeps on it; the simulator never needs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Iterable
from typing import Any

from sortedcontainers import SortedList

from koordsched.framework.interface import Clock, ClusterEventWithHint
from koordsched.framework.status import Status
from koordsched.framework.types import ActionType, ClusterEvent, PodInfo
from koordsched.observability.metrics import NullMetrics, QueueMetrics

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"

#: kube-scheduler's podMaxInUnschedulablePodsDuration.
UNSCHEDULABLE_TIMEOUT = 300.0

#: ``hint`` label values of scheduler_queueing_hint_execution_duration_seconds.
HINT_QUEUE = "Queue"
HINT_QUEUE_SKIP = "QueueSkip"
HINT_ERROR = "Error"


class SchedulingQueue:
    def __init__(
        self,
        *,
        sort_key: Callable[[PodInfo], Any],
        pre_enqueue: Callable[[PodInfo], Status],
        clock: Clock,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        unschedulable_timeout: float = UNSCHEDULABLE_TIMEOUT,
        events: dict[str, list[ClusterEventWithHint] | None] | None = None,
        metrics: QueueMetrics | None = None,
    ) -> None:
        self._sort_key = sort_key
        self._pre_enqueue = pre_enqueue
        self.clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.unschedulable_timeout = unschedulable_timeout
        #: plugin name -> events it registered; None = interested in every event.
        self._events = events or {}
        #: (resource, action) -> the plugins that registered no event of that kind (see ``_deaf``).
        self._deaf_by_event: dict[tuple[str, ActionType], frozenset[str]] = {}
        #: Pods put into the unschedulable set so far; (resource, action) -> that count when an
        #: event of that kind last found every unschedulable pod deaf to it.
        self._unschedulable_added = 0
        self._deaf_since: dict[tuple[str, ActionType], int] = {}
        self.metrics: QueueMetrics = metrics or NullMetrics()
        # scheduler_pending_pods is read at scrape time: no gauge write on every queue move.
        self.metrics.track_pending(self.counts)
        self.metrics.track_unschedulable_plugins(self.unschedulable_by_plugin)
        self._seq = itertools.count()
        self._active: SortedList = SortedList()
        self._active_keys: dict[str, tuple[Any, int, str]] = {}
        self._backoff: SortedList = SortedList()
        self._backoff_keys: dict[str, tuple[float, int, str]] = {}
        self._unschedulable: dict[str, PodInfo] = {}
        self._gated: dict[str, PodInfo] = {}
        #: gating plugin -> how many pods it gates (events no gating plugin listens to skip the gate).
        self._gated_by: dict[str, int] = {}
        self._pods: dict[str, PodInfo] = {}
        #: uid -> the scheduling cycle in which the pod was popped.
        self._in_flight: dict[str, int] = {}
        self.scheduling_cycle = 0
        self._move_request_cycle = -1
        self._wakeup: asyncio.Event | None = None
        self.closed = False

    # --- introspection -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, uid: object) -> bool:
        return uid in self._pods

    def get(self, uid: str) -> PodInfo | None:
        return self._pods.get(uid)

    def counts(self) -> dict[str, int]:
        return {
            ACTIVE: len(self._active),
            BACKOFF: len(self._backoff),
            UNSCHEDULABLE: len(self._unschedulable),
            GATED: len(self._gated),
        }

    def unschedulable_by_plugin(self) -> dict[tuple[str, str], int]:
        """(plugin, profile) -> queued pods that plugin rejected in their last attempt or gates.

        kube-scheduler's ``scheduler_unschedulable_pods``: counted from a failed attempt (or a
        PreEnqueue rejection) until the pod is popped again; a pod in flight is not counted.
        """
        counts: dict[tuple[str, str], int] = {}
        for pod in self._pods.values():
            plugins = pod.unschedulable_plugins
            if pod.gated and pod.gating_plugin and pod.gating_plugin not in plugins:
                plugins = {*plugins, pod.gating_plugin}
            if not plugins:
                continue
            profile = pod.pod.spec.scheduler_name
            for plugin in plugins:
                key = (plugin, profile)
                counts[key] = counts.get(key, 0) + 1
        return counts

    def where(self, uid: str) -> str | None:
        if uid in self._active_keys:
            return ACTIVE
        if uid in self._backoff_keys:
            return BACKOFF
        if uid in self._unschedulable:
            return UNSCHEDULABLE
        if uid in self._gated:
            return GATED
        if uid in self._in_flight:
            return "in-flight"
        return None

    def pending(self) -> list[PodInfo]:
        return list(self._pods.values())

    # --- internal moves ------------------------------------------------------------------------

    def _to_active(self, pod: PodInfo, event: str) -> None:
        key = (self._sort_key(pod), next(self._seq), pod.uid)
        self._active.add(key)
        self._active_keys[pod.uid] = key
        self.metrics.incoming(ACTIVE, event)
        if self._wakeup is not None:
            self._wakeup.set()

    def _to_backoff(self, pod: PodInfo, event: str) -> None:
        key = (self.backoff_expiry(pod), next(self._seq), pod.uid)
        self._backoff.add(key)
        self._backoff_keys[pod.uid] = key
        self.metrics.incoming(BACKOFF, event)
        if self._wakeup is not None:
            self._wakeup.set()

    def _detach(self, uid: str) -> None:
        key = self._active_keys.pop(uid, None)
        if key is not None:
            self._active.remove(key)
        bkey = self._backoff_keys.pop(uid, None)
        if bkey is not None:
            self._backoff.remove(bkey)
        self._unschedulable.pop(uid, None)
        self._ungate(uid)

    def _ungate(self, uid: str) -> None:
        pod = self._gated.pop(uid, None)
        if pod is not None:
            plugin = pod.gating_plugin or ""
            left = self._gated_by[plugin] - 1
            if left:
                self._gated_by[plugin] = left
            else:
                del self._gated_by[plugin]

    def backoff_duration(self, pod: PodInfo) -> float:
        if pod.attempts <= 0:
            return 0.0
        duration = self.initial_backoff
        for _ in range(1, pod.attempts):
            duration *= 2
            if duration > self.max_backoff:
                return self.max_backoff
        return min(duration, self.max_backoff)

    def backoff_expiry(self, pod: PodInfo) -> float:
        return pod.timestamp + self.backoff_duration(pod)

    def _is_backing_off(self, pod: PodInfo) -> bool:
        return self.backoff_expiry(pod) > self.clock.now()

    def _gate_or_activate(self, pod: PodInfo, event: str) -> None:
        status = self._pre_enqueue(pod)
        if status.ok:
            pod.gated = False
            pod.gating_plugin = None
            pod.gating_message = ""
            self._to_active(pod, event)
        else:
            pod.gated = True
            pod.gating_plugin = status.plugin
            pod.gating_message = status.message()
            self._gated[pod.uid] = pod
            plugin = status.plugin or ""
            self._gated_by[plugin] = self._gated_by.get(plugin, 0) + 1
            self.metrics.incoming(GATED, event)

    # --- public API ----------------------------------------------------------------------------

    def add(self, pod: PodInfo) -> None:
        """A new pending pod (PodAdd)."""
        if pod.uid in self._pods or pod.uid in self._in_flight:
            self.update(pod)
            return
        pod.timestamp = self.clock.now()
        self._pods[pod.uid] = pod
        self._gate_or_activate(pod, "PodAdd")

    def update(self, pod: PodInfo) -> None:
        """The pending pod changed: it may no longer be gated, or may now fit."""
        old = self._pods.get(pod.uid)
        if old is None:
            if pod.uid in self._in_flight:
                # Being scheduled right now; the cycle's outcome decides where it goes next.
                self._move_request_cycle = self.scheduling_cycle
                return
            self.add(pod)
            return
        pod.timestamp = old.timestamp
        pod.attempts = old.attempts
        pod.initial_attempt_timestamp = old.initial_attempt_timestamp
        pod.unschedulable_plugins = old.unschedulable_plugins
        where = self.where(pod.uid)
        self._detach(pod.uid)
        self._pods[pod.uid] = pod
        if where in (GATED, UNSCHEDULABLE):
            if where == UNSCHEDULABLE and self._is_backing_off(pod):
                self._to_backoff(pod, "UnscheduledPodUpdate")
            else:
                self._gate_or_activate(pod, "UnscheduledPodUpdate")
        elif where == BACKOFF:
            self._to_backoff(pod, "UnscheduledPodUpdate")
        else:
            self._to_active(pod, "UnscheduledPodUpdate")

    def delete(self, uid: str) -> PodInfo | None:
        pod = self._pods.pop(uid, None)
        self._detach(uid)
        self._in_flight.pop(uid, None)
        return pod

    def pop(self) -> PodInfo | None:
        """The next pod to schedule, or None when activeQ is empty. Starts a new cycle."""
        if not self._active:
            return None
        _, _, uid = self._active.pop(0)
        del self._active_keys[uid]
        pod = self._pods.pop(uid)
        self.scheduling_cycle += 1
        self._in_flight[uid] = self.scheduling_cycle
        pod.attempts += 1
        if pod.initial_attempt_timestamp is None:
            pod.initial_attempt_timestamp = self.clock.now()
        return pod

    def done(self, uid: str) -> None:
        """The pod's cycle ended (bound, or requeued through :meth:`requeue_failed`)."""
        self._in_flight.pop(uid, None)

    def requeue_failed(self, pod: PodInfo, *, error: bool = False) -> str | None:
        """Put back a pod whose attempt failed; returns the queue it went to.

        A pod deleted, or bound by someone else, while its attempt was in flight has left
        the queue (:meth:`delete`): it is not brought back (None), as upstream's
        handleSchedulingFailure does not requeue a pod that is gone or assigned.
        """
        cycle = self._in_flight.pop(pod.uid, None)
        if cycle is None:
            return None
        pod.timestamp = self.clock.now()
        self._pods[pod.uid] = pod
        if error or not pod.unschedulable_plugins or self._move_request_cycle >= cycle:
            self._to_backoff(pod, "ScheduleAttemptFailure")
            where = BACKOFF
        else:
            self._unschedulable[pod.uid] = pod
            self._unschedulable_added += 1
            self.metrics.incoming(UNSCHEDULABLE, "ScheduleAttemptFailure")
            where = UNSCHEDULABLE
        return where

    def flush_backoff_completed(self) -> int:
        now = self.clock.now()
        moved = 0
        while self._backoff and self._backoff[0][0] <= now:
            _, _, uid = self._backoff.pop(0)
            del self._backoff_keys[uid]
            self._to_active(self._pods[uid], "BackoffComplete")
            moved += 1
        return moved

    def flush_unschedulable_leftover(self) -> int:
        now = self.clock.now()
        stale = [p for p in self._unschedulable.values() if now - p.timestamp > self.unschedulable_timeout]
        for pod in stale:
            del self._unschedulable[pod.uid]
            self._requeue(pod, "UnschedulableTimeout")
        return len(stale)

    def _requeue(self, pod: PodInfo, event: str) -> None:
        if self._is_backing_off(pod):
            self._to_backoff(pod, event)
        else:
            self._to_active(pod, event)

    def next_backoff_expiry(self) -> float | None:
        return self._backoff[0][0] if self._backoff else None

    def _interested(self, pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        if not pod.unschedulable_plugins:
            return True
        for plugin in pod.unschedulable_plugins:
            registered = self._events.get(plugin)
            if registered is None:
                return True
            for ev in registered:
                if (ev.event.resource, ev.event.action) == (event.resource, event.action) and (
                    ev.hint is None or self._run_hint(plugin, ev.hint, event, pod, old, new)
                ):
                    return True
        return False

    def _run_hint(
        self,
        plugin: str,
        hint: Callable[[PodInfo, Any, Any], bool],
        event: ClusterEvent,
        pod: PodInfo,
        old: Any,
        new: Any,
    ) -> bool:
        """One plugin's queueing hint, timed into scheduler_queueing_hint_execution_duration_seconds."""
        t0 = time.perf_counter()
        try:
            queue = bool(hint(pod, old, new))
            label = HINT_QUEUE if queue else HINT_QUEUE_SKIP
        except Exception:  # an erroring hint counts as Queue, as upstream
            queue, label = True, HINT_ERROR
        self.metrics.observe_queueing_hint(plugin, event.name, label, time.perf_counter() - t0)
        return queue

    def _deaf(self, event: ClusterEvent) -> frozenset[str]:
        """Plugins that registered events but none of this kind: a pod rejected by these alone stays."""
        key = (event.resource, event.action)
        deaf = self._deaf_by_event.get(key)
        if deaf is None:
            deaf = self._deaf_by_event[key] = frozenset(
                name
                for name, registered in self._events.items()
                if registered is not None
                and not any(
                    ev.event.resource == event.resource and ev.event.action == event.action
                    for ev in registered
                )
            )
        return deaf

    def on_cluster_event(self, event: ClusterEvent, old: Any = None, new: Any = None) -> int:
        """Move unschedulable pods that this event may help; returns how many moved."""
        self._move_request_cycle = self.scheduling_cycle
        regated = self._regate(event, old, new) if self._gated_by else 0
        if not self._unschedulable:
            return regated
        # Every bind raises an event: rule out, with one C-level subset test per pod, the pods whose
        # rejecting plugins all ignore this kind of event, before the per-plugin walk.
        key = (event.resource, event.action)
        if self._deaf_since.get(key) == self._unschedulable_added:
            return 0  # no pod came in since an event of this kind found every one deaf to it
        deaf = self._deaf(event)
        candidates = [
            p
            for p in self._unschedulable.values()
            if not (p.unschedulable_plugins and p.unschedulable_plugins <= deaf)
        ]
        if not candidates:
            self._deaf_since[key] = self._unschedulable_added
            return 0
        moved = [p for p in candidates if self._interested(p, event, old, new)]
        for pod in moved:
            del self._unschedulable[pod.uid]
            self._requeue(pod, event.name)
        return len(moved) + regated

    def _regate(self, event: ClusterEvent, old: Any, new: Any) -> int:
        """Run PreEnqueue again for gated pods whose gating plugin registered this event (as upstream
        moves gated pods on their plugin's events); returns how many left the gate."""
        deaf = self._deaf(event)
        if all(plugin in deaf for plugin in self._gated_by):
            return 0
        moved = 0
        for pod in list(self._gated.values()):
            plugin = pod.gating_plugin
            if plugin in deaf or not self._gate_interested(pod, event, old, new):
                continue
            self._ungate(pod.uid)
            self._gate_or_activate(pod, event.name)
            moved += 0 if pod.gated else 1
        return moved

    def _gate_interested(self, pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        plugin = pod.gating_plugin or ""
        registered = self._events.get(plugin)
        if registered is None:
            return True
        for ev in registered:
            if (ev.event.resource, ev.event.action) == (event.resource, event.action) and (
                ev.hint is None or self._run_hint(plugin, ev.hint, event, pod, old, new)
            ):
                return True
        return False

    def activate(self, pods: Iterable[PodInfo]) -> None:
        """Force pods from backoff/unschedulable into activeQ (e.g. the rest of a gang); a gated pod
        is asked its PreEnqueue plugins again instead (its gate may have opened)."""
        for p in pods:
            pod = self._pods.get(p.uid)
            if pod is None or pod.uid in self._active_keys:
                continue
            if pod.uid in self._gated:
                self._ungate(pod.uid)
                self._gate_or_activate(pod, "ForceActivate")
                continue
            self._detach(pod.uid)
            self._to_active(pod, "ForceActivate")

    # --- async wait (kube backend) -------------------------------------------------------------

    async def wait(self, max_wait: float) -> None:
        """Sleep until something enters activeQ/backoffQ or ``max_wait`` seconds elapse."""
        if self._active:
            return
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
        self._wakeup.clear()
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max_wait):
                await self._wakeup.wait()

    def wake(self) -> None:
        """End a pending :meth:`wait` early (the scheduler is stopping)."""
        if self._wakeup is not None:
            self._wakeup.set()

    def close(self) -> None:
        self.closed = True
        self.wake()
