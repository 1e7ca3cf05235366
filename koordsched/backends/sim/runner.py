"""``simulate``: schedule the pending pods of some manifests through the real scheduler, on virtual time.

The same queue, framework and plugins as a cluster run; only the clock (virtual, so backoff
costs nothing) and the output port (memory) differ. The CLI and the scenario tests both call
:func:`simulate`, so a test exercises exactly what a user runs.

Wall time (what NodeMetric expiry and LoadAware's assign times are measured in) is virtual
too: it starts at the newest ``status.updateTime`` among the input's NodeMetrics, so a
cluster file's metrics are fresh at the start of every run and results are reproducible;
without NodeMetrics it starts at the current time.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from koordsched.api.core import Node, Pod, PriorityClass
from koordsched.api.node_metric import newest_update_time
from koordsched.api.resources import is_scalar_resource_name
from koordsched.backends.sim.attempts import AttemptRecorder
from koordsched.backends.sim.controllers import SimControllers
from koordsched.backends.sim.fragmentation import FragmentationReport, input_mix, measure, sched_devices
from koordsched.backends.sim.loader import Cluster, kind_specs, load_cluster
from koordsched.backends.sim.port import BindHook, SimPort
from koordsched.backends.sim.results import SCHEDULED as SCHEDULED
from koordsched.backends.sim.results import PodResult as PodResult
from koordsched.backends.sim.results import PodResults
from koordsched.backends.sim.volumes import PVC_KIND, VolumeResult, settle_input, volume_results
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import SchedulerConfig, load_config
from koordsched.framework.controllers import Moment
from koordsched.framework.registry import Registry
from koordsched.observability.metrics import MetricsSink, SchedulerMetrics
from koordsched.observability.tracing import CycleTracer
from koordsched.plugins.coscheduling import Coscheduling, GangReport
from koordsched.plugins.deviceshare import gpu_capacities
from koordsched.plugins.elasticquota import QuotaSummary, summaries_of
from koordsched.plugins.registry import in_tree_registry
from koordsched.plugins.reservation import ReservationResult, reservation_results
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.collector import LoopCollector
from koordsched.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)

UNSCHEDULABLE = "Unschedulable"
WAITING = "Waiting"
#: A pod deleted by a preemption (it ran, or was bound in this run, and made room for a higher one).
PREEMPTED = "Preempted"
#: A bound pod evicted by ElasticQuota's overuse revoke controller (``monitorAllQuotas``).
REVOKED = "Revoked"

#: Stop advancing virtual time after this many advances in a row that bound nothing.
MAX_IDLE_ADVANCES = 3

#: The PodScheduled=False message kube-scheduler sets for a pod with scheduling gates.
SCHEDULING_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"

PathLike = str | os.PathLike[str]


@dataclass(slots=True)
class NodeUsage:
    """A node at the end of the run: resources in canonical units (cpu in millicores, else base units)."""

    name: str
    pods: int
    max_pods: int
    unschedulable: bool
    #: resource -> (requested, allocatable), for cpu, memory and every scalar resource in use there.
    resources: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass
class Summary:
    pods: int = 0
    scheduled: int = 0
    unschedulable: int = 0
    waiting: int = 0
    #: Pods deleted by a preemption (bound ones from the input included, which ``pods`` does not count).
    preempted: int = 0
    #: Pods evicted for their quota's overuse (bound ones from the input included).
    revoked: int = 0
    ignored: int = 0
    nodes: int = 0
    wall_seconds: float = 0.0
    #: CPU time of this process in the loop: steadier than wall time on a shared machine.
    cpu_seconds: float = 0.0
    #: GPU fragmentation before and after the run (see :mod:`koordsched.backends.sim.fragmentation`).
    fragmentation: FragmentationReport = field(default_factory=FragmentationReport)
    #: Gangs (Coscheduling) with members in the input, complete or not.
    gangs: list[GangReport] = field(default_factory=list)

    @property
    def pods_per_second(self) -> float:
        return self.scheduled / self.wall_seconds if self.wall_seconds > 0 else 0.0


@dataclass(repr=False)
class SimResult:
    #: In input order (see :class:`~koordsched.backends.sim.results.PodResults`).
    pods: Sequence[PodResult]
    summary: Summary
    nodes: list[NodeUsage]
    warnings: list[str]
    #: The in-memory cluster at the end: bound pods, events, PodScheduled conditions, bind failures.
    port: SimPort
    explain: bool = False
    #: ``namespace/name`` of the pods ``--explain-pod`` asked about (explained whatever happened to them).
    explain_pods: frozenset[str] = frozenset()
    #: Every PersistentVolumeClaim at the end of the run (see :mod:`koordsched.backends.sim.volumes`).
    volumes: list[VolumeResult] = field(default_factory=list)
    #: What the profiles ask that koordsched does not run (kube-scheduler's default plugins it
    #: lacks), one line per profile: the table output prints them as warnings.
    notices: list[str] = field(default_factory=list)
    #: The same by profile name -> the plugins, for ``summary.notImplemented`` in JSON.
    missing_defaults: dict[str, list[str]] = field(default_factory=dict)
    reservations: list[ReservationResult] = field(default_factory=list)
    #: ElasticQuota usage at the end (see :func:`quota_usage`); empty without ElasticQuota objects.
    quotas: list[QuotaSummary] = field(default_factory=list)

    def __repr__(self) -> str:
        # Counts only: asyncio.run (3.11) builds its task's repr, result included, while it
        # restores the SIGINT handler, and the generated repr of every pod of a large run would
        # take more memory for a moment than the report.
        s = self.summary
        return (
            f"SimResult(pods={len(self.pods)}, scheduled={s.scheduled}, unschedulable={s.unschedulable}, "
            f"waiting={s.waiting}, nodes={len(self.nodes)}, warnings={len(self.warnings)})"
        )

    def pod(self, key: str) -> PodResult:
        """The result for ``namespace/name`` (KeyError if it was not pending for our profiles)."""
        for p in self.pods:
            if p.key == key:
                return p
        raise KeyError(key)


def simulate(
    paths: Sequence[PathLike],
    *,
    config_path: PathLike | None = None,
    explain: bool = False,
    explain_pods: Collection[str] = (),
    seed: int = 0,
    bind_hook: BindHook | None = None,
    registry: Registry | None = None,
    tracer: CycleTracer | None = None,
) -> SimResult:
    """Load manifests and a profile, schedule every pending pod, report where each one went.

    Raises :class:`~koordsched.backends.sim.loader.InputError` for unusable manifests and
    :class:`~koordsched.config.errors.ConfigError` for an invalid profile. ``bind_hook`` injects
    bind failures (tests); ``registry`` replaces the in-tree plugins (out-of-tree plugins, tests);
    ``tracer`` traces the cycles as ``run`` does (OTEL_TRACES_EXPORTER).
    """
    return asyncio.run(
        simulate_async(
            paths,
            config_path=config_path,
            explain=explain,
            explain_pods=explain_pods,
            seed=seed,
            bind_hook=bind_hook,
            registry=registry,
            tracer=tracer,
        )
    )


async def simulate_async(
    paths: Sequence[PathLike],
    *,
    config_path: PathLike | None = None,
    explain: bool = False,
    explain_pods: Collection[str] = (),
    seed: int = 0,
    bind_hook: BindHook | None = None,
    registry: Registry | None = None,
    tracer: CycleTracer | None = None,
) -> SimResult:
    """:func:`simulate` for callers already inside an event loop."""
    registry = registry if registry is not None else in_tree_registry()
    cluster = load_cluster(paths, kind_specs(registry))
    config = load_config(config_path if config_path is not None else default_profile_path(), registry)
    run = simulate_cluster(
        cluster,
        config,
        registry,
        explain=explain,
        explain_pods=explain_pods,
        seed=seed,
        bind_hook=bind_hook,
        tracer=tracer,
    )
    del cluster  # simulate_cluster lets go of the loader's records once they are fed
    return await run


async def simulate_cluster(
    cluster: Cluster,
    config: SchedulerConfig,
    registry: Registry,
    *,
    explain: bool = False,
    explain_pods: Collection[str] = (),
    seed: int = 0,
    bind_hook: BindHook | None = None,
    metrics: MetricsSink | None = None,
    tracer: CycleTracer | None = None,
) -> SimResult:
    """Schedule an already decoded cluster (the decision benchmark builds one in memory)."""
    # Only NodeMetrics carry an update time: the others are passed over.
    clock = VirtualClock(wall_start=newest_update_time(o.obj for o in cluster.objects))
    port = SimPort(bind_hook)
    recorder = AttemptRecorder(explain, explain_pods)
    sched = Scheduler(
        config,
        registry,
        port,
        clock,
        metrics=metrics or SchedulerMetrics(),
        seed=seed,
        observer=recorder,
        tracer=tracer,
    )
    port.attach(sched)
    warnings = list(cluster.warnings)
    settle_input(cluster)
    _feed(sched, port, cluster, warnings)
    # The plugins' controllers; one that follows the load (Reservations already expired at the
    # start fail and free their nodes) acts before any pod is placed.
    controllers = simulated_controllers(sched, port)
    controllers.at(Moment.LOADED)
    gpus = gpu_capacities(o.obj for o in cluster.objects)
    nodes, pods = cluster.nodes, cluster.pods
    # The loader's record of each object (some 110 bytes a pod) is not needed past the feed: held
    # by no one else (simulate_async lets go too), it is freed before the run.
    del cluster
    mix = input_mix(pods)
    devices = sched_devices(sched)
    before = measure(sched.cache.snapshot, gpus, mix, devices)
    log.info(
        "simulating %d nodes and %d pods with profile %s; queue: %s",
        len(nodes),
        len(pods),
        config.source,
        ", ".join(f"{q} {n}" for q, n in sched.queue.counts().items()),
    )
    # numba compiles on first use; warm up now so compile time never counts as scheduling time.
    registry.warm_up()
    sched.cache_synced()
    # What is loaded lives as long as the run: frozen, and the loop runs under its own collector
    # thresholds (koordsched/scheduler/collector.py); restored after the run.
    collector = LoopCollector()
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        await _run_until_settled(sched, clock, port, controllers)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        controllers.at(Moment.SETTLED)  # the controllers' last word (a Reservation's owners)
        result = _collect(sched, port, recorder, nodes, pods, warnings, wall, explain)
        result.summary.cpu_seconds = cpu
        result.volumes = volume_results(sched.objects.get(PVC_KIND, {}), port.pods, port.volumes.provisioned)
        result.notices = config.not_implemented()
        result.missing_defaults = {
            p.scheduler_name: list(p.missing_defaults) for p in config.profiles if p.missing_defaults
        }
        result.summary.fragmentation = FragmentationReport(
            before=before, after=measure(sched.cache.snapshot, gpus, mix, devices)
        )
    finally:
        collector.restore()
        # Pods still held at Permit have binding tasks; end them so none outlives the run.
        await sched.cancel_bindings()
    return result


_PC_REFUSED = "ignored: pods naming it fail as if it did not exist"


def _feed(sched: Scheduler, port: SimPort, cluster: Cluster, warnings: list[str]) -> None:
    """Hand objects to the scheduler as a watch would: classes, objects, nodes, bound pods, pending pods."""
    node_names = {n.metadata.name for n in cluster.nodes}
    for o in cluster.feed_order():
        if o.role == "priorityclass":
            pc: PriorityClass = o.obj
            refused = sched.on_priority_class(pc)
            if refused and "is forbidden" in refused:  # the loader warned of the others already
                warnings.append(f"{o.origin} (PriorityClass {o.key}): {refused}; {_PC_REFUSED}")
        elif o.role == "node":
            node: Node = o.obj
            sched.on_node_add(node)
        elif o.role == "pod":
            pod: Pod = o.obj
            port.add_pod(pod)
            if pod.spec.node_name and pod.spec.node_name not in node_names:
                warnings.append(
                    f"{o.origin} (Pod {o.key}): bound to node {pod.spec.node_name!r}, not in the input"
                )
            sched.on_pod_add(pod)
        else:
            sched.on_object(o.kind, o.key, o.obj)
    warnings.extend(sched.cache.bad_nodes.values())


async def _let_bindings_run(sched: Scheduler, port: SimPort) -> None:
    """Yield to binding tasks whose Permit wait was settled, until each has finished its bind,
    then deliver the watch updates that confirm the binds.

    Binds are done without real I/O, so one pass of the loop per task normally suffices;
    the bound guards against a plugin that keeps settling waits forever.
    """
    for _ in range(10_000):
        if not any(wp.verdict is not None for wp in sched.waiting_pods):
            break
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    port.deliver()


def simulated_controllers(sched: Scheduler, port: SimPort) -> SimControllers:
    """The controllers the plugins of ``sched``'s profiles declared, as the simulator runs them."""
    return SimControllers(sched.controllers(), sched, port)


