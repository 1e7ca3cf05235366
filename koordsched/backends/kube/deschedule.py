"""``koordsched deschedule --kubeconfig``: koord-descheduler against a real API server.

The cluster is watched as ``koordsched run`` watches it (the same reflectors feed a scheduler's
cache, which never schedules here: the descheduler only reads it and asks its filters whether a
pod would fit elsewhere). Once the caches are synced it campaigns for its own Lease
(``koordinator-system/koord-descheduler`` by default), and only the leader descheduling: a
round every ``deschedulingInterval`` (one round and out when it is 0, once its jobs are done),
and in between the MigrationController arbitrates and reconciles its PodMigrationJobs every
``arbitrationArgs.interval`` (500ms; with arbitration disabled the limits are still checked, at
``RECONCILE_TICK``), up to ``maxConcurrentReconciles`` jobs at once (deschedule_reconcile.py).
A stop (or a lost lease) ends the loop, gives running reconciles ``STOP_GRACE`` to end, flushes
the events, stops the watches and releases the Lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
from typing import Any, Final

import msgspec

from koordsched.api.core import Pod
from koordsched.api.durations import parse_duration
from koordsched.backends.kube.client import ClientConfigError, KubeClient, build_client
from koordsched.backends.kube.deschedule_port import CONTROLLER, KubeMigrationPort
from koordsched.backends.kube.deschedule_reconcile import ReconcilePool
from koordsched.backends.kube.events import EventRecorder
from koordsched.backends.kube.handlers import reflectors_for
from koordsched.backends.kube.kinds import ResourceKind, plugin_kinds
from koordsched.backends.kube.leaderelection import LeaderElector, new_identity
from koordsched.backends.kube.lifecycle import EXIT_FAILURE, EXIT_INVALID, EXIT_OK, until
from koordsched.backends.kube.reflector import Reflector
from koordsched.backends.kube.serving.options import ServingOptions
from koordsched.backends.kube.serving.servers import DelegationError, Servers, TLSConfigError, build_servers
from koordsched.config.resolved import SchedulerConfig
from koordsched.descheduler.config.load import DeschedulerConfig
from koordsched.descheduler.handle import SchedulerHandle
from koordsched.descheduler.migration import job as pmj
from koordsched.descheduler.runtime import Profile, build_profiles, run_round
from koordsched.framework.registry import Registry
from koordsched.framework.types import BindingPlan
from koordsched.observability.descheduler_metrics import LEADER_ELECTION_NAME, DeschedulerMetrics
from koordsched.observability.health import HANDLER_SYNC, HANDLER_SYNC_PENDING, LEADER_ELECTION, HealthChecks
from koordsched.observability.metrics import NullMetrics
from koordsched.scheduler.clock import MonotonicClock
from koordsched.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)

#: Seconds between two arbitration-and-reconcile passes over the jobs.
RECONCILE_TICK: Final = 0.5
#: The shortest tick allowed, whatever the config says (a busy loop helps nobody).
MIN_TICK: Final = 0.05
STOP_GRACE: Final = 2.0


class _ReadOnlyPort:
    """The cache-only scheduler's output port: it never schedules, so nothing is written."""

    async def bind(self, pod: Pod, node_name: str, plan: BindingPlan) -> None:
        raise RuntimeError("the descheduler's scheduler cache does not bind")

    def scheduled(self, pod: Pod, node_name: str) -> None:
        return None

    def unschedulable(self, pod: Pod, reason: str, message: str) -> None:
        return None

    def invalid_pod(self, pod: Pod, message: str) -> None:
        return None

    def preempt(self, preemptor: Pod, node_name: str, victims: list[Pod], *, message: str = "") -> None:
        raise RuntimeError("the descheduler's scheduler cache does not preempt")

    def nominate(self, pod: Pod, node_name: str) -> None:
        raise RuntimeError("the descheduler's scheduler cache does not nominate")


#: PodMigrationJobs are watched so that jobs created by users (or by this descheduler before a
#: restart) are reconciled too; optional, so a cluster without the CRD still runs.
PMJ_KIND: ResourceKind[pmj.PodMigrationJob] = ResourceKind(
    pmj.KIND, f"/apis/{pmj.API_VERSION}/{pmj.PLURAL}", pmj.PodMigrationJob, namespaced=False, optional=True
)


class _JobInbox:
    """The jobs the watch reports, handed to the leader's controller on its next tick."""

    def __init__(self) -> None:
        self.seen: dict[str, pmj.PodMigrationJob] = {}
        self.deleted: set[str] = set()

    def on_add(self, obj: pmj.PodMigrationJob) -> None:
        self.seen[obj.metadata.name] = obj
        self.deleted.discard(obj.metadata.name)

    def on_update(self, old: pmj.PodMigrationJob, new: pmj.PodMigrationJob) -> None:
        self.on_add(new)

    def on_delete(self, obj: pmj.PodMigrationJob) -> None:
        self.seen.pop(obj.metadata.name, None)
        self.deleted.add(obj.metadata.name)


