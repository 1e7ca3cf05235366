"""``deschedule``: one descheduling round over some manifests, then the scheduler on the moved pods.

The cluster is loaded and scheduled as ``simulate`` does (pending pods are placed first), then
the descheduler's profiles run over it: Balance plugins ask the MigrationController for
evictions, which become PodMigrationJobs; arbitration applies the limits, and each job that
passes is carried out in memory. EvictDirectly deletes the pod and lets its replacement (the
same spec, unbound, as its controller would recreate it) be scheduled. ReservationFirst creates
the Reservation the kube backend would create; the scheduler schedules it (its reserve pod)
while the old pod still runs, the pod is evicted once it is Available, and the replacement
allocates it (``reservation-allocated``) as any pod its owners match would.

LowNodeLoad acts on a node only after more than ``consecutiveAbnormalities`` over-threshold
rounds; the metrics of a file do not change, so the rounds are run back to back (the metrics
stay fresh) until the first one that asks for a migration (at most that many plus one), as a
running descheduler would after watching the same load for that long.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from koordsched.api.node_metric import MetricError, newest_update_time, parse_node_metric, resource_value
from koordsched.backends.sim.deschedule_port import SimMigrationPort, SimReservation
from koordsched.backends.sim.fragmentation import FragmentationReport, input_mix, measure, sched_devices
from koordsched.backends.sim.loader import kind_specs, load_cluster
from koordsched.backends.sim.port import SimPort
from koordsched.backends.sim.runner import _feed, _run_until_settled
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import load_config
from koordsched.descheduler.config.default import default_descheduler_config_path
from koordsched.descheduler.config.load import DeschedulerConfig, load_descheduler_config
from koordsched.descheduler.handle import SchedulerHandle
from koordsched.descheduler.migration import job as pmj
from koordsched.descheduler.migration.controller import Job
from koordsched.descheduler.plugins.gpubalance import GPUBalance
from koordsched.descheduler.plugins.lownodeload import LowNodeLoad
from koordsched.descheduler.plugins.lownodeload.detector import Detector
from koordsched.descheduler.plugins.lownodeload.usage import node_total
from koordsched.descheduler.registry import in_tree_catalog
from koordsched.descheduler.runtime import Profile, build_profiles, run_round
from koordsched.observability.metrics import SchedulerMetrics
from koordsched.plugins.deviceshare import gpu_capacities
from koordsched.plugins.registry import in_tree_registry
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]

#: Reconcile passes before the simulator gives up on jobs that make no progress.
MAX_RECONCILE_PASSES = 10_000


@dataclass
class Migration:
    """One PodMigrationJob and what became of it."""

    pod: str
    node: str
    plugin: str
    reason: str
    mode: str
    phase: str
    #: Where the replacement was placed; None when it was not (or the job did not run).
    target: str | None = None
    #: Why the job waits (a limit) or failed.
    message: str = ""
    job: str = ""
    #: ReservationFirst: the Reservation the job created, as it stands at the end.
    reservation: SimReservation | None = None


@dataclass
class NodeLoad:
    """A node's measured usage (NodeMetric) before, and as it would be after the migrations."""

    name: str
    #: resource -> (before, after, total), canonical units.
    resources: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    has_metric: bool = True


@dataclass
class DescheduleResult:
    migrations: list[Migration]
    nodes: list[NodeLoad]
    fragmentation: FragmentationReport
    rounds: int
    dry_run: bool
    warnings: list[str]
    #: (profile, plugin, pod, node, reason) asked in dry run: nothing was moved.
    dry_run_decisions: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    config_source: str = ""
    #: Pods that were pending before the round and were placed after it (room it made).
    placed_after: list[tuple[str, str]] = field(default_factory=list)

    def __repr__(self) -> str:
        # Counts only, as SimResult's: asyncio.run (3.11) builds its task's repr, result
        # included, and every node's load written out would cost a large cluster's run a spike.
        return (
            f"DescheduleResult(migrations={len(self.migrations)}, nodes={len(self.nodes)}, "
            f"rounds={self.rounds}, dry_run={self.dry_run}, warnings={len(self.warnings)})"
        )


def deschedule(
    paths: Sequence[PathLike],
    *,
    config_path: PathLike | None = None,
    scheduler_config_path: PathLike | None = None,
    seed: int = 0,
) -> DescheduleResult:
    """Raises InputError for unusable manifests and ConfigError for an invalid config."""
    return asyncio.run(
        deschedule_async(
            paths, config_path=config_path, scheduler_config_path=scheduler_config_path, seed=seed
        )
    )


