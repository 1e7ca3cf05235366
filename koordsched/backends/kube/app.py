"""``koordsched run``: the scheduler against a real cluster, from start-up to graceful stop.

The order is kube-scheduler's: serve health and metrics first (so liveness works while
starting), sync the caches (priority classes and nodes, then pods) while numba compiles in a
thread, report ready, then campaign for the lease; only the leader schedules, a standby keeps
its cache warm. Losing the lease ends the process with status 1, as kube-scheduler exits, so
the pod restarts with a clean state. SIGTERM/SIGINT stop scheduling, cancel bindings in
flight, flush queued events, release the lease and close the connections, then exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from koordsched.backends.kube.client import ClientConfigError, KubeClient, build_client
from koordsched.backends.kube.flags import DEFAULT_BIND_ADDRESS, DEFAULT_PORT, IGNORED_FLAGS
from koordsched.backends.kube.handlers import reflectors_for
from koordsched.backends.kube.leaderelection import LeaderElector, new_identity
from koordsched.backends.kube.port import KubePort
from koordsched.backends.kube.server import HttpServer, build_app, configz
from koordsched.config.errors import ConfigError
from koordsched.config.load import load_config
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
from koordsched.observability.tracing import CycleTracer, TracingConfigError, tracer_provider_from_env
from koordsched.profiles import default_profile_path
from koordsched.scheduler.clock import MonotonicClock
from koordsched.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INVALID = 2

#: How long queued events and status patches may take to go out on shutdown.
FLUSH_GRACE = 2.0


#: Koordinator's Deployment passes these to koord-scheduler; accepted so its manifests work
#: unchanged, and ignored.
def run_command(args: argparse.Namespace) -> int:
    """What the CLI calls for ``koordsched run``: the exit status."""
    for flag in IGNORED_FLAGS:
        if getattr(args, flag.lstrip("-").replace("-", "_"), None) is not None:
            log.info("%s is accepted for compatibility with koord-scheduler and ignored", flag)
    return asyncio.run(
        run_scheduler(args.config, kubeconfig=args.kubeconfig, bind_address=args.bind_address, port=args.port)
    )


async def run_scheduler(
    config_path: str | None,
    *,
    kubeconfig: str | None,
    bind_address: str = DEFAULT_BIND_ADDRESS,
    port: int = DEFAULT_PORT,
    stop: asyncio.Event | None = None,
) -> int:
    """Run until ``stop`` is set (or SIGTERM/SIGINT when no ``stop`` is given); returns the exit status.

    0 after a graceful stop, 1 when leadership was lost or something broke, 2 for an invalid
    config or kubeconfig.
    """
    from koordsched.kernels import warm_up
    from koordsched.plugins.registry import in_tree_registry

    registry = in_tree_registry()
    try:
        config = load_config(config_path if config_path else default_profile_path(), registry)
    except ConfigError as err:
        log.error("invalid configuration: %s", err)
        return EXIT_INVALID
    try:
        provider = tracer_provider_from_env()
    except TracingConfigError as err:
        log.error("%s", err)
        return EXIT_INVALID

    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    if stop is None:
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, _on_signal, sig, stop)
                installed.append(sig)
    runner = SchedulerRunner(
        config,
        registry,
        kubeconfig=kubeconfig or config.client_connection.kubeconfig or None,
        bind_address=bind_address,
        port=port,
        tracer=CycleTracer(provider),
        warm_up=warm_up,
    )
    try:
        return await runner.run(stop)
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        if provider is not None:
            await asyncio.to_thread(provider.shutdown)  # flushes batched spans


def _on_signal(sig: signal.Signals, stop: asyncio.Event) -> None:
    log.info("received %s, shutting down", sig.name)
    stop.set()


async def _until(stop: asyncio.Event, *aws: Awaitable[Any]) -> bool:
    """Await all of ``aws`` unless ``stop`` is set first; True when they finished."""
    work = asyncio.ensure_future(asyncio.gather(*aws))
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (work, stopper):
            if not t.done():
                t.cancel()
        await asyncio.wait({work, stopper})
    if work.cancelled():
        return False
    work.result()  # re-raise what the work raised
    return True


class SchedulerRunner:
    """The pieces of one run, wired together; :meth:`run` drives them and always cleans up."""

    def __init__(
        self,
        config: SchedulerConfig,
        registry: Registry,
        *,
        kubeconfig: str | None,
        bind_address: str,
        port: int,
        tracer: CycleTracer | None = None,
        warm_up: Callable[[], None] | None = None,
        metrics: SchedulerMetrics | None = None,
        reflector_options: dict[str, Any] | None = None,
    ) -> None:
        self.config = config
        self.registry = registry
        self.kubeconfig = kubeconfig
        self.tracer = tracer or CycleTracer(None)
        self.warm_up = warm_up
        self.metrics = metrics or SchedulerMetrics(process_metrics=True)
        self.health = HealthChecks(leader_elect=config.leader_election.leader_elect)
        self.server = HttpServer(
            build_app(self.health, self.metrics, lambda: configz(config)), bind_address, port
        )
        self.reflector_options = reflector_options or {}
        self.hostname = socket.gethostname()
        self.identity = new_identity(self.hostname)
        self.scheduler: Scheduler | None = None
        self.elector: LeaderElector | None = None

    async def run(self, stop: asyncio.Event) -> int:
        try:
            await self.server.start()
        except OSError as err:
            log.error("cannot serve on %s:%d: %s", self.server.address, self.server.requested_port, err)
            return EXIT_FAILURE
        try:
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
        finally:
            await self.server.close()

    async def _run_with_client(self, client: KubeClient, stop: asyncio.Event) -> int:
        cc = self.config.client_connection
        port = KubePort(client, events_client=client.with_limiter(cc.qps, cc.burst), hostname=self.hostname)
        scheduler = self.scheduler = Scheduler(
            self.config, self.registry, port, MonotonicClock(), metrics=self.metrics, tracer=self.tracer
        )
        first, pods = reflectors_for(client, scheduler, self.metrics, **self.reflector_options)
        warm = asyncio.ensure_future(asyncio.to_thread(self.warm_up)) if self.warm_up else None
        try:
            for r in first:
                r.start()
            if not await _until(stop, *(r.synced.wait() for r in first)):
                return EXIT_OK
            pods.start()
            if not await _until(stop, pods.synced.wait()):
                return EXIT_OK
            log.info("caches synced: %s", ", ".join(f"{len(r.store)} {r.kind.kind}" for r in (*first, pods)))
            if warm is not None:
                try:
                    if not await _until(stop, warm):
                        return EXIT_OK
                except Exception:
                    log.exception("compiling the numba kernels failed")
                    return EXIT_FAILURE
            self.health.set_ready(HANDLER_SYNC, True)
            return await self._lead_and_schedule(client, scheduler, stop)
        finally:
            self.health.set_ready(SHUTDOWN, False, SHUTTING_DOWN)
            if warm is not None and not warm.done():
                warm.cancel()
                await asyncio.wait({warm})
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