async def _run_until_settled(
    sched: Scheduler, clock: VirtualClock, port: SimPort, controllers: SimControllers | None = None
) -> None:
    """Schedule until nothing more can be placed: drain activeQ, then move virtual time to the next
    backoff expiry, and stop after a few advances in a row that bound nothing."""
    if controllers is None:
        controllers = simulated_controllers(sched, port)
    idle = 0
    advanced = False
    mark = len(port.bound)
    while True:
        while await sched.step():
            if sched.binding_in_flight:
                await _let_bindings_run(sched, port)
            else:
                port.deliver()
        await _let_bindings_run(sched, port)
        if sched.queue.counts()["active"]:
            continue  # a settled Permit wait can send pods back to activeQ
        if controllers and controllers.round():
            continue  # e.g. evictions: their delete events requeue the pods waiting for room
        if len(port.bound) > mark:
            idle = 0
        elif advanced:
            idle += 1
        mark = len(port.bound)
        # Controllers run on virtual time too (a quota over its runtime is revoked), however
        # long nothing binds.
        due = controllers.next_due()
        if idle >= MAX_IDLE_ADVANCES and due is None:
            break
        expiry = sched.queue.next_backoff_expiry()
        # Pods held at Permit time out on virtual time too: a gang that never completes is
        # rejected at its deadline, as in a cluster, without the run sleeping.
        deadline = sched.waiting_pods.next_deadline()
        if due is not None and all(t is None or due < t for t in (deadline, expiry)):
            clock.advance_to(due)
            advanced = True
            continue
        if deadline is not None and (expiry is None or deadline < expiry):
            clock.advance_to(deadline)
            expired = sched.waiting_pods.expire(clock.now())
            log.debug("virtual time %.1fs: %d pods timed out at Permit", deadline, expired)
            advanced = True
            continue
        if expiry is None:
            break
        clock.advance_to(expiry)
        controllers.at(Moment.BACKOFF_EXPIRED)
        moved = sched.queue.flush_backoff_completed()
        log.debug("virtual time %.1fs: %d pods out of backoff", expiry, moved)
        advanced = True