async def deschedule_async(
    paths: Sequence[PathLike],
    *,
    config_path: PathLike | None = None,
    scheduler_config_path: PathLike | None = None,
    seed: int = 0,
) -> DescheduleResult:
    registry = in_tree_registry()
    cluster = load_cluster(paths, kind_specs(registry))
    sched_config = load_config(
        scheduler_config_path if scheduler_config_path is not None else default_profile_path(), registry
    )
    dconfig = load_descheduler_config(
        config_path if config_path is not None else default_descheduler_config_path(), in_tree_catalog()
    )
    clock = VirtualClock(wall_start=newest_update_time(o.obj for o in cluster.objects))
    port = SimPort()
    sched = Scheduler(sched_config, registry, port, clock, metrics=SchedulerMetrics(), seed=seed)
    port.attach(sched)
    warnings = list(cluster.warnings)
    _feed(sched, port, cluster, warnings)
    registry.warm_up()
    try:
        await _run_until_settled(sched, clock, port)
        waiting_before = {key for key, pod in port.pods.items() if not pod.spec.node_name}
        gpus = gpu_capacities(o.obj for o in cluster.objects)
        mix = input_mix(cluster.pods)
        devices = sched_devices(sched)
        before = measure(sched.cache.snapshot, gpus, mix, devices)
        profiles = build_profiles(dconfig, lambda: SchedulerHandle(sched))
        rounds = _rounds(dconfig, profiles)
        sim_port = SimMigrationPort(sched, port, clock)
        jobs = [j for p in profiles for j in p.controller.jobs.values()]
        for prof in profiles:
            await _carry_out(prof, sim_port, clock)
        migrations = [_migration(j, sim_port) for j in jobs]
        loads = _loads(profiles[0].handle if profiles else SchedulerHandle(sched), sim_port)
        after = measure(sched.cache.snapshot, gpus, mix, devices)
        placed_after = [
            (key, pod.spec.node_name)
            for key, pod in port.pods.items()
            if key in waiting_before and pod.spec.node_name
        ]
    finally:
        await sched.cancel_bindings()
    return DescheduleResult(
        migrations=migrations,
        nodes=loads,
        fragmentation=FragmentationReport(before=before, after=after),
        rounds=rounds,
        dry_run=dconfig.dry_run,
        warnings=warnings,
        dry_run_decisions=_dry_run_decisions(profiles),
        config_source=dconfig.source,
        placed_after=placed_after,
    )


def _max_rounds(profiles: list[Profile]) -> int:
    most = 1
    for prof in profiles:
        for plugin in prof.balance:
            if isinstance(plugin, LowNodeLoad):
                for pool in plugin.args.pools():
                    most = max(most, pool.anomaly[1] + 1)
    return most


def _rounds(config: DeschedulerConfig, profiles: list[Profile]) -> int:
    nodes = profiles[0].handle.nodes() if profiles else []
    limit = _max_rounds(profiles)
    r = 0
    while r < limit:
        run_round(config, profiles, nodes)
        r += 1
        asked = any(p.controller.jobs for p in profiles) or any(
            isinstance(pl, (LowNodeLoad, GPUBalance)) and pl.decisions for p in profiles for pl in p.balance
        )
        if asked or r == limit:
            return r
        # Back to back on the same metrics: a file's NodeMetrics stand for what koordlet keeps
        # reporting, so they must not expire while the detector counts rounds. Nothing but the
        # detectors' streaks changes from one such round to the next, so the rounds before the
        # first detector turns Anomaly are counted, not played (consecutiveAbnormalities may be
        # any uint32); with no streak running, every later round is this one again.
        skip = _rounds_without_change(profiles)
        if skip is None:
            return limit
        skip = min(skip, limit - r - 1)
        _fast_forward(profiles, skip)
        r += skip
    return limit


def _detectors(profiles: list[Profile]) -> list[Detector]:
    return [
        d
        for prof in profiles
        for plugin in prof.balance
        if isinstance(plugin, LowNodeLoad)
        for d in plugin.detectors.detectors()
    ]


def _rounds_without_change(profiles: list[Profile]) -> int | None:
    """Rounds to come in which no detector turns Anomaly (None: no streak is running)."""
    marks = [m for d in _detectors(profiles) if (m := d.marks_to_anomaly()) is not None]
    return min(marks) - 1 if marks else None


