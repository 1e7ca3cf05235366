"""The pieces a bounded shutdown rests on: the shared grace, the hard deadline, the writers' close,
``until`` and leader election, each stopping in time whatever the server or the jobs do."""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time

import pytest

from koordsched.backends.kube.client import KubeClient
from koordsched.backends.kube.leaderelection import LeaderElector
from koordsched.backends.kube.lifecycle import in_daemon_thread, lingering_threads, until
from koordsched.backends.kube.shutdown import HardDeadline, Shutdown, parse_grace
from koordsched.backends.kube.writer import BackgroundWriter
from tests.kube.fake_apiserver import FakeApiServer
from tests.kube.helpers import eventually

NS, NAME = "koordinator-system", "koord-scheduler"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
LEASE = f"{LEASES}/{NAME}"


def test_the_grace_is_a_positive_go_duration() -> None:
    assert parse_grace("10s") == 10.0
    assert parse_grace("1m30s") == 90.0
    for bad in ("10", "0s", "-1s", "soon"):
        with pytest.raises(ValueError, match="--shutdown-grace-period"):
            parse_grace(bad)


# --- the writer: the 13-minute hang ----------------------------------------------------------------


async def test_closing_a_busy_writer_always_returns_within_its_grace() -> None:
    """What kept ``koordsched run`` alive after SIGTERM: closing the events writer with jobs still
    queued. Its loop waited on ``asyncio.wait_for(queue.get(), ...)``, which on Python 3.11
    swallows a cancellation arriving just after ``get()`` returned; the loop went on for ever and
    ``close()`` waited on it. Every close here must return within the grace and the unwind."""
    rng = random.Random(7)
    loop = asyncio.get_running_loop()
    for _ in range(20):

        async def tick() -> None:
            pass

        writer = BackgroundWriter("t", maxsize=10_000, tick=tick, tick_interval=10.0, concurrency=4)

        async def job() -> None:
            for _ in range(rng.randint(0, 3)):
                await asyncio.sleep(0)

        for _ in range(2000):
            writer.submit(job)
        await asyncio.sleep(rng.random() * 0.01)
        t0 = loop.time()
        done, _ = await asyncio.wait({asyncio.ensure_future(writer.close(grace=0.01))}, timeout=3)
        assert done, "close() never returned"
        assert loop.time() - t0 < 1.5


async def test_a_job_that_ignores_cancellation_is_abandoned(caplog: pytest.LogCaptureFixture) -> None:
    writer = BackgroundWriter("t", concurrency=1)
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue  # a job that will not stop

    writer.submit(stubborn)
    await asyncio.sleep(0.01)
    closing = asyncio.ensure_future(writer.close(grace=0.05))
    try:
        done, _ = await asyncio.wait({closing}, timeout=1.5)
        assert done, "close() waited for a job that ignores its cancellation"
        assert "ignored its cancellation" in caplog.text
    finally:
        release.set()  # let it end, for the suite's leftover-task check
        await asyncio.wait({closing}, timeout=1)


# --- the shared grace --------------------------------------------------------------------------------


async def test_steps_share_one_deadline_and_an_overrunning_step_is_abandoned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    shutdown = Shutdown(grace=1.0)
    shutdown.begin("test", 0)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert not await shutdown.step("a hung request", asyncio.sleep(60))
    assert not await shutdown.step("the next one", asyncio.sleep(60))  # nothing left for it
    assert loop.time() - t0 < 1.5
    assert shutdown.abandoned == ["a hung request", "the next one"]
    assert "abandoned a hung request" in caplog.text
    assert await shutdown.step("a quick one", asyncio.sleep(0))  # a finished step is fine


async def test_a_failing_step_is_logged_and_the_next_runs(caplog: pytest.LogCaptureFixture) -> None:
    shutdown = Shutdown(grace=5.0)

    async def boom() -> None:
        raise RuntimeError("the server is gone")

    assert await shutdown.step("releasing the lease", boom())
    assert "releasing the lease failed: RuntimeError: the server is gone" in caplog.text


def test_the_hard_deadline_exits_with_the_status_the_shutdown_began_with(
    caplog: pytest.LogCaptureFixture,
) -> None:
    exits: list[int] = []
    fired = threading.Event()

    def exit_(code: int) -> None:
        exits.append(code)
        fired.set()

    shutdown = Shutdown(grace=0.2)
    deadline = HardDeadline(exit_)
    shutdown.on_begin(deadline.arm)
    shutdown.running["releasing the lease"] = 0.0
    shutdown.begin("received SIGTERM", 0)
    assert fired.wait(5)
    assert exits == [0]
    assert "abandoning releasing the lease" in caplog.text

    lost = Shutdown(grace=0.1)
    other = HardDeadline(exit_)
    lost.on_begin(other.arm)
    lost.begin("leader election lost", 1)
    fired.clear()
    assert fired.wait(5)
    assert exits == [0, 1]


