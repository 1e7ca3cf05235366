"""API writes against a failing server: every one bounded, retried where that is safe, and
nothing suppressed or lost because a write failed on the way."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from koordsched.api.core import Pod
from koordsched.backends.kube.client import KubeClient
from koordsched.backends.kube.events import EventRecorder
from koordsched.backends.kube.port import KubePort
from koordsched.framework.interface import BindError
from koordsched.framework.types import BindingPlan
from tests.kube.fake_apiserver import PODS, FakeApiServer, pod_json
from tests.kube.helpers import eventually

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
STATUS = "/api/v1/namespaces/default/pods/p/status"
BINDING = "/api/v1/namespaces/default/pods/p/binding"


def stored_pod(api: FakeApiServer, name: str = "p") -> Pod:
    return msgspec.convert(api.get(PODS, f"default/{name}"), Pod)


# --- events ------------------------------------------------------------------------------------------


async def test_an_event_lost_on_the_way_is_retried_and_its_repeats_are_counted(
    api: FakeApiServer, client: KubeClient
) -> None:
    """client-go retries an event create that got no answer; identical events meanwhile are
    counted into its series, which is written once the event exists."""
    api.add(PODS, pod_json("p"))
    pod = stored_pod(api)
    api.stall("POST", EVENTS)  # the first create hangs past the write timeout
    rec = EventRecorder(client, write_timeout=0.2, flush_interval=3600)
    rec.retry_sleep = 0.05
    try:
        rec.record(pod, "Warning", "FailedScheduling", "Scheduling", "no nodes")
        await eventually(lambda: bool(api.events))
        rec.record(pod, "Warning", "FailedScheduling", "Scheduling", "no nodes")  # a repeat
        await rec.writer.join()
        await rec.flush_series()
    finally:
        await rec.close()
    [event] = api.events.values()
    assert event["note"] == "no nodes"
    assert event["series"]["count"] == 2
    assert len(api.requests_to("POST", EVENTS)) == 2  # the lost one and its retry


async def test_an_event_never_written_does_not_absorb_the_next_identical_one(
    api: FakeApiServer, client: KubeClient
) -> None:
    """After the last try fails on the way (here the only one), the event is forgotten: the same
    event a moment later is written, not counted into a series that does not exist (it was, for
    the 6 minutes a series lives)."""
    api.add(PODS, pod_json("p"))
    pod = stored_pod(api)
    api.stall("POST", EVENTS)
    rec = EventRecorder(client, write_timeout=0.2, flush_interval=3600)
    rec.max_tries = 1
    try:
        rec.record(pod, "Warning", "FailedScheduling", "Scheduling", "no nodes")
        await asyncio.wait({asyncio.ensure_future(rec.writer.join())}, timeout=5)
        assert rec.writer.failed == 1 and api.events == {}
        rec.record(pod, "Warning", "FailedScheduling", "Scheduling", "no nodes")
        await asyncio.wait({asyncio.ensure_future(rec.writer.join())}, timeout=5)
    finally:
        await rec.close()
    [event] = api.events.values()
    assert event["note"] == "no nodes"


async def test_close_drops_pending_event_retries_within_its_grace(
    api: FakeApiServer, client: KubeClient
) -> None:
    api.add(PODS, pod_json("p"))
    api.stall("POST", EVENTS)
    rec = EventRecorder(client, write_timeout=0.1, flush_interval=3600)
    rec.retry_sleep = 3600
    rec.record(stored_pod(api), "Normal", "Scheduled", "Binding", "x")
    await eventually(lambda: rec.writer.failed > 0)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await rec.close(grace=0.2)
    assert loop.time() - t0 < 1.5
    assert rec.writer.retries_pending == 0 and rec.writer.abandoned == 1


# --- the PodScheduled condition --------------------------------------------------------------------


async def test_a_status_patch_refused_with_503_is_retried(api: FakeApiServer, client: KubeClient) -> None:
    """kube-scheduler's PatchPodStatus: retry.OnError(DefaultBackoff, Retriable), 500/503 retriable."""
    api.add(PODS, pod_json("p"))
    api.fail("PATCH", STATUS, 503, times=2)
    port = KubePort(client)
    try:
        port.unschedulable(stored_pod(api), "Unschedulable", "no nodes")
        await port.flush()
    finally:
        await port.close()
    assert len(api.requests_to("PATCH", STATUS)) == 3
    [cond] = api.get(PODS, "default/p")["status"]["conditions"]
    assert cond["message"] == "no nodes"
    assert port.status_writer.failed == 0