def _fast_forward(profiles: list[Profile], rounds: int) -> None:
    """The effect of ``rounds`` more rounds with the same nodes over their thresholds."""
    for d in _detectors(profiles):
        if d.marks_to_anomaly() is not None:
            d.consecutive_abnormal += rounds


def _dry_run_decisions(profiles: list[Profile]) -> list[tuple[str, str, str, str, str]]:
    out: list[tuple[str, str, str, str, str]] = []
    for prof in profiles:
        for plugin in prof.balance:
            if isinstance(plugin, (LowNodeLoad, GPUBalance)):
                out += [
                    (prof.name, plugin.name, d.pod.key, d.node, d.reason)
                    for d in plugin.decisions
                    if not d.evicted
                ]
    return out


async def _carry_out(prof: Profile, port: SimMigrationPort, clock: VirtualClock) -> None:
    """Arbitrate, then reconcile the jobs that passed until each is finished (time moves on
    while they wait for the rate limiter); arbitrate again while that lets more through."""
    ctl = prof.controller
    for _ in range(MAX_RECONCILE_PASSES):
        await ctl.collect(port)
        running = [j for j in ctl.jobs.values() if j.passed and not j.finished]
        if not running:
            if not ctl.arbitrate():
                return
            continue
        progressed = False
        for j in running:
            before = (j.job.status.phase, len(j.job.status.conditions), j.reservation)
            await ctl.reconcile(j, port)
            progressed |= (j.job.status.phase, len(j.job.status.conditions), j.reservation) != before
        await port.settle()
        if not progressed:
            wait = ctl.limiter.next_at(clock.wall()) - clock.wall()
            clock.advance(max(wait, 1.0))
        ctl.arbitrate()
        if all(j.finished for j in ctl.jobs.values() if j.passed) and not any(
            not j.passed and not j.finished and not j.waiting for j in ctl.jobs.values()
        ):
            await ctl.collect(port)
            return


def _migration(j: Job, port: SimMigrationPort) -> Migration:
    st = j.job.status
    message = j.waiting if not j.passed and not j.finished else st.message
    if j.passed and j.waited:
        message = f"{message}; waited for {j.waited}" if message else f"waited for {j.waited}"
    return Migration(
        pod=j.pod.key,
        node=j.node,
        plugin=j.trigger,
        reason=j.reason,
        mode=j.job.spec.mode,
        phase=j.job.phase,
        target=port.placed.get(j.pod.key) if j.job.phase == pmj.SUCCEEDED else None,
        message=message,
        job=j.name,
        reservation=port.reservation_report(j.name),
    )


def _metric_usage(
    handle: SchedulerHandle, node: str
) -> tuple[dict[str, int], dict[tuple[str, str], dict[str, int]]] | None:
    metric = handle.node_metric(node)
    if metric is None:
        return None
    try:
        view = parse_node_metric(metric)
    except MetricError:
        return None
    if view.node_usage is None:
        return None

    def amounts(u: dict[str, Fraction] | object) -> dict[str, int]:
        assert isinstance(u, dict)
        return {n: resource_value(n, q) for n, q in u.items() if n in ("cpu", "memory")}

    return amounts(view.node_usage), {k: amounts(v) for k, v in view.pod_usages.items()}


def _loads(handle: SchedulerHandle, port: SimMigrationPort) -> list[NodeLoad]:
    """NodeMetric usage before; after = before - the moved pods' usage + what moved in."""
    usage: dict[str, dict[str, int]] = {}
    pods: dict[tuple[str, str], dict[str, int]] = {}
    for node in handle.nodes():
        got = _metric_usage(handle, node.metadata.name)
        if got is not None:
            usage[node.metadata.name] = got[0]
            pods.update(got[1])
    delta: dict[str, dict[str, int]] = {}
    for key, (source, target) in port.moves.items():
        ns, _, name = key.partition("/")
        u = pods.get((ns, name), {})
        for n, q in u.items():
            delta.setdefault(source, {})[n] = delta.get(source, {}).get(n, 0) - q
            if target is not None:
                delta.setdefault(target, {})[n] = delta.get(target, {}).get(n, 0) + q
    out: list[NodeLoad] = []
    for node in handle.nodes():
        name = node.metadata.name
        total = node_total(node)
        if name not in usage:
            out.append(NodeLoad(name, {}, has_metric=False))
            continue
        res = {}
        for n in ("cpu", "memory"):
            b = usage[name].get(n, 0)
            res[n] = (b, b + delta.get(name, {}).get(n, 0), total.get(n, 0))
        out.append(NodeLoad(name, res))
    return out
