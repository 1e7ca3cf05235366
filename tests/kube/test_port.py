"""KubePort: bind through pods/binding (status checked by us), events, and the PodScheduled condition."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import msgspec
import pytest
from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.client.exceptions import ApiException

from koordsched.api.core import Pod
from koordsched.backends.kube.client import STRATEGIC_MERGE_PATCH, KubeClient, new_client
from koordsched.backends.kube.events import build_event, reporting_instance, truncate_note
from koordsched.backends.kube.port import KubePort
from koordsched.backends.kube.timefmt import micro_time, rfc3339
from koordsched.framework.interface import BindError
from koordsched.framework.types import BindingPlan
from tests.kube.fake_apiserver import MICRO_TIME, PODS, FakeApiServer, pod_json


@pytest.fixture
async def port(client: KubeClient) -> AsyncIterator[KubePort]:
    p = KubePort(client, hostname="host-1", event_flush_interval=0.05)
    try:
        yield p
    finally:
        await p.close()


def stored_pod(api: FakeApiServer, name: str) -> Pod:
    return msgspec.convert(api.get(PODS, f"default/{name}"), Pod)


def test_micro_time_always_has_six_fractional_digits() -> None:
    whole = datetime(2024, 5, 1, 10, 0, 0, 0, tzinfo=UTC)
    assert micro_time(whole) == "2024-05-01T10:00:00.000000Z"
    assert micro_time(datetime(2024, 5, 1, 10, 0, 0, 7, tzinfo=UTC)) == "2024-05-01T10:00:00.000007Z"
    assert MICRO_TIME.match(micro_time())
    assert rfc3339(whole) == "2024-05-01T10:00:00Z"


def test_event_shape_matches_kube_scheduler() -> None:
    pod = msgspec.convert(pod_json("p", uid="u1", resourceVersion="7"), Pod)
    ev = build_event(
        pod,
        type_="Warning",
        reason="FailedScheduling",
        action="Scheduling",
        note="0/1 nodes are available: 1 Insufficient cpu.",
        controller="koord-scheduler",
        instance=reporting_instance("koord-scheduler", "host-1"),
    )
    assert re.fullmatch(r"p\.[0-9a-f]+", ev["metadata"]["name"])
    assert ev["metadata"]["namespace"] == "default"
    assert MICRO_TIME.match(ev["eventTime"])
    assert ev["reportingController"] == "koord-scheduler"
    assert ev["reportingInstance"] == "koord-scheduler-host-1"
    assert ev["regarding"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "default",
        "name": "p",
        "uid": "u1",
        "resourceVersion": "7",
    }


def test_notes_are_cut_to_1024_bytes() -> None:
    assert truncate_note("short") == "short"
    cut = truncate_note("é" * 1000)
    assert len(cut.encode()) <= 1024 and cut.endswith(" ...")


async def test_bind_posts_a_binding_carrying_the_plan_annotations(api: FakeApiServer, port: KubePort) -> None:
    created = api.add(PODS, pod_json("p"))
    pod = stored_pod(api, "p")
    await port.bind(pod, "n1", BindingPlan(annotations={"scheduling.koordinator.sh/resource-status": "{}"}))
    [req] = api.requests_to("POST", "/api/v1/namespaces/default/pods/p/binding")
    assert req.body == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {
            "name": "p",
            "namespace": "default",
            "uid": created["metadata"]["uid"],
            "annotations": {"scheduling.koordinator.sh/resource-status": "{}"},
        },
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }
    bound = api.get(PODS, "default/p")
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["metadata"]["annotations"] == {"scheduling.koordinator.sh/resource-status": "{}"}


async def test_a_rejected_bind_raises_bind_error_with_the_server_message(
    api: FakeApiServer, port: KubePort
) -> None:
    api.add(PODS, pod_json("p", node="other"))
    with pytest.raises(BindError, match='pod p is already assigned to node "other"'):
        await port.bind(stored_pod(api, "p"), "n1", BindingPlan())


async def test_preload_false_does_not_raise_on_409_but_we_do(api: FakeApiServer, client: KubeClient) -> None:
    """The pitfall: kubernetes-asyncio 36.1.0 hands back a 409 as a plain response."""
    api.add(PODS, pod_json("p", node="other"))
    body = {"metadata": {"name": "p", "namespace": "default"}, "target": {"kind": "Node", "name": "n1"}}
    try:
        resp = await client.api.call_api(
            "/api/v1/namespaces/default/pods/p/binding",
            "POST",
            body=body,
            header_params={"Content-Type": "application/json"},
            _preload_content=False,
        )
    except ApiException:
        pass  # a fixed library raises; either way our port must not depend on it
    else:
        assert resp.status == 409
        resp.release()
    port = KubePort(client)
    try:
        with pytest.raises(BindError):
            await port.bind(stored_pod(api, "p"), "n1", BindingPlan())
    finally:
        await port.close()


async def test_bind_to_a_recreated_pod_is_refused_by_uid(api: FakeApiServer, port: KubePort) -> None:
    api.add(PODS, pod_json("p"))
    old = stored_pod(api, "p")
    api.delete(PODS, "default/p")
    api.add(PODS, pod_json("p"))
    with pytest.raises(BindError, match="UID"):
        await port.bind(old, "n1", BindingPlan())


async def test_an_unreachable_server_is_a_bind_error() -> None:
    c = new_client(Configuration(host="http://127.0.0.1:1"), qps=100, burst=10)
    port = KubePort(c)
    try:
        with pytest.raises(BindError, match="binding pod default/p to node n1"):
            await port.bind(msgspec.convert(pod_json("p"), Pod), "n1", BindingPlan())
    finally:
        await port.close()
        await c.close()


async def test_unschedulable_records_an_event_and_the_condition(api: FakeApiServer, port: KubePort) -> None:
    api.add(PODS, pod_json("p"))
    port.unschedulable(stored_pod(api, "p"), "Unschedulable", "0/1 nodes are available: 1 Insufficient cpu.")
    await port.flush()
    [event] = api.events.values()
    assert event["type"] == "Warning"
    assert event["reason"] == "FailedScheduling"
    assert event["action"] == "Scheduling"
    assert event["note"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert event["reportingController"] == "koord-scheduler"  # the pod's schedulerName
    assert MICRO_TIME.match(event["eventTime"])
    [patch] = api.requests_to("PATCH", "/api/v1/namespaces/default/pods/p/status")
    assert patch.content_type == STRATEGIC_MERGE_PATCH
    [cond] = api.get(PODS, "default/p")["status"]["conditions"]
    assert cond["type"] == "PodScheduled" and cond["status"] == "False"
    assert cond["reason"] == "Unschedulable"
    assert cond["message"] == "0/1 nodes are available: 1 Insufficient cpu."


async def test_repeated_failures_aggregate_into_a_series(api: FakeApiServer, port: KubePort) -> None:
    api.add(PODS, pod_json("p"))
    pod = stored_pod(api, "p")
    for _ in range(3):
        port.unschedulable(pod, "Unschedulable", "0/1 nodes are available: 1 Insufficient cpu.")
    await port.flush()
    await port.events.flush_series()
    assert len(api.events) == 1  # one Event object...
    [event] = api.events.values()
    assert event["series"]["count"] == 3  # ...counting three occurrences
    assert MICRO_TIME.match(event["series"]["lastObservedTime"])
    # The condition was the same each time: patched once.
    assert len(api.requests_to("PATCH", "/api/v1/namespaces/default/pods/p/status")) == 1
    # A different message is a new event and a new condition.
    port.unschedulable(pod, "Unschedulable", "0/2 nodes are available: 2 Insufficient cpu.")
    await port.flush()
    assert len(api.events) == 2
    assert len(api.requests_to("PATCH", "/api/v1/namespaces/default/pods/p/status")) == 2


async def test_a_condition_queued_before_the_bind_is_dropped(api: FakeApiServer, client: KubeClient) -> None:
    api.add(PODS, pod_json("p"))
    pod = stored_pod(api, "p")
    port = KubePort(client)
    try:
        port.unschedulable(pod, "Unschedulable", "no nodes")  # queued, not yet sent
        await port.bind(pod, "n1", BindingPlan())
        await port.flush()
    finally:
        await port.close()
    assert api.requests_to("PATCH", "/api/v1/namespaces/default/pods/p/status") == []
    conds = api.get(PODS, "default/p")["status"]["conditions"]
    assert conds == [{"type": "PodScheduled", "status": "True"}]


async def test_scheduled_and_invalid_pod_events(api: FakeApiServer, port: KubePort) -> None:
    api.add(PODS, pod_json("p"))
    api.add(PODS, pod_json("bad"))
    port.scheduled(stored_pod(api, "p"), "n1")
    port.invalid_pod(stored_pod(api, "bad"), 'quantity "abc" is invalid')
    await port.flush()
    by_reason = {e["regarding"]["name"]: e for e in api.events.values()}
    assert by_reason["p"]["type"] == "Normal"
    assert by_reason["p"]["reason"] == "Scheduled"
    assert by_reason["p"]["action"] == "Binding"
    assert by_reason["p"]["note"] == "Successfully assigned default/p to n1"
    assert by_reason["bad"]["reason"] == "FailedScheduling"
    [cond] = api.get(PODS, "default/bad")["status"]["conditions"]
    assert cond["reason"] == "Unschedulable" and cond["message"] == 'quantity "abc" is invalid'


async def test_warn_records_a_warning_event_and_leaves_the_condition(
    api: FakeApiServer, port: KubePort
) -> None:
    """Issue 24, items 7 and 8: a value read as Koordinator reads it is said on the pod under run."""
    api.add(PODS, pod_json("odd"))
    port.warn(stored_pod(api, "odd"), "AnnotationValueIgnored", "annotation x: field y: value z")
    await port.flush()
    (event,) = api.events.values()
    assert (event["regarding"]["name"], event["type"], event["reason"], event["note"]) == (
        "odd",
        "Warning",
        "AnnotationValueIgnored",
        "annotation x: field y: value z",
    )
    assert not api.get(PODS, "default/odd")["status"].get("conditions")


async def test_a_failing_event_write_never_reaches_the_caller(api: FakeApiServer, port: KubePort) -> None:
    api.add(PODS, pod_json("p"))
    api.fail("POST", "/apis/events.k8s.io/v1/namespaces/default/events", 500, times=1)
    pod = stored_pod(api, "p")
    port.scheduled(pod, "n1")  # fails in the background, logged
    await port.flush()
    assert port.events.writer.failed == 1
    port.scheduled(pod, "n1")  # the failed one was forgotten: this is a fresh event
    await port.flush()
    assert len(api.events) == 1


async def test_a_full_queue_drops_instead_of_blocking(api: FakeApiServer, client: KubeClient) -> None:
    api.add(PODS, pod_json("p"))
    pod = stored_pod(api, "p")
    port = KubePort(client, queue_size=2)
    try:
        for i in range(5):
            port.events.record(pod, "Normal", "Scheduled", "Binding", f"note {i}")
        assert port.events.writer.dropped >= 2
    finally:
        await port.close()


async def test_a_backlog_of_events_holds_binds_back_and_drops_none(
    api: FakeApiServer, client: KubeClient
) -> None:
    """Scheduled events are never dropped: while half the events queue is taken, a bind waits."""
    api.add(PODS, pod_json("p"))
    api.add(PODS, pod_json("q"))
    pod = stored_pod(api, "p")
    # The writer's 32 on the wire, one taken and waiting for a slot, and 2 queued: half of queue_size.
    writes = 32 + 1 + 2
    api.stall("POST", "/apis/events.k8s.io/v1/namespaces/default/events", times=writes)
    port = KubePort(client, queue_size=4, write_timeout=1.5, event_flush_interval=3600)
    try:
        for i in range(writes):
            port.scheduled(pod, f"n{i}")  # a note per node: each one its own event
            await asyncio.sleep(0.005)  # the writer takes each into a slot while it has one
        await asyncio.sleep(0.1)
        assert port.events.writer.pending == 2
        bind = asyncio.create_task(port.bind(stored_pod(api, "q"), "n1", BindingPlan()))
        await asyncio.sleep(0.2)
        assert not bind.done()
        assert api.requests_to("POST", "/api/v1/namespaces/default/pods/q/binding") == []
        # The stalled writes time out (and wait for their retry on a timer): the queue drains.
        await asyncio.wait_for(bind, 5)
        assert api.get(PODS, "default/q")["spec"]["nodeName"] == "n1"
        assert port.events.writer.dropped == 0 and port.events.writer.waits == 1
    finally:
        await port.close()


async def test_the_first_repeat_writes_the_series_at_once(api: FakeApiServer, client: KubeClient) -> None:
    """As client-go's events.k8s.io broadcaster: the first repeat of an event PATCHes its series
    (count 2) without waiting for a flush, the series alone (an Event's note is immutable on
    update); later repeats are counted and written by the periodic flush."""
    api.add(PODS, pod_json("p"))
    pod = stored_pod(api, "p")
    message = "0/1 nodes are available: 1 Insufficient cpu."
    port = KubePort(client, hostname="host-1", event_flush_interval=3600)
    try:
        port.unschedulable(pod, "Unschedulable", message)
        await port.flush()
        [event] = api.events.values()
        assert "series" not in event
        path = f"/apis/events.k8s.io/v1/namespaces/default/events/{event['metadata']['name']}"

        port.unschedulable(pod, "Unschedulable", message)
        await port.flush()  # no flush_series: written because it is the first repeat
        [patch] = api.requests_to("PATCH", path)
        assert set(patch.body) == {"series"} and patch.body["series"]["count"] == 2
        assert MICRO_TIME.match(patch.body["series"]["lastObservedTime"])
        assert api.events[event["metadata"]["name"]]["series"]["count"] == 2

        port.unschedulable(pod, "Unschedulable", message)
        await port.flush()
        assert len(api.requests_to("PATCH", path)) == 1  # the third waits for the flush...
        await port.events.flush_series()
        assert api.events[event["metadata"]["name"]]["series"]["count"] == 3  # ...which writes it
        await port.events.flush_series()
        assert len(api.requests_to("PATCH", path)) == 2  # nothing new: nothing written
        assert len(api.events) == 1 and event["note"] == message
    finally:
        await port.close()


async def test_a_repeat_during_the_create_is_written_once_the_event_exists(
    api: FakeApiServer, client: KubeClient
) -> None:
    api.add(PODS, pod_json("p"))
    pod = stored_pod(api, "p")
    port = KubePort(client, hostname="host-1", event_flush_interval=3600)
    try:
        for _ in range(3):  # all recorded before the create is even sent
            port.unschedulable(pod, "Unschedulable", "no nodes")
        await port.flush()
        [event] = api.events.values()
        assert event["series"]["count"] == 3
        assert len(api.requests_to("POST", "/apis/events.k8s.io/v1/namespaces/default/events")) == 1
    finally:
        await port.close()


async def test_background_writes_give_up_on_a_stalled_server(api: FakeApiServer, client: KubeClient) -> None:
    """An event, a series count or a status patch left unanswered is abandoned after the write
    timeout: the writers go on, and the next write is sent and lands."""
    api.add(PODS, pod_json("p"))
    pod = stored_pod(api, "p")
    events_path = "/apis/events.k8s.io/v1/namespaces/default/events"
    status_path = "/api/v1/namespaces/default/pods/p/status"
    api.stall("POST", events_path)
    api.stall("PATCH", status_path)
    port = KubePort(client, write_timeout=0.2, event_flush_interval=3600)
    try:
        port.unschedulable(pod, "Unschedulable", "first")
        await asyncio.wait_for(port.flush(), 5)
        assert port.events.writer.failed == 1 and port.status_writer.failed == 1
        assert api.events == {}

        port.unschedulable(pod, "Unschedulable", "second")
        await asyncio.wait_for(port.flush(), 5)
        [event] = api.events.values()
        assert event["note"] == "second"
        [cond] = api.get(PODS, "default/p")["status"]["conditions"]
        assert cond["message"] == "second"

        api.stall("PATCH", f"{events_path}/{event['metadata']['name']}")
        port.unschedulable(pod, "Unschedulable", "second")  # the first repeat: its series PATCHed now
        await asyncio.wait_for(port.flush(), 5)
        assert "series" not in event  # not written...
        await asyncio.wait_for(port.events.flush_series(), 5)
        assert api.events[event["metadata"]["name"]]["series"]["count"] == 2  # ...until the next flush
    finally:
        await port.close()


async def test_preempt_deletes_the_victim_with_its_uid_and_records_the_event(
    api: FakeApiServer, port: KubePort
) -> None:
    api.add(PODS, pod_json("victim", node="n1"))
    api.add(PODS, pod_json("urgent"))
    victim, urgent = stored_pod(api, "victim"), stored_pod(api, "urgent")
    port.preempt(urgent, "n1", [victim])
    await port.flush()
    assert "default/victim" not in api.collections[PODS].objects
    # First the DisruptionTarget condition (as kube-scheduler 1.26+), then the delete.
    (patch,) = api.requests_to("PATCH", "/api/v1/namespaces/default/pods/victim/status")
    (condition,) = patch.body["status"]["conditions"]
    assert {k: v for k, v in condition.items() if k != "lastTransitionTime"} == {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": "koord-scheduler: preempting to accommodate a higher priority pod",
    }
    assert patch.body["metadata"] == {"uid": victim.metadata.uid}
    order = [r.method for r in api.requests if "/pods/victim" in r.path]
    assert order == ["PATCH", "DELETE"]
    (delete,) = api.requests_to("DELETE", "/api/v1/namespaces/default/pods/victim")
    assert delete.body == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": victim.metadata.uid},
    }
    (event,) = [e for e in api.events.values() if e["reason"] == "Preempted"]
    assert event["note"] == f"Preempted by pod {urgent.metadata.uid} on node n1"
    assert (event["type"], event["action"]) == ("Normal", "Preempting")
    assert event["regarding"]["name"] == "victim"


async def test_preempt_never_deletes_a_recreated_pod_of_the_same_name(
    api: FakeApiServer, port: KubePort
) -> None:
    api.add(PODS, pod_json("victim", node="n1"))
    old = stored_pod(api, "victim")
    api.delete(PODS, "default/victim")
    api.add(PODS, pod_json("victim", node="n1"))  # a new uid
    port.preempt(msgspec.convert(pod_json("urgent", uid="u-urgent"), Pod), "n1", [old])
    await port.flush()
    assert "default/victim" in api.collections[PODS].objects
    # The condition patch carries the old uid: refused, so the recreated pod is neither marked nor deleted.
    assert len(api.requests_to("PATCH", "/api/v1/namespaces/default/pods/victim/status")) == 1
    assert api.requests_to("DELETE", "/api/v1/namespaces/default/pods/victim") == []
    assert not api.get(PODS, "default/victim").get("status", {}).get("conditions")


async def test_nominate_sets_and_clears_nominated_node_name(api: FakeApiServer, port: KubePort) -> None:
    api.add(PODS, pod_json("p"))
    p = stored_pod(api, "p")
    port.nominate(p, "n1")
    await port.flush()
    assert api.get(PODS, "default/p")["status"]["nominatedNodeName"] == "n1"
    port.nominate(p, "")
    await port.flush()
    assert "nominatedNodeName" not in api.get(PODS, "default/p")["status"]
    patches = api.requests_to("PATCH", "/api/v1/namespaces/default/pods/p/status")
    assert [r.body["status"] for r in patches] == [{"nominatedNodeName": "n1"}, {"nominatedNodeName": None}]
    assert all(r.body["metadata"] == {"uid": p.metadata.uid} for r in patches)
    assert all(r.content_type == STRATEGIC_MERGE_PATCH for r in patches)


async def test_preempt_does_not_delete_when_the_condition_cannot_be_written(
    api: FakeApiServer, port: KubePort
) -> None:
    api.add(PODS, pod_json("victim", node="n1"))
    victim = stored_pod(api, "victim")
    api.fail("PATCH", "/api/v1/namespaces/default/pods/victim/status", 403)
    port.preempt(msgspec.convert(pod_json("urgent", uid="u-urgent"), Pod), "n1", [victim])
    await port.flush()
    assert "default/victim" in api.collections[PODS].objects
    assert api.requests_to("DELETE", "/api/v1/namespaces/default/pods/victim") == []