def test_a_cancelled_hard_deadline_does_not_fire() -> None:
    exits: list[int] = []
    shutdown = Shutdown(grace=0.1)
    deadline = HardDeadline(exits.append)
    shutdown.on_begin(deadline.arm)
    shutdown.begin("done", 0)
    deadline.cancel()
    time.sleep(0.3)
    assert exits == []


# --- until and the daemon threads -------------------------------------------------------------------


async def test_until_cancels_the_others_when_one_fails() -> None:
    """It used to leave them running (a gather does not cancel siblings)."""
    cancelled = asyncio.Event()

    async def other() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def failing() -> None:
        await asyncio.sleep(0.01)
        raise ValueError("bad plugin args")

    with pytest.raises(ValueError, match="bad plugin args"):
        await until(asyncio.Event(), other(), failing())
    await asyncio.sleep(0)
    assert cancelled.is_set()


async def test_until_returns_false_on_stop_and_cancels_the_work() -> None:
    stop = asyncio.Event()
    cancelled = asyncio.Event()

    async def work() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    asyncio.get_running_loop().call_later(0.05, stop.set)
    assert not await until(stop, work())
    assert cancelled.is_set()
    assert await until(asyncio.Event(), asyncio.sleep(0))


async def test_a_stop_does_not_wait_for_a_daemon_thread() -> None:
    release = threading.Event()
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, stop.set)
    t0 = time.monotonic()
    assert not await until(stop, in_daemon_thread(lambda: release.wait(30), "koordsched-test-compile"))
    assert time.monotonic() - t0 < 1.0
    assert "koordsched-test-compile" in lingering_threads()
    release.set()
    assert await in_daemon_thread(lambda: 42, "koordsched-test-quick") == 42


# --- leader election ----------------------------------------------------------------------------------


def elector(client: KubeClient, identity: str) -> LeaderElector:
    # renewDeadline bounds every lease request: long here, so only a cancellation can end one early.
    return LeaderElector(
        client,
        namespace=NS,
        name=NAME,
        identity=identity,
        lease_duration=15.0,
        renew_deadline=10.0,
        retry_period=0.1,
    )


async def test_a_stop_cancels_an_acquire_in_flight(api: FakeApiServer, client: KubeClient) -> None:
    """client-go aborts the request on cancel; we used to wait for it (up to renewDeadline)."""
    api.stall("POST", LEASES)  # creating the lease hangs
    e = elector(client, "a")
    stop = asyncio.Event()
    task = asyncio.ensure_future(e.run(stop))
    await eventually(lambda: bool(api.requests_to("POST", LEASES)))
    t0 = time.monotonic()
    stop.set()
    await asyncio.wait_for(task, 5)
    assert time.monotonic() - t0 < 1.0
    assert not e.leading.is_set()


async def test_an_acquire_cut_off_after_it_landed_is_released(api: FakeApiServer, client: KubeClient) -> None:
    """The cut-off create did reach the server: the Lease names us. Read and released, so a
    standby need not wait out leaseDuration."""
    api.stall("POST", LEASES, after=True)
    e = elector(client, "a")
    stop = asyncio.Event()
    task = asyncio.ensure_future(e.run(stop))
    await eventually(lambda: api.lease(NS, NAME) is not None)
    stop.set()
    await asyncio.wait_for(task, 5)
    lease = api.lease(NS, NAME)
    assert lease is not None and lease["spec"]["holderIdentity"] == ""
    assert lease["spec"]["leaseDurationSeconds"] == 1


async def test_a_stop_cancels_a_renewal_in_flight_and_still_releases(
    api: FakeApiServer, client: KubeClient
) -> None:
    """The renewal PUT lands but its answer is lost; the stop cancels it. Our copy of the Lease is
    then stale: the release gets 409, reads the Lease, sees it still names us, releases."""
    e = elector(client, "a")
    stop = asyncio.Event()
    task = asyncio.ensure_future(e.run(stop))
    await asyncio.wait_for(e.leading.wait(), 5)
    puts = len(api.requests_to("PUT", LEASE))
    api.stall("PUT", LEASE, after=True)
    await eventually(lambda: len(api.requests_to("PUT", LEASE)) > puts)
    t0 = time.monotonic()
    stop.set()
    await asyncio.wait_for(task, 5)
    assert time.monotonic() - t0 < 2.0
    lease = api.lease(NS, NAME)
    assert lease is not None and lease["spec"]["holderIdentity"] == ""