def _collect(
    sched: Scheduler,
    port: SimPort,
    recorder: AttemptRecorder,
    nodes: list[Node],
    input_pods: list[Pod],
    warnings: list[str],
    wall: float,
    explain: bool,
) -> SimResult:
    attempts = recorder.counts
    explanations = recorder.explanations
    summary = Summary(nodes=len(nodes))
    pods = PodResults(port.bound, attempts)
    for pod in input_pods:
        if pod.spec.node_name:
            gone = port.preempted.get(pod.key)
            if gone is not None:
                ns, name = pod.metadata.namespace, pod.metadata.name
                pods.append(PodResult(ns, name, gone.node, PREEMPTED, gone.message))
                summary.preempted += 1
            revoked = port.revoked.get(pod.key)
            if revoked is not None:
                ns, name = pod.metadata.namespace, pod.metadata.name
                pods.append(PodResult(ns, name, revoked.node, REVOKED, revoked.message))
                summary.revoked += 1
            continue
        finished = pod.status.phase in ("Succeeded", "Failed") or pod.metadata.deletion_timestamp
        if finished or not sched.responsible_for(pod):
            summary.ignored += 1
            continue
        key = pod.key
        explained = recorder.explains(key)
        if not explained and key in port.bound and key not in port.preempted and key not in port.revoked:
            pods.append_bound(pod)  # the usual case: its result is read from its bind record
            summary.pods += 1
            summary.scheduled += 1
            continue
        r = _pod_result(sched, port, pod)
        r.attempts = attempts.get(r.key, 0)
        if explained:
            r.explain = explanations.get(r.key, [])
            r.verdicts = recorder.verdicts.get(r.key, [])
        pods.append(r)
        summary.pods += 1
        if r.status == SCHEDULED:
            summary.scheduled += 1
        elif r.status == WAITING:
            summary.waiting += 1
        elif r.status == PREEMPTED:
            summary.preempted += 1
        elif r.status == REVOKED:
            summary.revoked += 1
        else:
            summary.unschedulable += 1
    summary.wall_seconds = wall
    summary.gangs = _gangs(sched)
    warnings.extend(port.pod_warnings)
    # A gang whose PodGroup or first pod cannot be read: every member says why; the warning names it once.
    warnings.extend(
        f"gang {g.id} is refused: {g.error}; its pods are not scheduled" for g in summary.gangs if g.error
    )
    quotas = quota_usage(sched)
    # An object that cannot be read was reported by the loader already; what the tree refuses was not.
    warnings.extend(
        f"{q.refusal}; pods charged to quota {q.name} are refused"
        for q in quotas
        if " is refused: " in q.refusal
    )
    result = SimResult(
        pods,
        summary,
        _node_usage(sched, nodes),
        warnings,
        port,
        explain,
        recorder.explain_pods,
        quotas=quotas,
    )
    result.reservations = reservation_results(sched.objects, sched.cache.owners_of)
    return result


