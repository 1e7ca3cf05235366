"""The run proper, once the plugins are loaded: sync the caches, report ready, lead, schedule, stop.

The order is kube-scheduler's: sync the caches (priority classes, nodes and the CRDs, then
pods), report ready, then campaign for the lease; only the leader schedules, a standby keeps
its cache warm. Losing the lease ends the process with status 1, as kube-scheduler exits, so
the pod restarts with a clean state.

A stop, from any state, runs these steps in this order, each under
:meth:`~koordsched.backends.kube.shutdown.Shutdown.step` (its own limit and what is left of the
shutdown grace; a step still running then is abandoned and logged):

1. stop the scheduling loop and cancel the bindings in flight (a cancelled bind may still land:
   the pod is then bound, and the next leader sees it so);
2. stop the leader elector: a request in flight is cancelled; the Lease is released when held;
3. flush queued events and status patches (both writers at once) and stop the writers;
4. stop the watches, then close the API client.

The reflectors, the elector and the scheduling loop are tasks of task groups owned here, so
none of them outlives :meth:`SchedulerRunner.run`.

Importing this module imports the scheduler and so the plugins and their numba kernels:
:mod:`~koordsched.backends.kube.app` does it in a worker thread, after its health server is up.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

from koordsched.backends.kube.client import ClientConfigError, KubeClient, build_client
from koordsched.backends.kube.controllers import ControllerRunner, runnable
from koordsched.backends.kube.handlers import reflectors_for
from koordsched.backends.kube.kinds import plugin_kinds
from koordsched.backends.kube.leaderelection import LeaderElector, new_identity
from koordsched.backends.kube.lifecycle import EXIT_FAILURE, EXIT_INVALID, EXIT_OK, first_error, until
from koordsched.backends.kube.port import KubePort
from koordsched.backends.kube.reflector import Reflector
from koordsched.backends.kube.shutdown import Shutdown
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
from koordsched.observability.startup import CACHES_SYNCED, READY, StartupTimeline
from koordsched.observability.tracing import CycleTracer
from koordsched.scheduler.clock import MonotonicClock
from koordsched.scheduler.collector import loop_collector
from koordsched.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)

#: The ``name`` of leader_election_master_status, as kube-scheduler sets it in its election config.
LEADER_ELECTION_METRIC_NAME = "kube-scheduler"
#: How long queued events and status patches may take to go out on shutdown.
FLUSH_GRACE = 2.0
#: Stopping the scheduling loop and cancelling the bindings in flight.
STOP_SCHEDULING = 2.0
#: Stopping the watches; closing the API client's connections.
STOP_WATCHES = 1.0
CLOSE_CLIENT = 1.0


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
        shutdown: Shutdown | None = None,
        timeline: StartupTimeline | None = None,
        master: str | None = None,
    ) -> None:
        self.config = config
        #: kube-scheduler's ``--master``: overrides the kubeconfig's server.
        self.master = master
        self.registry = registry
        self.kubeconfig = kubeconfig
        self.health = health
        self.metrics = metrics
        self.tracer = tracer or CycleTracer(None)
        self.reflector_options = reflector_options or {}
        self.shutdown = shutdown or Shutdown()
        self.timeline = timeline or StartupTimeline()
        self.hostname = socket.gethostname()
        self.identity = new_identity(self.hostname)
        self.scheduler: Scheduler | None = None
        self.elector: LeaderElector | None = None

    async def run(self, stop: asyncio.Event) -> int:
        cc = self.config.client_connection
        try:
            client = await build_client(
                self.kubeconfig, qps=cc.qps, burst=cc.burst, metrics=self.metrics, master=self.master
            )
        except ClientConfigError as err:
            log.error("%s", err)
            return EXIT_INVALID
        try:
            return await self._run_with_client(client, stop)
        finally:
            self.shutdown.begin("the run ended", EXIT_FAILURE)
            await self.shutdown.step("closing the API client", client.close(), CLOSE_CLIENT)

    async def _run_with_client(self, client: KubeClient, stop: asyncio.Event) -> int:
        cc = self.config.client_connection
        port = KubePort(client, events_client=client.with_limiter(cc.qps, cc.burst), hostname=self.hostname)
        scheduler = self.scheduler = Scheduler(
            self.config, self.registry, port, MonotonicClock(), metrics=self.metrics, tracer=self.tracer
        )
        port.stand_ins.scheduler = scheduler
        first, pods = reflectors_for(
            client,
            scheduler,
            self.metrics,
            kinds=plugin_kinds(self.registry, scheduler.watch_scopes()),
            **self.reflector_options,
        )
        watches: list[asyncio.Task[None]] = []
        try:
            async with asyncio.TaskGroup() as tg:  # the watches: none outlives the run
                try:
                    watches.extend(_start(tg, r) for r in first)
                    if not await until(stop, *(r.synced.wait() for r in first)):
                        return self._stopped("a stop during the cache sync")
                    watches.append(_start(tg, pods))
                    if not await until(stop, pods.synced.wait()):
                        return self._stopped("a stop during the cache sync")
                    log.info(
                        "caches synced: %s",
                        ", ".join(f"{len(r.store)} {r.kind.kind}" for r in (*first, pods)),
                    )
                    scheduler.cache_synced()
                    self.timeline.mark(CACHES_SYNCED)
                    # As the simulator: what the caches hold is frozen, the loop under its own
                    # collector thresholds (koordsched/scheduler/collector.py).
                    with loop_collector(full_collection=False) as gc_stats:
                        self.health.set_ready(HANDLER_SYNC, True)
                        self.timeline.mark(READY)
                        try:
                            return await self._lead_and_schedule(client, scheduler, stop)
                        finally:
                            log.info(
                                "garbage collector while scheduling: %d collections (%d full), %.2f s",
                                gc_stats.collections,
                                gc_stats.full,
                                gc_stats.seconds,
                            )
                finally:
                    self.shutdown.begin("the run ended", EXIT_FAILURE)
                    self.health.set_ready(SHUTDOWN, False, SHUTTING_DOWN)
                    await self.shutdown.step(
                        "flushing events and status patches", port.close(FLUSH_GRACE), FLUSH_GRACE + 1.0
                    )
                    for task in reversed(watches):  # pods first, as kube-scheduler's informers stop
                        await self.shutdown.stop_task(
                            f"stopping the {task.get_name()} watch", task, STOP_WATCHES
                        )
        except BaseExceptionGroup as group:
            err = first_error(group)
            if not isinstance(err, Exception):
                raise err from None
            # A watch that died would leave the cache stale (and what bound pods hold unknown):
            # end the run, after the orderly stop its cancellation ran, rather than go on blind.
            log.error("the run failed: %s: %s", type(err).__name__, err, exc_info=err)
            return EXIT_FAILURE

    def _stopped(self, why: str) -> int:
        self.shutdown.begin(why, EXIT_OK)
        return EXIT_OK

    async def _lead_and_schedule(self, client: KubeClient, scheduler: Scheduler, stop: asyncio.Event) -> int:
        le = self.config.leader_election
        elector: LeaderElector | None = None
        if le.leader_elect:
            cc = self.config.client_connection
            elector = self.elector = LeaderElector.from_config(
                client.with_limiter(cc.qps, cc.burst),
                le,
                self.identity,
                metrics=self.metrics,
                metrics_name=LEADER_ELECTION_METRIC_NAME,
            )
            self.health.set_check(LEADER_ELECTION, elector.check)
        elector_stop = asyncio.Event()
        sched_stop = asyncio.Event()
        async with asyncio.TaskGroup() as tg:  # the elector and the loop: none outlives this call
            elector_task = (
                tg.create_task(_quiet(elector.run(elector_stop), "leader election"), name="elector")
                if elector
                else None
            )
            stop_task = tg.create_task(stop.wait(), name="stop")
            sched_task: asyncio.Task[bool] | None = None
            controllers: list[tuple[ControllerRunner, asyncio.Task[bool]]] = []
            cc = self.config.client_connection
            try:
                if elector is not None and elector_task is not None:
                    leading = tg.create_task(elector.leading.wait(), name="leading")
                    await asyncio.wait(
                        {leading, stop_task, elector_task}, return_when=asyncio.FIRST_COMPLETED
                    )
                    leading.cancel()
                    if stop.is_set():
                        return self._stopped("a stop while waiting for leadership")
                    if not elector.leading.is_set():
                        log.error("leader election ended before this instance led")
                        self.shutdown.begin("leader election ended", EXIT_FAILURE)
                        return EXIT_FAILURE
                log.info("scheduling as %s", self.identity)
                sched_task = tg.create_task(
                    _quiet(scheduler.run(sched_stop), "the scheduling loop"), name="scheduling"
                )
                # The plugins' controllers (Koordinator's NewControllers): only the leader writes
                # (only it knows what it bound), each controller through its own token bucket.
                # Status writes are sent once per version of an object, whether the port (a reserve
                # pod's failed attempt) or a controller (its sync) computed them.
                ledger = scheduler.port.stand_ins.ledger if isinstance(scheduler.port, KubePort) else None
                for controller in runnable(scheduler.controllers(), scheduler.kinds):
                    runner = ControllerRunner(
                        controller,
                        client.with_limiter(cc.qps, cc.burst),
                        flush_grace=FLUSH_GRACE,
                        ledger=ledger,
                    )
                    task = tg.create_task(
                        _quiet(runner.run(sched_stop), controller.description), name=controller.name
                    )
                    controllers.append((runner, task))
                watched = {stop_task, sched_task} | ({elector_task} if elector_task else set())
                await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
                if stop.is_set():
                    return self._stopped("a stop while scheduling")
                if elector_task is not None and elector_task.done():
                    log.error("leader election lost")
                    self.shutdown.begin("leader election lost", EXIT_FAILURE)
                    return EXIT_FAILURE
                log.error("the scheduling loop ended unexpectedly")
                self.shutdown.begin("the scheduling loop ended", EXIT_FAILURE)
                return EXIT_FAILURE
            finally:
                self.shutdown.begin("the run ended", EXIT_FAILURE)
                sched_stop.set()
                if sched_task is not None:
                    # Scheduler.run checks its stop event only between waits (up to 1 s); cancelling
                    # ends it at once, and its own finally still cancels the bindings in flight.
                    await self.shutdown.stop_task(
                        "stopping the scheduling loop and its bindings", sched_task, STOP_SCHEDULING
                    )
                for runner, task in controllers:
                    what = runner.controller.description
                    if runner.writer is None:
                        await self.shutdown.stop_task(f"stopping {what}", task, STOP_SCHEDULING)
                    elif not await self.shutdown.step(
                        f"flushing the writes of {what}", _done(task), FLUSH_GRACE + 1.0
                    ):
                        task.cancel()
                elector_stop.set()
                # Cancels a request in flight; releases the Lease when held.
                # At most half of what is left: a release the server does not answer must not
                # leave nothing for the flush and the rest.
                if elector_task is not None and not await self.shutdown.step(
                    "stopping leader election (releasing the Lease)",
                    _done(elector_task),
                    min(le.renew_deadline, self.shutdown.remaining() / 2),
                ):
                    elector_task.cancel()
                stop_task.cancel()


def _start(tg: asyncio.TaskGroup, reflector: Reflector[Any]) -> asyncio.Task[None]:
    return tg.create_task(reflector.run(), name=reflector.kind.kind)


async def _quiet(coro: Any, what: str) -> bool:
    """Run ``coro``; True when it returned, False (logged) when it raised: a failure of the loop or
    the elector ends the run with status 1 but must not tear the task group down before the
    orderly stop (the lease is still released)."""
    try:
        await coro
    except Exception:
        log.exception("%s failed", what)
        return False
    return True


async def _done(task: asyncio.Task[Any]) -> None:
    await asyncio.wait({task})