async def test_status_patch_retries_are_bounded_and_other_errors_not_retried(
    api: FakeApiServer, client: KubeClient
) -> None:
    api.add(PODS, pod_json("p"))
    api.add(PODS, pod_json("q"))
    api.fail("PATCH", STATUS, 500, times=10)
    api.fail("PATCH", "/api/v1/namespaces/default/pods/q/status", 403, times=10)
    port = KubePort(client)
    try:
        port.unschedulable(stored_pod(api), "Unschedulable", "no nodes")
        port.unschedulable(stored_pod(api, "q"), "Unschedulable", "no nodes")
        await port.flush()
    finally:
        await port.close()
    assert len(api.requests_to("PATCH", STATUS)) == 4  # DefaultBackoff.Steps
    assert len(api.requests_to("PATCH", "/api/v1/namespaces/default/pods/q/status")) == 1
    assert port.status_writer.failed == 2


async def test_a_bind_ends_the_retries_of_a_status_patch(api: FakeApiServer, client: KubeClient) -> None:
    """A condition being retried must never land on the pod after it was bound."""
    api.add(PODS, pod_json("p"))
    api.fail("PATCH", STATUS, 503, times=1)
    port = KubePort(client)
    try:
        pod = stored_pod(api)
        port.unschedulable(pod, "Unschedulable", "no nodes")
        await eventually(lambda: bool(api.requests_to("PATCH", STATUS)))
        await port.bind(pod, "n1", BindingPlan())
        await port.flush()
        await asyncio.sleep(0.3)  # past every retry the patch could have made
    finally:
        await port.close()
    assert len(api.requests_to("PATCH", STATUS)) == 1
    assert api.get(PODS, "default/p")["status"]["conditions"] == [{"type": "PodScheduled", "status": "True"}]


# --- binds whose answer is lost ------------------------------------------------------------------


async def test_a_bind_that_landed_but_lost_its_answer_succeeds_once(
    api: FakeApiServer, client: KubeClient
) -> None:
    """The binding is applied, its answer never comes: the pod is read back and found bound."""
    api.add(PODS, pod_json("p"))
    api.stall("POST", BINDING, after=True)
    port = KubePort(client, bind_timeout=0.3)
    try:
        await asyncio.wait_for(port.bind(stored_pod(api), "n1", BindingPlan()), 10)
    finally:
        await port.close()
    assert api.get(PODS, "default/p")["spec"]["nodeName"] == "n1"
    assert len(api.requests_to("POST", BINDING)) == 1  # not sent again: the read showed it landed
    assert len(api.requests_to("GET", "/api/v1/namespaces/default/pods/p")) == 1


async def test_a_bind_lost_on_the_way_is_sent_again_after_reading_the_pod(
    api: FakeApiServer, client: KubeClient
) -> None:
    api.add(PODS, pod_json("p"))
    api.stall("POST", BINDING)  # never reaches the pod
    port = KubePort(client, bind_timeout=0.3)
    try:
        await asyncio.wait_for(port.bind(stored_pod(api), "n1", BindingPlan(annotations={"a": "1"})), 10)
    finally:
        await port.close()
    bound = api.get(PODS, "default/p")
    assert bound["spec"]["nodeName"] == "n1" and bound["metadata"]["annotations"] == {"a": "1"}
    assert [r.method for r in api.requests if r.path.startswith("/api/v1/namespaces/default/pods/p")] == [
        "POST",
        "GET",
        "POST",
    ]


async def test_a_bind_whose_pod_went_elsewhere_meanwhile_fails(
    api: FakeApiServer, client: KubeClient
) -> None:
    api.add(PODS, pod_json("p"))
    pod = stored_pod(api)
    api.stall("POST", BINDING)
    port = KubePort(client, bind_timeout=0.3)
    try:
        bind = asyncio.ensure_future(port.bind(pod, "n1", BindingPlan()))
        await eventually(lambda: bool(api.requests_to("POST", BINDING)))
        other = api.get(PODS, "default/p")
        other["spec"]["nodeName"] = "n2"  # someone else bound it while our answer was lost
        api.modify(PODS, other)
        with pytest.raises(BindError, match="already assigned to node n2"):
            await asyncio.wait_for(bind, 10)
    finally:
        await port.close()
    assert len(api.requests_to("POST", BINDING)) == 1


async def test_a_bind_outcome_that_stays_unknown_is_bounded(api: FakeApiServer, client: KubeClient) -> None:
    api.add(PODS, pod_json("p"))
    api.stall("POST", BINDING)
    api.stall("GET", "/api/v1/namespaces/default/pods/p", times=100)
    port = KubePort(client, bind_timeout=0.1)
    port.bind_outcome_timeout = 0.5
    try:
        with pytest.raises(BindError, match=r"outcome unknown after 0\.5s"):
            await asyncio.wait_for(port.bind(stored_pod(api), "n1", BindingPlan()), 10)
    finally:
        await port.close()
    assert "nodeName" not in api.get(PODS, "default/p")["spec"]