def _gangs(sched: Scheduler) -> list[GangReport]:
    seen: dict[str, GangReport] = {}
    for fw in sched.frameworks.values():
        plugin = fw.plugins.get(Coscheduling.name)
        if isinstance(plugin, Coscheduling):
            for report in plugin.gangs():
                seen.setdefault(report.id, report)
    return [seen[k] for k in sorted(seen)]


def quota_usage(sched: Scheduler) -> list[QuotaSummary]:
    """The first ElasticQuota-running profile's quotas, when the input has ElasticQuota objects:
    every quota of an object, and the default and system groups when pods were charged to them."""
    for fw in sched.frameworks.values():
        found = summaries_of(fw.plugins)
        if found is None:
            continue
        if not any(q.key for q in found):
            return []
        return [q for q in found if q.key or q.request or q.used]
    return []


def _pod_result(sched: Scheduler, port: SimPort, pod: Pod) -> PodResult:
    key = pod.key
    ns, name = pod.metadata.namespace, pod.metadata.name
    gone = port.preempted.get(key)
    if gone is not None:
        return PodResult(ns, name, gone.node, PREEMPTED, gone.message)
    revoked = port.revoked.get(key)
    if revoked is not None:
        return PodResult(ns, name, revoked.node, REVOKED, revoked.message)
    record = port.bound.get(key)
    if record is not None:
        return PodResult(ns, name, record.node, SCHEDULED, "", record.annotations)
    uid = pod.identity
    wp = sched.waiting_pods.get(uid)
    if wp is not None and wp.verdict is None:
        plugins = ", ".join(wp.pending_plugins())
        return PodResult(ns, name, None, WAITING, f"waiting at Permit for plugins [{plugins}]")
    queued = sched.queue.get(uid)
    if queued is not None and queued.gated and key not in port.failures:
        plugin = queued.gating_plugin or "PreEnqueue"
        if plugin == "SchedulingGates":
            message = SCHEDULING_GATED_MESSAGE
        elif queued.gating_message:
            message = queued.gating_message  # e.g. Coscheduling's "gang child pod not collect enough"
        else:
            message = f"waiting for plugin {plugin} at PreEnqueue"
        return PodResult(ns, name, None, UNSCHEDULABLE, message)
    message = port.failures.get(key, "not scheduled")
    return PodResult(ns, name, None, UNSCHEDULABLE, message)


def _node_usage(sched: Scheduler, nodes: list[Node]) -> list[NodeUsage]:
    snap = sched.cache.snapshot
    out: list[NodeUsage] = []
    for node in nodes:
        info = snap.get(node.metadata.name)
        if info is None:
            continue  # left out of scheduling (invalid allocatable): already a warning
        alloc = info.allocatable_map()
        used = info.requested_map()
        resources = {r: (used.get(r, 0), alloc.get(r, 0)) for r in ("cpu", "memory")}
        for r in sorted(set(alloc) | set(used)):
            if r not in resources and is_scalar_resource_name(r) and (alloc.get(r) or used.get(r)):
                resources[r] = (used.get(r, 0), alloc.get(r, 0))
        out.append(
            NodeUsage(
                name=info.name,
                pods=len(info.pods),
                max_pods=info.allowed_pods,
                unschedulable=node.spec.unschedulable,
                resources=resources,
            )
        )
    return out
