"""Koordinator's scheduling-timeout monitor (koord-scheduler's frameworkext ``SchedulerMonitor``).

An attempt starts when its pod is popped and completes when its binding cycle ends, or when the
scheduling cycle ends without one. Every ``period`` (Koordinator's ``--scheduler-monitor-period``,
10 s) the attempts still running are checked, and each attempt is checked again when it
completes: whenever one has run longer than ``timeout`` (``--scheduling-timeout``, 30 s), the
monitor logs Koordinator's warning and counts ``scheduler_scheduling_timeout{profile}`` once. So
an attempt that hangs is counted at every check until it ends, as koord-scheduler counts it.

Time comes from the scheduler's clock, so the simulator's virtual time drives it too.
"""

from __future__ import annotations

import logging

from koordsched.api.durations import format_duration
from koordsched.framework.interface import Clock
from koordsched.framework.types import PodInfo
from koordsched.observability.metrics import CycleMetrics

log = logging.getLogger(__name__)

#: Koordinator's defaults for --scheduler-monitor-period and --scheduling-timeout.
MONITOR_PERIOD = 10.0
SCHEDULING_TIMEOUT = 30.0


class SchedulingMonitor:
    def __init__(
        self,
        clock: Clock,
        metrics: CycleMetrics,
        *,
        period: float = MONITOR_PERIOD,
        timeout: float = SCHEDULING_TIMEOUT,
    ) -> None:
        self.clock = clock
        self.metrics = metrics
        self.period = period
        self.timeout = timeout
        #: uid -> (the pod, when its attempt started).
        self._running: dict[str, tuple[PodInfo, float]] = {}
        self._last_check = clock.now()

    def __len__(self) -> int:
        return len(self._running)

    def start(self, pod: PodInfo) -> None:
        self._running[pod.uid] = (pod, self.clock.now())

    def complete(self, pod: PodInfo) -> None:
        entry = self._running.pop(pod.uid, None)
        if entry is not None:
            self._check(entry[0], entry[1], self.clock.now())

    def tick(self) -> None:
        """The periodic check; call it often (housekeeping), it acts once per ``period``."""
        now = self.clock.now()
        if now - self._last_check < self.period:
            return
        self._last_check = now
        for pod, started in list(self._running.values()):
            self._check(pod, started, now)

    def _check(self, pod: PodInfo, started: float, now: float) -> None:
        interval = now - started
        if interval <= self.timeout:
            return
        meta = pod.pod.metadata
        log.warning(
            "!!!CRITICAL TIMEOUT!!! scheduling pod %s/%s(%s) took longer (%s) than the timeout %s",
            meta.namespace,
            meta.name,
            meta.uid,
            format_duration(interval),
            format_duration(self.timeout),
        )
        self.metrics.observe_scheduling_timeout(pod.pod.spec.scheduler_name)