class DeschedulerRunner:
    def __init__(
        self,
        config: DeschedulerConfig,
        scheduler_config: SchedulerConfig,
        registry: Registry,
        *,
        kubeconfig: str | None,
        leader_elect: bool = True,
        reflector_options: dict[str, Any] | None = None,
        serving: ServingOptions | None = None,
    ) -> None:
        self.config = config
        self.scheduler_config = scheduler_config
        self.registry = registry
        self.kubeconfig = kubeconfig
        self.leader_elect = leader_elect
        self.reflector_options = reflector_options or {}
        self.serving = serving
        self.health = HealthChecks(leader_elect=leader_elect)
        self.health.set_ready(HANDLER_SYNC, False, HANDLER_SYNC_PENDING)
        #: The serving port once started (tests read it).
        self.secure_port: int | None = None
        #: What /metrics serves: descheduler series and the API client's, never the embedded
        #: scheduler's (it only caches; its scheduler_* series would look like a scheduler's).
        self.metrics = DeschedulerMetrics(process_metrics=True)
        self.identity = new_identity(socket.gethostname())
        self.profiles: list[Profile] = []
        #: Profile name -> its MigrationController's reconciles (maxConcurrentReconciles).
        self.pools: dict[str, ReconcilePool] = {}
        self.rounds = 0
        #: Set once the caches are synced (tests wait on it).
        self.synced = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> int:
        try:
            client = await build_client(
                self.kubeconfig,
                qps=self.config.client_qps,
                burst=self.config.client_burst,
                metrics=self.metrics,
            )
        except ClientConfigError as err:
            log.error("%s", err)
            return EXIT_INVALID
        servers: Servers | None = None
        try:
            if self.serving is not None and self.serving.secure_port:
                try:
                    servers = await build_servers(
                        self.serving,
                        health=self.health,
                        metrics=self.metrics,
                        config=None,
                        default_kubeconfig=self.kubeconfig or None,
                        client_metrics=self.metrics,
                    )
                    await servers.start()
                except (DelegationError, TLSConfigError, OSError) as err:
                    log.error("cannot serve health and metrics: %s", err)
                    return EXIT_INVALID
                self.secure_port = servers.secure_port
            return await self._run(client, stop)
        finally:
            if servers is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(servers.close(), STOP_GRACE)
            await client.close()

    async def _run(self, client: KubeClient, stop: asyncio.Event) -> int:
        unrecorded = NullMetrics()
        scheduler = Scheduler(
            self.scheduler_config, self.registry, _ReadOnlyPort(), MonotonicClock(), metrics=unrecorded
        )
        first, pods = reflectors_for(
            client, scheduler, unrecorded, kinds=plugin_kinds(self.registry), **self.reflector_options
        )
        self.inbox = _JobInbox()
        first.append(Reflector(client, PMJ_KIND, self.inbox, optional=True, **self.reflector_options))
        events = EventRecorder(
            client.with_limiter(self.config.client_qps, self.config.client_burst), controller=CONTROLLER
        )
        tasks: list[asyncio.Task[None]] = []
        try:
            async with asyncio.TaskGroup() as tg:
                try:
                    tasks.extend(tg.create_task(r.run(), name=r.kind.kind) for r in first)
                    if not await until(stop, *(r.synced.wait() for r in first)):
                        return EXIT_OK
                    tasks.append(tg.create_task(pods.run(), name="Pod"))
                    if not await until(stop, pods.synced.wait()):
                        return EXIT_OK
                    self.synced.set()
                    self.health.set_ready(HANDLER_SYNC, True)
                    return await self._lead(client, scheduler, events, stop)
                finally:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(events.close(STOP_GRACE), STOP_GRACE + 1.0)
                    for t in reversed(tasks):
                        t.cancel()
        except BaseExceptionGroup as group:
            log.error("the descheduler failed: %s", group.exceptions[0])
            return EXIT_FAILURE

    async def _lead(
        self, client: KubeClient, scheduler: Scheduler, events: EventRecorder, stop: asyncio.Event
    ) -> int:
        elector: LeaderElector | None = None
        elector_task: asyncio.Task[None] | None = None
        elector_stop = asyncio.Event()
        if self.leader_elect:
            elector = LeaderElector(
                client.with_limiter(self.config.client_qps, self.config.client_burst),
                namespace=self.config.lease_namespace,
                name=self.config.lease_name,
                identity=self.identity,
                on_started_leading=lambda: self.metrics.set_leader_status(LEADER_ELECTION_NAME, True),
                on_stopped_leading=lambda: self.metrics.set_leader_status(LEADER_ELECTION_NAME, False),
            )
            self.metrics.set_leader_status(LEADER_ELECTION_NAME, False)
            elector_task = asyncio.create_task(elector.run(elector_stop), name="elector")
            self.health.set_check(LEADER_ELECTION, elector.check)
        try:
            if elector is not None and elector_task is not None:
                leading = asyncio.ensure_future(elector.leading.wait())
                stopping = asyncio.ensure_future(stop.wait())
                await asyncio.wait({leading, stopping, elector_task}, return_when=asyncio.FIRST_COMPLETED)
                leading.cancel()
                stopping.cancel()
                if stop.is_set():
                    return EXIT_OK
                if not elector.leading.is_set():
                    log.error("leader election ended before this instance led")
                    return EXIT_FAILURE
            log.info("descheduling as %s", self.identity)
            return await self._loop(client, scheduler, events, stop, elector_task)
        finally:
            elector_stop.set()
            if elector_task is not None:
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await asyncio.wait_for(elector_task, STOP_GRACE)

    async def _loop(
        self,
        client: KubeClient,
        scheduler: Scheduler,
        events: EventRecorder,
        stop: asyncio.Event,
        elector_task: asyncio.Task[None] | None,
    ) -> int:
        handle_for = lambda: SchedulerHandle(scheduler)  # noqa: E731
        self.profiles = build_profiles(self.config, handle_for)
        for prof in self.profiles:
            prof.controller.on_evict = self.metrics.evicted
        ports = {p.name: KubeMigrationPort(client, p.handle, events) for p in self.profiles}
        self.pools = {
            p.name: ReconcilePool(p.controller.args.max_concurrent_reconciles) for p in self.profiles
        }
        loop = asyncio.get_running_loop()
        next_round: float | None = loop.time()
        try:
            while not stop.is_set():
                if elector_task is not None and elector_task.done():
                    log.error("leader election lost")
                    return EXIT_FAILURE
                if next_round is not None and loop.time() >= next_round:
                    nodes = self.profiles[0].handle.nodes() if self.profiles else []
                    run_round(self.config, self.profiles, nodes)
                    self.rounds += 1
                    next_round = loop.time() + self.config.interval if self.config.interval > 0 else None
                self._adopt(ports)
                phases: dict[str, int] = {}
                for prof in self.profiles:
                    await self._reconcile(prof, ports[prof.name], self.pools[prof.name])
                    for phase, n in prof.controller.phases().items():
                        phases[phase] = phases.get(phase, 0) + n
                self.metrics.jobs(phases)
                if (
                    next_round is None
                    and all(
                        j.finished or (not j.passed and not j.waiting)
                        for p in self.profiles
                        for j in p.controller.jobs.values()
                    )
                    and all(pool.idle for pool in self.pools.values())
                ):
                    return EXIT_OK  # deschedulingInterval 0: one round, and its jobs are done
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self._tick())
            return EXIT_OK
        finally:
            for pool in self.pools.values():
                await pool.close(STOP_GRACE)

    def _tick(self) -> float:
        """The profiles' shortest arbitration interval (enabled ones), else RECONCILE_TICK."""
        intervals = [
            parse_duration(p.controller.args.arbitration_args.interval)
            for p in self.profiles
            if p.controller.args.arbitration_args.enabled
        ]
        return max(MIN_TICK, min(intervals, default=RECONCILE_TICK))

    def _adopt(self, ports: dict[str, KubeMigrationPort]) -> None:
        """Jobs from the watch into the first profile's controller (Koordinator has one)."""
        if not self.profiles:
            return
        prof = self.profiles[0]
        ctl = prof.controller
        port, pool = ports[prof.name], self.pools[prof.name]

        def busy(name: str) -> bool:
            # A job being reconciled takes what the watch says on a later tick, once its
            # reconcile has ended (an Aborted never races a write of the same job).
            known = ctl.jobs.get(name)
            return known is not None and pool.busy(name, known.pod.metadata.uid or known.pod.key)

        for name in list(self.inbox.deleted):
            if not busy(name):
                ctl.forget(name)
                self.inbox.deleted.discard(name)
        for name, obj in list(self.inbox.seen.items()):
            if busy(name):
                continue
            del self.inbox.seen[name]
            port.observed(obj)
            ref = obj.spec.pod_ref
            pod = None
            if ref is not None:
                pod = next(
                    (
                        p
                        for p in prof.handle.all_pods()
                        if p.metadata.namespace == ref.namespace and p.metadata.name == ref.name
                    ),
                    None,
                )
            # A copy: the controller changes its jobs, the watch's store must stay as served.
            copy = msgspec.convert(msgspec.to_builtins(obj), pmj.PodMigrationJob)
            if ctl.adopt(copy, pod, port) is not None:
                port.known(name)

    async def _reconcile(self, prof: Profile, port: KubeMigrationPort, pool: ReconcilePool) -> None:
        ctl = prof.controller
        await ctl.collect(port)
        ctl.arbitrate()
        for j in list(ctl.jobs.values()):
            pod = j.pod.metadata.uid or j.pod.key
            if pool.busy(j.name, pod):
                continue
            if j.passed and not j.finished:
                pool.offer(j.name, pod, functools.partial(ctl.reconcile, j, port))
            else:
                await port.save(j.job)
