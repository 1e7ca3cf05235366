"""The MigrationController's writes, in memory: evictions delete pods from the simulated cluster,
a replacement pod (the same spec, unbound) stands for what the workload's controller creates
after an eviction, and ReservationFirst creates the same Reservation the kube backend POSTs.

The Reservation goes to the simulated scheduler as a watched object: the Reservation plugin
schedules its reserve pod (phase Available on a node, in virtual time), the replacement created
after the eviction allocates it (``reservation-allocated``) like any owner-matched pod, and the
reservation controller's sync ends it (``allocateOnce``: Succeeded)."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec

from koordsched.api.core import Pod
from koordsched.api.kinds import RESERVATIONS
from koordsched.api.reservation import Reservation, allocated_reservation, check_reservation
from koordsched.backends.sim.port import SimPort
from koordsched.backends.sim.runner import _run_until_settled, simulated_controllers
from koordsched.descheduler.migration import job as pmj
from koordsched.descheduler.migration.controller import (
    EVICTED,
    GONE,
    EvictResult,
    ReservationState,
    template_affinity,
)
from koordsched.descheduler.migration.reservation import reservation_body, reservation_state
from koordsched.descheduler.nodefit import replacement_pod
from koordsched.framework.controllers import Moment
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.scheduler import Scheduler

#: Fixed namespace for the uids the simulated API server gives the Reservations it creates.
_UID_NAMESPACE = uuid.UUID("6f1c2d55-8b0e-4a53-9d0e-2f4b7a1c9e31")


@dataclass(frozen=True)
class SimReservation:
    """A Reservation a job created, as the report shows it."""

    name: str
    phase: str
    node: str | None
    #: The pod that allocated it (``namespace/name``), or None.
    owner: str | None
    message: str = ""


def _rfc3339(wall: float) -> str:
    return datetime.fromtimestamp(int(wall), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SimMigrationPort:
    def __init__(self, sched: Scheduler, port: SimPort, clock: VirtualClock) -> None:
        self.sched = sched
        self.port = port
        self.clock = clock
        #: Migrated pod key -> (source node, node of its replacement or None while unplaced).
        self.moves: dict[str, tuple[str, str | None]] = {}
        #: Migrated pod key -> the node its replacement was placed on.
        self.placed: dict[str, str] = {}
        #: Migrated pod key -> its replacement's key.
        self._sources: dict[str, str] = {}
        #: Job name -> the Reservation it created.
        self.reservations: dict[str, str] = {}
        #: Reservations deleted (a job's timeout or abort), as they were last.
        self._deleted: dict[str, Reservation] = {}
        #: (job, pod, reason, message, warning) as the kube backend would record events.
        self.events: list[tuple[str, str, str, str, bool]] = []

    async def settle(self) -> None:
        """Schedule until nothing more can be placed; note where each replacement went."""
        controllers = simulated_controllers(self.sched, self.port)
        await _run_until_settled(self.sched, self.clock, self.port, controllers)
        controllers.at(Moment.SETTLED)  # the reservation controller: owners, allocateOnce's end
        for source, key in self._sources.items():
            bound = self.port.pods.get(key)
            if bound is not None and bound.spec.node_name:
                self.moves[source] = (self.moves[source][0], bound.spec.node_name)
                self.placed[source] = bound.spec.node_name

    def _create_replacement(self, pod: Pod, job: pmj.PodMigrationJob) -> str:
        """The workload controller's new pod: a controller's pod gets a new name (its
        ``generateName``, else its name and a dash, then five characters, as a ReplicaSet's), a
        bare pod is recreated under its own name (a Reservation owned by name then matches it)."""
        new = replacement_pod(pod)
        controlled = any(r.controller for r in pod.metadata.owner_references)
        suffix = hashlib.sha256(job.metadata.name.encode()).hexdigest()[:5]
        base = pod.metadata.generate_name or f"{pod.metadata.name}-"
        name = f"{base}{suffix}" if controlled else pod.metadata.name
        new = msgspec.structs.replace(
            new, metadata=msgspec.structs.replace(new.metadata, name=name, uid=f"uid-{job.metadata.name}")
        )
        self.port.add_pod(new)
        self.sched.on_pod_add(new)
        self._sources[pod.key] = new.key
        self.moves.setdefault(pod.key, (pod.spec.node_name, None))
        return new.key

    async def evict(self, pod: Pod, job: pmj.PodMigrationJob, policy: str) -> EvictResult:
        current = self.port.pods.get(pod.key)
        if current is None or current.spec.node_name != pod.spec.node_name:
            return EvictResult(GONE, f'pods "{pod.metadata.name}" not found')
        del self.port.pods[pod.key]
        self.sched.on_pod_delete(current)
        self.moves.setdefault(pod.key, (pod.spec.node_name, None))
        self._create_replacement(pod, job)
        await self.settle()
        return EvictResult(EVICTED)

    # --- reservations --------------------------------------------------------------------------

    def _store(self) -> dict[str, Reservation]:
        return dict(self.sched.objects.get(RESERVATIONS.kind, {}))

    async def create_reservation(self, pod: Pod, job: pmj.PodMigrationJob) -> str:
        opts = job.spec.reservation_options
        body = reservation_body(pod, job, template_affinity(opts.template) if opts is not None else None)
        name = str(body["metadata"]["name"])
        if name in self._store():
            return name  # as the kube backend's 409: created by an earlier try
        # What the API server adds on create: a uid and the creation time (TTLs count from it).
        body["metadata"]["uid"] = str(uuid.uuid5(_UID_NAMESPACE, name))
        body["metadata"]["creationTimestamp"] = _rfc3339(self.clock.wall())
        try:
            obj = msgspec.convert(body, Reservation)
            check_reservation(obj)
        except (msgspec.ValidationError, ValueError) as err:
            raise RuntimeError(f"creating Reservation {name}: {err}") from None
        self.sched.on_object(RESERVATIONS.kind, name, obj)
        self.reservations[job.metadata.name] = name
        await self.settle()
        return name

    async def reservation(self, name: str) -> ReservationState:
        r = self._store().get(name)
        if r is None:
            return ReservationState("", missing=True)
        return reservation_state(r)

    async def delete_reservation(self, name: str) -> None:
        r = self._store().get(name)
        if r is not None:
            # The report keeps what it was when deleted (its node, its scheduler's message).
            self._deleted[name] = r
            self.sched.on_object(RESERVATIONS.kind, name, None)
            await self.settle()

    async def replacement_bound(
        self, pod: Pod, job: pmj.PodMigrationJob, reservation: str
    ) -> tuple[str, str, bool] | None:
        for p in self.port.pods.values():
            allocated = allocated_reservation(p) if p.spec.node_name else None
            if allocated is not None and allocated.name == reservation:
                # No kubelet here: a bound pod runs, and is Ready, at once.
                return p.key, p.spec.node_name, True
        return None

    async def save(self, job: pmj.PodMigrationJob) -> None:
        return None

    def event(
        self, job: pmj.PodMigrationJob, pod: Pod | None, reason: str, message: str, warning: bool
    ) -> None:
        self.events.append((job.metadata.name, pod.key if pod is not None else "", reason, message, warning))

    def reservation_report(self, job: str) -> SimReservation | None:
        """The Reservation ``job`` created, as it stands now (as it was when deleted); None when it
        created none."""
        name = self.reservations.get(job)
        if name is None:
            return None
        r = self._store().get(name)
        phase = ""
        if r is None:
            r, phase = self._deleted.get(name), "Deleted"
            if r is None:
                return SimReservation(name, phase, None, None)
        owners = r.status.current_owners
        owner = f"{owners[0].namespace}/{owners[0].name}" if owners else None
        message = reservation_state(r).message
        return SimReservation(
            name, phase or r.status.phase or "Pending", r.status.node_name or None, owner, message
        )
