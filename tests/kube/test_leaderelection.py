"""Leader election over a Lease with client-go's rules, on short durations."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from koordsched.backends.kube.client import KubeClient
from koordsched.backends.kube.leaderelection import HEALTHZ_TOLERANCE, LeaderElector, new_identity
from koordsched.observability.metrics import SchedulerMetrics
from tests.kube.fake_apiserver import MICRO_TIME, FakeApiServer
from tests.kube.helpers import eventually

NS, NAME = "koordinator-system", "koord-scheduler"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{NAME}"


class Candidate:
    def __init__(self, client: KubeClient, identity: str, **kw: Any) -> None:
        self.log: list[str] = []
        self.elector = LeaderElector(
            client,
            namespace=NS,
            name=NAME,
            identity=identity,
            lease_duration=kw.pop("lease_duration", 1.0),
            renew_deadline=kw.pop("renew_deadline", 0.6),
            retry_period=kw.pop("retry_period", 0.1),
            on_started_leading=lambda: self.log.append("started"),
            on_stopped_leading=lambda: self.log.append("stopped"),
            **kw,
        )
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> Candidate:
        self.task = asyncio.ensure_future(self.elector.run(self.stop))
        return self

    async def shutdown(self) -> None:
        self.stop.set()
        if self.task is not None:
            await asyncio.wait({self.task})

    async def crash(self) -> None:
        """Die without releasing (the task is cancelled, as a killed process would stop renewing)."""
        if self.task is not None:
            self.task.cancel()
            await asyncio.wait({self.task})


@pytest.fixture
async def candidates() -> AsyncIterator[list[Candidate]]:
    made: list[Candidate] = []
    yield made
    for c in made:
        await c.shutdown()


def spawn(made: list[Candidate], client: KubeClient, identity: str, **kw: Any) -> Candidate:
    c = Candidate(client, identity, **kw).start()
    made.append(c)
    return c


def test_identity_is_hostname_underscore_uuid() -> None:
    ident = new_identity("node-a")
    host, _, uid = ident.partition("_")
    assert host == "node-a" and len(uid) == 36


async def test_acquires_a_missing_lease_and_renews_it(
    api: FakeApiServer, client: KubeClient, candidates: list[Candidate]
) -> None:
    a = spawn(candidates, client, "a")
    await asyncio.wait_for(a.elector.leading.wait(), 5)
    assert a.log == ["started"]
    lease = api.lease(NS, NAME)
    assert lease is not None
    spec = lease["spec"]
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 1
    assert spec["leaseTransitions"] == 0
    assert MICRO_TIME.match(spec["acquireTime"]) and MICRO_TIME.match(spec["renewTime"])
    first_renew, acquired = spec["renewTime"], spec["acquireTime"]
    await eventually(lambda: api.lease(NS, NAME)["spec"]["renewTime"] != first_renew)  # type: ignore[index]
    spec = api.lease(NS, NAME)["spec"]  # type: ignore[index]
    assert spec["acquireTime"] == acquired  # renewing keeps acquireTime
    assert spec["leaseTransitions"] == 0
    assert a.elector.is_leader() and a.elector.check() is None
    # Every write carried the resourceVersion it read (optimistic concurrency).
    assert all(r.body["metadata"].get("resourceVersion") for r in api.requests_to("PUT", LEASE_PATH))


async def test_a_held_lease_is_taken_over_only_after_it_expires(
    api: FakeApiServer, client: KubeClient, candidates: list[Candidate]
) -> None:
    a = spawn(candidates, client, "a")
    await asyncio.wait_for(a.elector.leading.wait(), 5)
    b = spawn(candidates, client, "b")
    await asyncio.sleep(0.5)
    assert not b.elector.leading.is_set()  # a keeps renewing
    assert b.elector.leader() == "a"
    await a.crash()
    t0 = time.monotonic()
    await asyncio.wait_for(b.elector.leading.wait(), 5)
    # b judged expiry by its own observation of the last change: at least ~one lease duration.
    assert time.monotonic() - t0 >= 0.5
    spec = api.lease(NS, NAME)["spec"]  # type: ignore[index]
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1


async def test_release_on_stop_lets_a_standby_take_over_at_once(
    api: FakeApiServer, client: KubeClient, candidates: list[Candidate]
) -> None:
    a = spawn(candidates, client, "a", lease_duration=10.0, renew_deadline=5.0, retry_period=0.1)
    await asyncio.wait_for(a.elector.leading.wait(), 5)
    b = spawn(candidates, client, "b", lease_duration=10.0, renew_deadline=5.0, retry_period=0.1)
    await asyncio.sleep(0.3)
    await a.shutdown()
    assert a.log == ["started", "stopped"]
    spec = api.lease(NS, NAME)["spec"]  # type: ignore[index]
    assert spec["holderIdentity"] in ("", "b")
    # Far sooner than the 10 s lease: the holder was cleared.
    await asyncio.wait_for(b.elector.leading.wait(), 2)
    spec = api.lease(NS, NAME)["spec"]  # type: ignore[index]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1


async def test_renewals_failing_past_the_deadline_lose_leadership(
    api: FakeApiServer, client: KubeClient, candidates: list[Candidate]
) -> None:
    now = [0.0]
    a = spawn(candidates, client, "a", clock=lambda: time.monotonic() + now[0])
    await asyncio.wait_for(a.elector.leading.wait(), 5)
    api.fail("PUT", LEASE_PATH, 500, times=1000)
    assert a.task is not None
    await asyncio.wait_for(asyncio.wait({a.task}), 5)
    assert not a.stop.is_set()  # it ended by itself: lost, not stopped
    assert a.log == ["started", "stopped"]
    assert not a.elector.leading.is_set()
    # The watchdog: the record still names us, and we have not renewed for lease + 20 s.
    assert a.elector.check() is None
    now[0] = 1.0 + HEALTHZ_TOLERANCE + 1
    assert a.elector.check() == f"failed election to renew leadership on lease {NS}/{NAME}"


async def test_losing_an_update_race_is_not_an_error(api: FakeApiServer, client: KubeClient) -> None:
    a = LeaderElector(client, namespace=NS, name=NAME, identity="a", lease_duration=1.0)
    assert await a.try_acquire_or_renew()
    api.take_lease(NS, NAME, "intruder")  # someone else writes in between
    api.leases[f"{NS}/{NAME}"]["metadata"]["resourceVersion"] = "999"
    a._lease = None
    assert not await a.try_acquire_or_renew()  # the intruder's record is fresh to us
    assert api.lease(NS, NAME)["spec"]["holderIdentity"] == "intruder"  # type: ignore[index]
    assert await a.release()  # not the leader any more: nothing to release


async def test_a_stale_write_gets_409(api: FakeApiServer, client: KubeClient) -> None:
    a = LeaderElector(client, namespace=NS, name=NAME, identity="a", lease_duration=1.0)
    assert await a.try_acquire_or_renew()
    assert a._lease is not None
    api.leases[f"{NS}/{NAME}"]["metadata"]["resourceVersion"] = "999"  # moved on since we read it
    assert not await a.release()  # release writes what it last saw: refused, nothing clobbered


async def test_master_status_gauge_is_0_until_leading_then_1_then_0(
    api: FakeApiServer, client: KubeClient, candidates: list[Candidate]
) -> None:
    """client-go's leader_election_master_status{name}: 0 from the elector's creation (standby
    included), 1 while leading, 0 once it stops."""
    metrics = SchedulerMetrics()

    def status(name: str = "kube-scheduler") -> float | None:
        return metrics.registry.get_sample_value("leader_election_master_status", {"name": name})

    a = Candidate(client, "a", metrics=metrics, metrics_name="kube-scheduler")
    assert status() == 0
    candidates.append(a.start())
    await asyncio.wait_for(a.elector.leading.wait(), 5)
    assert status() == 1
    standby_metrics = SchedulerMetrics()
    b = spawn(candidates, client, "b", metrics=standby_metrics, metrics_name="kube-scheduler")
    await eventually(lambda: b.elector.leader() == "a")
    assert (
        standby_metrics.registry.get_sample_value("leader_election_master_status", {"name": "kube-scheduler"})
        == 0
    )
    await a.shutdown()
    assert status() == 0
