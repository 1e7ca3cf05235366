"""The MigrationController's writes, in memory: evictions delete pods from the simulated cluster,
and a replacement pod (named after its PodMigrationJob, unbound, the same spec) stands for what
the workload's controller would create, or for the Reservation holding its place."""

from __future__ import annotations

import msgspec

from koordsched.api.core import Affinity, Pod
from koordsched.backends.sim.port import SimPort
from koordsched.backends.sim.runner import _run_until_settled
from koordsched.descheduler.migration import job as pmj
from koordsched.descheduler.migration.args import RESERVATION_FIRST
from koordsched.descheduler.migration.controller import (
    EVICTED,
    GONE,
    EvictResult,
    ReservationState,
    template_affinity,
)
from koordsched.descheduler.migration.reservation import restrict_affinity, skip_node_affinity
from koordsched.descheduler.nodefit import replacement_pod
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.scheduler import Scheduler


class SimMigrationPort:
    def __init__(self, sched: Scheduler, port: SimPort, clock: VirtualClock) -> None:
        self.sched = sched
        self.port = port
        self.clock = clock
        #: Migrated pod key -> (source node, node of its replacement or None while unplaced).
        self.moves: dict[str, tuple[str, str | None]] = {}
        #: Migrated pod key -> the node its replacement was placed on.
        self.placed: dict[str, str] = {}
        #: Job name -> the replacement pod's key.
        self._replacements: dict[str, str] = {}
        #: Migrated pod key -> its replacement's key.
        self._sources: dict[str, str] = {}
        #: (job, pod, reason, message, warning) as the kube backend would record events.
        self.events: list[tuple[str, str, str, str, bool]] = []

    async def settle(self) -> None:
        """Schedule until nothing more can be placed; note where each replacement went."""
        await _run_until_settled(self.sched, self.clock, self.port)
        for source, key in self._sources.items():
            bound = self.port.pods.get(key)
            if bound is not None and bound.spec.node_name:
                self.moves[source] = (self.moves[source][0], bound.spec.node_name)
                self.placed[source] = bound.spec.node_name

    def _create_replacement(self, pod: Pod, job: pmj.PodMigrationJob) -> str:
        new = replacement_pod(pod)
        name = job.metadata.name
        new = msgspec.structs.replace(
            new, metadata=msgspec.structs.replace(new.metadata, name=name, uid=f"uid-{name}")
        )
        if job.spec.mode == RESERVATION_FIRST:
            # It stands for the Reservation too: held to the Reservation's node constraints (the
            # planned nodes, never the node it leaves).
            opts = job.spec.reservation_options
            planned = template_affinity(opts.template) if opts is not None else None
            own = msgspec.to_builtins(pod.spec.affinity) if pod.spec.affinity is not None else None
            if planned is not None:
                own = restrict_affinity(own, planned)
            affinity = skip_node_affinity(own, pod.spec.node_name)
            if affinity is not None:
                new = msgspec.structs.replace(
                    new, spec=msgspec.structs.replace(new.spec, affinity=msgspec.convert(affinity, Affinity))
                )
        self.port.add_pod(new)
        self.sched.on_pod_add(new)
        self._replacements[name] = new.key
        self._sources[pod.key] = new.key
        self.moves.setdefault(pod.key, (pod.spec.node_name, None))
        return new.key

    async def evict(self, pod: Pod, job: pmj.PodMigrationJob, policy: str) -> EvictResult:
        current = self.port.pods.get(pod.key)
        if current is None or current.spec.node_name != pod.spec.node_name:
            return EvictResult(GONE, f"pod {pod.key} is no longer on node {pod.spec.node_name}")
        del self.port.pods[pod.key]
        self.sched.on_pod_delete(current)
        self.moves.setdefault(pod.key, (pod.spec.node_name, None))
        if job.spec.mode != RESERVATION_FIRST:
            self._create_replacement(pod, job)
        await self.settle()
        return EvictResult(EVICTED)

    async def create_reservation(self, pod: Pod, job: pmj.PodMigrationJob) -> str:
        self._create_replacement(pod, job)
        await self.settle()
        return job.metadata.name

    async def reservation(self, name: str) -> ReservationState:
        key = self._replacements.get(name)
        if key is None:
            return ReservationState("", missing=True)
        pod = self.port.pods.get(key)
        if pod is None:
            return ReservationState("", missing=True)
        return (
            ReservationState("Available", pod.spec.node_name)
            if pod.spec.node_name
            else ReservationState("Pending")
        )

    async def replacement_bound(self, pod: Pod, job: pmj.PodMigrationJob, reservation: str) -> str | None:
        key = self._replacements.get(reservation)
        bound = self.port.pods.get(key) if key is not None else None
        return bound.spec.node_name if bound is not None and bound.spec.node_name else None

    async def save(self, job: pmj.PodMigrationJob) -> None:
        return None

    def event(
        self, job: pmj.PodMigrationJob, pod: Pod | None, reason: str, message: str, warning: bool
    ) -> None:
        self.events.append((job.metadata.name, pod.key if pod is not None else "", reason, message, warning))
