"""Leader election over a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

Why not ``kubernetes_asyncio.leaderelection``: it judges expiry by the wall clock, writes local
time with a ``Z``, drops the fraction when microseconds are 0, never counts
``leaseTransitions`` and cannot release on shutdown (ecosystem notes, section 1.7).

As client-go's ``LeaderElector``:

* expiry is judged by when *we* last saw the record change, on the monotonic clock, plus the
  record's ``leaseDurationSeconds``; the server's timestamps are never compared with ours, so
  clock skew cannot cause a takeover (a fresh candidate may wait one lease duration even for a
  stale lease; that is expected);
* acquire and renew are a GET then a PUT carrying the read ``resourceVersion``: a 409 means
  someone else won the race;
* taking over from another holder increments ``leaseTransitions``; renewing keeps
  ``acquireTime``;
* the leader renews every ``retryPeriod`` and gives up when no renewal succeeded for
  ``renewDeadline``;
* on a graceful stop the leader releases the lease (``ReleaseOnCancel``): holder cleared,
  duration 1 s, so a standby takes over at once;
* :meth:`LeaderElector.check` is the ``/healthz`` watchdog (``HealthzAdaptor``): it fails when
  we believe we lead but have not renewed for ``leaseDuration`` + 20 s.

A stop cancels the request in flight (an acquire, a renewal), as client-go's context does. A
cancelled PUT may still have reached the server and been applied, so the Lease may name us
without our knowing: a leader then releases it as usual, and if its copy turned out stale (409)
reads the Lease and releases it from there when it still names us; a candidate whose acquire was cut off
reads the Lease once and releases it if it does name us. Should that fail too (the server
gone), the Lease simply expires: standbys take over ``leaseDuration`` after its last renewal,
exactly as after a crash. Nothing is ever written twice under one resourceVersion, so a stale
write cannot take a Lease from a new holder.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from koordsched.backends.kube.client import TRANSPORT_ERRORS, ApiError, KubeClient
from koordsched.backends.kube.timefmt import micro_time
from koordsched.config.resolved import LeaderElectionConfig
from koordsched.observability.log_ratelimit import RepeatedErrors
from koordsched.observability.metrics import LeaderElectionMetrics

log = logging.getLogger(__name__)

#: client-go's ``JitterFactor`` for the acquire loop.
JITTER_FACTOR = 1.2
#: kube-scheduler's ``NewLeaderHealthzAdaptor(20 * time.Second)``.
HEALTHZ_TOLERANCE = 20.0

_READ_ERRORS: tuple[type[BaseException], ...] = (ApiError, *TRANSPORT_ERRORS)

Callback = Callable[[], None]


def new_identity(hostname: str | None = None) -> str:
    """``hostname_uuid``: unique even for two processes on one host."""
    return f"{hostname or socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True)
class LeaseRecord:
    """The election-relevant part of a Lease's spec; equality is how changes are observed."""

    holder: str
    duration: int
    acquire_time: str | None
    renew_time: str | None
    transitions: int

    @classmethod
    def from_lease(cls, lease: dict[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=spec.get("holderIdentity") or "",
            duration=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )


class LeaderElector:
    """Campaigns for, holds and releases one Lease; see the module docstring for the rules."""

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        release_on_cancel: bool = True,
        on_started_leading: Callback | None = None,
        on_stopped_leading: Callback | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        metrics: LeaderElectionMetrics | None = None,
        metrics_name: str = "",
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self._clock = clock
        self._rng = rng or random.Random()
        #: Failed attempts are logged with a back-off while the same error repeats, then "recovered".
        self.errors = RepeatedErrors(log, clock=clock)
        self._lease: dict[str, Any] | None = None
        self._observed: LeaseRecord | None = None
        self._observed_time = 0.0
        self._reported_leader = ""
        #: A write of ours may have landed without our seeing the answer (cut off, timed out).
        self._unsure = False
        #: The last :meth:`release` was refused with 409.
        self.release_conflict = False
        #: Set while this process holds the lease (between started and stopped leading).
        self.leading = asyncio.Event()
        #: client-go's leader_election_master_status{name=metrics_name}: 0 from the start, 1
        #: while leading (kube-scheduler names it "kube-scheduler", whatever the Lease's name).
        self._metrics = metrics
        self.metrics_name = metrics_name
        self._set_status(False)

    @classmethod
    def from_config(
        cls, client: KubeClient, config: LeaderElectionConfig, identity: str, **kw: Any
    ) -> LeaderElector:
        return cls(
            client,
            namespace=config.resource_namespace,
            name=config.resource_name,
            identity=identity,
            lease_duration=config.lease_duration,
            renew_deadline=config.renew_deadline,
            retry_period=config.retry_period,
            **kw,
        )

    # --- state ---------------------------------------------------------------------------------

    @property
    def lease_path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    @property
    def observed(self) -> LeaseRecord | None:
        return self._observed

    def is_leader(self) -> bool:
        """client-go's ``IsLeader``: the last record we saw names us."""
        return self._observed is not None and self._observed.holder == self.identity

    def leader(self) -> str:
        return self._observed.holder if self._observed is not None else ""

    def check(self) -> str | None:
        """The ``leaderElection`` health check: None when healthy, else why not."""
        if not self.is_leader():
            return None
        if self._clock() - self._observed_time > self.lease_duration + HEALTHZ_TOLERANCE:
            return f"failed election to renew leadership on lease {self.namespace}/{self.name}"
        return None

    def _observe(self, lease: dict[str, Any], now: float, *, force: bool = False) -> LeaseRecord:
        record = LeaseRecord.from_lease(lease)
        self._lease = lease
        if force or record != self._observed:
            self._observed = record
            self._observed_time = now
        if record.holder != self._reported_leader:
            self._reported_leader = record.holder
            if record.holder:
                log.info("lease %s/%s: new leader %s", self.namespace, self.name, record.holder)
                if self.on_new_leader is not None:
                    self.on_new_leader(record.holder)
        return record

    def _valid(self, now: float) -> bool:
        """The observed record has not expired, by our clock since we saw it change."""
        assert self._observed is not None
        duration = self._observed.duration or self.lease_duration
        return self._observed_time + duration > now

    # --- API -----------------------------------------------------------------------------------

    async def _get(self) -> dict[str, Any] | None:
        try:
            body = await self.client.request_bytes(
                "GET", self.lease_path, request_timeout=self.renew_deadline
            )
        except ApiError as err:
            if err.status == 404:
                return None
            raise
        lease: dict[str, Any] = msgspec.json.decode(body)
        return lease

    def _spec(
        self, holder: str, acquire_time: str, renew_time: str, transitions: int, duration: int
    ) -> dict[str, Any]:
        return {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "acquireTime": acquire_time,
            "renewTime": renew_time,
            "leaseTransitions": transitions,
        }

    async def try_acquire_or_renew(self) -> bool:
        """One attempt, as client-go's ``tryAcquireOrRenew``; True when we hold the lease after it."""
        source = f"lease {self.namespace}/{self.name}"
        try:
            held = await self._try_acquire_or_renew()
        except ApiError as err:
            if err.status == 409:
                log.debug("lease %s/%s: lost an update race", self.namespace, self.name)
                self.errors.succeeded(source)
            else:
                self.errors.failed(source, str(err), "%s: %s", source, err)
            return False
        except TRANSPORT_ERRORS as err:
            self.errors.failed(
                source, f"{type(err).__name__}: {err}", "%s: %s: %s", source, type(err).__name__, err
            )
            return False
        self.errors.succeeded(source)
        return held

    async def _try_acquire_or_renew(self) -> bool:
        now = self._clock()
        stamp = micro_time()
        duration = max(1, round(self.lease_duration))
        lease = await self._get()
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(self.identity, stamp, stamp, 0, duration),
            }
            created = await self._write(
                "POST", f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases", body
            )
            self._observe(msgspec.json.decode(created), self._clock(), force=True)
            return True
        old = self._observe(lease, now)
        self._unsure = False  # what we read is the truth, whatever our last write did
        if old.holder and old.holder != self.identity and self._valid(now):
            return False
        if old.holder == self.identity:
            acquire_time, transitions = old.acquire_time or stamp, old.transitions
        else:
            acquire_time, transitions = stamp, old.transitions + 1
        updated = dict(lease)
        updated["spec"] = {
            **(lease.get("spec") or {}),
            **self._spec(self.identity, acquire_time, stamp, transitions, duration),
        }
        body_bytes = await self._write("PUT", self.lease_path, updated)
        self._observe(msgspec.json.decode(body_bytes), self._clock(), force=True)
        return True

    async def _write(self, method: str, path: str, body: dict[str, Any]) -> bytes:
        """A POST or PUT of the Lease; until it is answered, the server may or may not have it."""
        self._unsure = True
        try:
            answer = await self.client.request_bytes(
                method, path, body=body, request_timeout=self.renew_deadline
            )
        except ApiError:
            self._unsure = False  # refused: not applied
            raise
        self._unsure = False
        return answer

    async def release(self) -> bool:
        """Clear the holder if we still hold the lease (client-go's ``release``).

        It writes the version it last saw: a 409 (the Lease moved on) refuses it, nothing is
        clobbered, and :attr:`release_conflict` says so.
        """
        self.release_conflict = False
        if not self.is_leader() or self._lease is None or self._observed is None:
            return True
        stamp = micro_time()
        updated = dict(self._lease)
        updated["spec"] = {
            **(self._lease.get("spec") or {}),
            **self._spec("", stamp, stamp, self._observed.transitions, 1),
        }
        try:
            body = await self.client.request_bytes(
                "PUT", self.lease_path, body=updated, request_timeout=self.renew_deadline
            )
        except ApiError as err:
            self.release_conflict = err.status == 409
            log.warning("lease %s/%s: release failed: %s", self.namespace, self.name, err)
            return False
        except TRANSPORT_ERRORS as err:
            log.warning(
                "lease %s/%s: release failed: %s: %s", self.namespace, self.name, type(err).__name__, err
            )
            return False
        self._observe(msgspec.json.decode(body), self._clock(), force=True)
        log.info("lease %s/%s: released", self.namespace, self.name)
        return True

    async def _release_on_stop(self) -> None:
        """Release; if our copy was stale (a renewal cut off by the stop may have landed), read
        the Lease and release it from there when it still names us."""
        if await self.release() or not self.release_conflict:
            return
        if await self._reread() and self.is_leader():
            await self.release()

    async def _reread(self) -> bool:
        """Read the Lease into our view; False (logged) when it cannot be read."""
        try:
            lease = await self._get()
        except _READ_ERRORS as err:
            log.warning(
                "lease %s/%s: cannot read it: %s: %s", self.namespace, self.name, type(err).__name__, err
            )
            return False
        if lease is None:
            return False
        self._observe(lease, self._clock())
        self._unsure = False
        return True

    async def _release_if_ours(self) -> None:
        """After an acquire cut off by the stop: release the Lease if our write did land."""
        if await self._reread() and self.is_leader():
            log.info("lease %s/%s: the acquire cut off by the stop had landed", self.namespace, self.name)
            await self.release()

    # --- the loops -----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Campaign until leading, then renew; returns when ``stop`` is set or the lease is lost.

        ``on_stopped_leading`` runs in both cases once we led; the caller tells them apart by
        ``stop.is_set()`` (kube-scheduler exits 0 on the first, 1 on the second).
        """
        if not await self._acquire(stop):
            if stop.is_set() and self.release_on_cancel and self._unsure:
                await self._release_if_ours()
            return
        self.leading.set()
        self._set_status(True)
        log.info("lease %s/%s: acquired as %s", self.namespace, self.name, self.identity)
        self._call(self.on_started_leading)
        try:
            await self._renew(stop)
        finally:
            self.leading.clear()
            self._set_status(False)
            if stop.is_set() and self.release_on_cancel:
                await self._release_on_stop()
            self._call(self.on_stopped_leading)

    async def _attempt(self, stop: asyncio.Event, within: float | None) -> bool | None:
        """One :meth:`try_acquire_or_renew`; None when ``stop`` cut it off, False after ``within`` seconds."""
        attempt = asyncio.ensure_future(self.try_acquire_or_renew())
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({attempt, stopper}, timeout=within, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (attempt, stopper):
                t.cancel()
            await asyncio.wait({attempt, stopper})
        if not attempt.cancelled():
            return attempt.result()
        return None if stop.is_set() else False

    async def _acquire(self, stop: asyncio.Event) -> bool:
        log.info("lease %s/%s: attempting to acquire as %s", self.namespace, self.name, self.identity)
        while not stop.is_set():
            ok = await self._attempt(stop, None)  # each request is bounded by renewDeadline
            if ok:
                return True
            if ok is None:
                break
            delay = self.retry_period * (1.0 + JITTER_FACTOR * self._rng.random())
            if await _wait(stop, delay):
                break
        return False

    async def _renew(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            if not await self._renew_within_deadline(stop):
                if not stop.is_set():
                    log.error(
                        "lease %s/%s: failed to renew within %gs; leadership lost",
                        self.namespace,
                        self.name,
                        self.renew_deadline,
                    )
                return
            if await _wait(stop, self.retry_period):
                return

    async def _renew_within_deadline(self, stop: asyncio.Event) -> bool:
        """Retry every ``retry_period`` until a renewal succeeds or ``renew_deadline`` passes.

        True also when ``stop`` cut it short: stopping is not a loss.
        """
        deadline = self._clock() + self.renew_deadline
        while True:
            remaining = deadline - self._clock()
            if remaining <= 0:
                return False
            ok = await self._attempt(stop, remaining)
            if ok is None or ok:
                return True
            pause = min(self.retry_period, deadline - self._clock())
            if pause <= 0:
                return False
            if await _wait(stop, pause):
                return True  # stopping: not a loss

    def _set_status(self, leading: bool) -> None:
        if self._metrics is not None:
            self._metrics.set_leader_status(self.metrics_name, leading)

    def _call(self, callback: Callback | None) -> None:
        if callback is None:
            return
        try:
            callback()
        except Exception:
            log.exception("leader election callback failed")


async def _wait(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds`` unless ``stop`` is set first; True when it was."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()
    return stop.is_set()
