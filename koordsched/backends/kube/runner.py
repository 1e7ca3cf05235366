"""The run proper, once the plugins are loaded: sync the caches, report ready, lead, schedule, stop.

The order is kube-scheduler's: sync the caches (priority classes, nodes and the CRDs, then
pods), report ready, then campaign for the lease; only the leader schedules, a standby keeps
its cache warm. Losing the lease ends the process with status 1, as kube-scheduler exits, so
the pod restarts with a clean state. A stop ends scheduling, cancels bindings in flight,
flushes queued events, releases the lease and closes the connections.

Importing this module imports the scheduler and so the plugins and their numba kernels:
:mod:`~koordsched.backends.kube.app` does it in a worker thread, after its health server is up.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

from koordsched.backends.kube.client import ClientConfigError, KubeClient, build_client
from koordsched.backends.kube.handlers import reflectors_for
from koordsched.backends.kube.kinds import crd_kinds
from koordsched.backends.kube.leaderelection import LeaderElector, new_identity
from koordsched.backends.kube.lifecycle import EXIT_FAILURE, EXIT_INVALID, EXIT_OK, until
from koordsched.backends.kube.port import KubePort
from koordsched.config.resolved import SchedulerConfig
from koordsched.framework.registry import Registry
from koordsched.observability.health import (
    HANDLER_SYNC,
    LEADER_ELECTION,
    SHUTDOWN,
    SHUTTING_DOWN,
    HealthChecks,
)
from koordsched.observability.metrics import SchedulerMetrics
from koordsched.observability.tracing import CycleTracer
from koordsched.scheduler.clock import MonotonicClock
from koordsched.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)

#: How long queued events and status patches may take to go out on shutdown.
FLUSH_GRACE = 2.0


class SchedulerRunner:
    """The pieces of one run, wired together; :meth:`run` drives them and always cleans up.

    ``health`` is served already; :meth:`run` reports ``sched-handler-sync`` ready once the
    caches are synced (the caller has warmed the kernels by then).
    """

    def __init__(
        self,
        config: SchedulerConfig,
        registry: Registry,
        *,
        kubeconfig: str | None,
        health: HealthChecks,
        metrics: SchedulerMetrics,
        tracer: CycleTracer | None = None,
        reflector_options: dict[str, Any] | None = None,
    ) -> None:
        self.config = config
        self.registry = registry
        self.kubeconfig = kubeconfig
        self.health = health
        self.metrics = metrics
        self.tracer = tracer or CycleTracer(None)
        self.reflector_options = reflector_options or {}
        self.hostname = socket.gethostname()
        self.identity = new_identity(self.hostname)
        self.scheduler: Scheduler | None = None
        self.elector: LeaderElector | None = None

    async def run(self, stop: asyncio.Event) -> int:
        cc = self.config.client_connection
        try:
            client = await build_client(self.kubeconfig, qps=cc.qps, burst=cc.burst, metrics=self.metrics)
        except ClientConfigError as err:
            log.error("%s", err)
            return EXIT_INVALID
        try:
            return await self._run_with_client(client, stop)
        finally:
            await client.close()

    async def _run_with_client(self, client: KubeClient, stop: asyncio.Event) -> int:
        cc = self.config.client_connection
        port = KubePort(client, events_client=client.with_limiter(cc.qps, cc.burst), hostname=self.hostname)
        scheduler = self.scheduler = Scheduler(
            self.config, self.registry, port, MonotonicClock(), metrics=self.metrics, tracer=self.tracer
        )
        first, pods = reflectors_for(
            client, scheduler, self.metrics, crd_kinds=crd_kinds(self.registry), **self.reflector_options
        )
        try:
            for r in first:
                r.start()
            if not await until(stop, *(r.synced.wait() for r in first)):
                return EXIT_OK
            pods.start()
            if not await until(stop, pods.synced.wait()):
                return EXIT_OK
            log.info("caches synced: %s", ", ".join(f"{len(r.store)} {r.kind.kind}" for r in (*first, pods)))
            self.health.set_ready(HANDLER_SYNC, True)
            return await self._lead_and_schedule(client, scheduler, stop)
        finally:
            self.health.set_ready(SHUTDOWN, False, SHUTTING_DOWN)
            await port.close(FLUSH_GRACE)
            for r in (pods, *first):
                await r.stop()

    async def _lead_and_schedule(self, client: KubeClient, scheduler: Scheduler, stop: asyncio.Event) -> int:
        le = self.config.leader_election
        elector_task: asyncio.Task[None] | None = None
        elector_stop = asyncio.Event()
        if le.leader_elect:
            cc = self.config.client_connection
            elector = self.elector = LeaderElector.from_config(
                client.with_limiter(cc.qps, cc.burst), le, self.identity
            )
            self.health.set_check(LEADER_ELECTION, elector.check)
            elector_task = asyncio.ensure_future(elector.run(elector_stop))
        stop_task = asyncio.ensure_future(stop.wait())
        sched_stop = asyncio.Event()
        sched_task: asyncio.Task[None] | None = None
        code = EXIT_OK
        try:
            if elector_task is not None:
                assert self.elector is not None
                leading = asyncio.ensure_future(self.elector.leading.wait())
                await asyncio.wait({leading, stop_task, elector_task}, return_when=asyncio.FIRST_COMPLETED)
                if not leading.done():
                    leading.cancel()
                    await asyncio.wait({leading})
                if stop.is_set():
                    return EXIT_OK
                if not self.elector.leading.is_set():
                    log.error("leader election ended before this instance led")
                    return EXIT_FAILURE
            log.info("scheduling as %s", self.identity)
            sched_task = asyncio.ensure_future(scheduler.run(sched_stop))
            watched = {stop_task, sched_task} | ({elector_task} if elector_task else set())
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            if stop.is_set():
                code = EXIT_OK
            elif elector_task is not None and elector_task.done():
                log.error("leader election lost")
                code = EXIT_FAILURE
            else:
                log.error("the scheduling loop ended unexpectedly")
                code = EXIT_FAILURE
            return code
        finally:
            sched_stop.set()
            if sched_task is not None:
                # Scheduler.run checks its stop event only between waits (up to 1 s); cancelling
                # ends it at once, and its own finally still cancels the bindings in flight.
                sched_task.cancel()
                await asyncio.wait({sched_task})
                if not sched_task.cancelled() and sched_task.exception() is not None:
                    log.error("the scheduling loop failed", exc_info=sched_task.exception())
            elector_stop.set()
            if elector_task is not None:
                # Releasing is bounded by the lease's request timeouts (renewDeadline).
                await asyncio.wait({elector_task})
                if not elector_task.cancelled() and elector_task.exception() is not None:
                    log.error("leader election failed", exc_info=elector_task.exception())
            stop_task.cancel()
            await asyncio.wait({stop_task})
