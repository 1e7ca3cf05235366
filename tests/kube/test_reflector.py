"""List-then-watch: pagination, ordered delivery, bookmarks, 410 relists with synthesized deletes, backoff."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

from koordsched.api.core import Node, Pod
from koordsched.backends.kube.backoff import Backoff
from koordsched.backends.kube.client import KubeClient
from koordsched.backends.kube.kinds import NODES as NODE_KIND
from koordsched.backends.kube.kinds import PODS as POD_KIND
from koordsched.backends.kube.reflector import Reflector, iter_lines
from tests.kube.fake_apiserver import NODES, PODS, FakeApiServer, node_json, pod_json
from tests.kube.helpers import eventually


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def on_add(self, obj: Any) -> None:
        self.events.append(("add", obj.metadata.name, obj.metadata.uid))

    def on_update(self, old: Any, new: Any) -> None:
        assert old.metadata.name == new.metadata.name
        self.events.append(("update", new.metadata.name, new.metadata.resource_version))

    def on_delete(self, obj: Any) -> None:
        self.events.append(("delete", obj.metadata.name, obj.metadata.uid))

    def names(self, kind: str) -> list[str]:
        return [name for k, name, _ in self.events if k == kind]


def fast_backoff() -> Backoff:
    return Backoff(initial=0.01, cap=0.05, jitter=0.0)


@pytest.fixture
async def running() -> AsyncIterator[list[Reflector[Any]]]:
    started: list[Reflector[Any]] = []
    yield started
    for r in started:
        await r.stop()


def start(running: list[Reflector[Any]], r: Reflector[Any]) -> Reflector[Any]:
    running.append(r)
    r.start()
    return r


async def test_paginated_list_then_ordered_watch(
    api: FakeApiServer, client: KubeClient, running: list[Reflector[Any]]
) -> None:
    for name in ("n1", "n2", "n3"):
        api.add(NODES, node_json(name))
    rec = Recorder()
    r: Reflector[Node] = start(running, Reflector(client, NODE_KIND, rec, page_size=2))
    await asyncio.wait_for(r.synced.wait(), 5)
    assert rec.names("add") == ["n1", "n2", "n3"]
    lists = [q.query for q in api.requests_to("GET", NODES) if "watch" not in q.query]
    # The first list is a consistent read in pages (the watch cache would send one page).
    assert lists[0] == {"limit": "2"}
    assert lists[1]["continue"] and "resourceVersion" not in lists[1]  # the token carries the RV
    await eventually(lambda: api.watchers(NODES) == 1)
    watch = api.requests_to("GET", NODES)[-1].query
    assert watch["watch"] == "true" and watch["allowWatchBookmarks"] == "true"
    assert watch["resourceVersion"] == str(api.rv)  # from the list, never from an item
    assert 300 <= int(watch["timeoutSeconds"]) < 600

    n4 = api.add(NODES, node_json("n4"))
    changed = api.get(NODES, "n1")
    changed["metadata"]["labels"]["x"] = "y"
    api.modify(NODES, changed)
    api.delete(NODES, "n2")
    await eventually(lambda: len(rec.events) == 6)
    assert rec.events[3:] == [
        ("add", "n4", n4["metadata"]["uid"]),
        ("update", "n1", api.get(NODES, "n1")["metadata"]["resourceVersion"]),
        ("delete", "n2", rec.events[1][2]),
    ]
    assert r.last_sync_rv == str(api.rv)
    assert sorted(r.store) == ["n1", "n3", "n4"]


async def test_a_list_whose_continue_token_expires_starts_over(
    api: FakeApiServer, client: KubeClient, running: list[Reflector[Any]]
) -> None:
    for name in ("n1", "n2", "n3"):
        api.add(NODES, node_json(name))
    rec = Recorder()
    r: Reflector[Node] = Reflector(client, NODE_KIND, rec, page_size=2)
    decode = r._decode_page
    pages = 0

    def compact_after_the_first_page(body: bytes) -> Any:
        nonlocal pages
        pages += 1
        if pages == 1:  # etcd compacts while the list is half read
            api.add(NODES, node_json("n4"))
            api.compact()
        return decode(body)

    r._decode_page = compact_after_the_first_page  # type: ignore[method-assign]
    start(running, r)
    await asyncio.wait_for(r.synced.wait(), 5)
    lists = [q.query for q in api.requests_to("GET", NODES) if "watch" not in q.query]
    assert ["continue" in q for q in lists] == [False, True, False, True]
    # The first page was dropped: every object is delivered once, from the second list.
    assert rec.names("add") == ["n1", "n2", "n3", "n4"]
    assert r.lists == 1 and sorted(r.store) == ["n1", "n2", "n3", "n4"]


async def test_watch_resumes_from_the_last_bookmark(
    api: FakeApiServer, client: KubeClient, running: list[Reflector[Any]]
) -> None:
    api.add(PODS, pod_json("p1", node="n1"))
    rec = Recorder()
    r: Reflector[Pod] = start(running, Reflector(client, POD_KIND, rec, backoff=fast_backoff()))
    await asyncio.wait_for(r.synced.wait(), 5)
    await eventually(lambda: api.watchers(PODS) == 1)
    assert (
        api.requests_to("GET", PODS)[0].query["fieldSelector"]
        == "status.phase!=Succeeded,status.phase!=Failed"
    )
    rv = api.bookmark(PODS)
    await eventually(lambda: r.last_sync_rv == rv)
    api.close_watches()  # the server ends the watch (its timeout): resume, don't relist
    await eventually(lambda: r.watches == 2 and api.watchers(PODS) == 1)
    assert api.requests_to("GET", PODS)[-1].query["resourceVersion"] == rv
    assert r.lists == 1
    assert rec.names("add") == ["p1"]


@pytest.mark.parametrize("gone_mode", ["http", "stream"])
async def test_410_relists_and_synthesizes_deletes(
    api: FakeApiServer, client: KubeClient, running: list[Reflector[Any]], gone_mode: str
) -> None:
    api.gone_mode = gone_mode
    a = api.add(PODS, pod_json("a", node="n1"))
    api.add(PODS, pod_json("b", node="n1"))
    api.add(PODS, pod_json("c", node="n1"))
    rec = Recorder()
    r: Reflector[Pod] = start(running, Reflector(client, POD_KIND, rec, backoff=fast_backoff()))
    await asyncio.wait_for(r.synced.wait(), 5)
    await eventually(lambda: api.watchers(PODS) == 1)
    synced_rv = r.last_sync_rv

    # While the watch is down, "a" is deleted, "b" changes, "d" appears, and "c" is recreated
    # under the same name; the events are lost and the history compacted.
    b = api.get(PODS, "default/b")
    b["metadata"]["labels"] = {"changed": "yes"}
    api.close_watches()
    api.silently(
        PODS, delete=["default/a", "default/c"], add=[b, pod_json("d", node="n1"), pod_json("c", node="n1")]
    )
    api.compact()

    await eventually(lambda: r.lists == 2)
    queries = [q.query for q in api.requests_to("GET", PODS) if "watch" not in q.query]
    # Every list is a consistent read in pages: none at a resourceVersion.
    assert [q.get("resourceVersion") for q in queries] == [None, None]
    assert all("limit" in q for q in queries)
    assert r.last_sync_rv != synced_rv
    new_c = api.get(PODS, "default/c")
    assert sorted(rec.events[3:]) == sorted(
        [
            ("delete", "a", a["metadata"]["uid"]),
            ("update", "b", api.get(PODS, "default/b")["metadata"]["resourceVersion"]),
            ("delete", "c", rec.events[2][2]),
            ("add", "c", new_c["metadata"]["uid"]),
            ("add", "d", api.get(PODS, "default/d")["metadata"]["uid"]),
        ]
    )
    # A delete comes before the add of the recreated object.
    assert rec.events.index(("delete", "c", rec.events[2][2])) < rec.events.index(
        ("add", "c", new_c["metadata"]["uid"])
    )
    assert sorted(r.store) == ["default/b", "default/c", "default/d"]
    await eventually(lambda: api.watchers(PODS) == 1)
    # Nothing applied twice: a relist that finds the store current delivers nothing.
    before = len(rec.events)
    api.close_watches()
    api.compact()
    await eventually(lambda: r.lists == 3)
    assert len(rec.events) == before


async def test_in_stream_410_error_event_relists(
    api: FakeApiServer, client: KubeClient, running: list[Reflector[Any]]
) -> None:
    api.add(NODES, node_json("n1"))
    rec = Recorder()
    r: Reflector[Node] = start(running, Reflector(client, NODE_KIND, rec, backoff=fast_backoff()))
    await asyncio.wait_for(r.synced.wait(), 5)
    await eventually(lambda: api.watchers(NODES) == 1)
    api.stream_error(NODES, 410, "too old resource version: 1 (2)")
    await eventually(lambda: r.lists == 2)
    assert rec.names("add") == ["n1"]  # the relist found nothing new


async def test_other_stream_errors_resume_without_relisting(
    api: FakeApiServer, client: KubeClient, running: list[Reflector[Any]]
) -> None:
    api.add(NODES, node_json("n1"))
    r: Reflector[Node] = start(running, Reflector(client, NODE_KIND, Recorder(), backoff=fast_backoff()))
    await asyncio.wait_for(r.synced.wait(), 5)
    await eventually(lambda: api.watchers(NODES) == 1)
    api.stream_error(NODES, 500, "etcd hiccup")
    await eventually(lambda: r.watches == 2 and api.watchers(NODES) == 1)
    assert r.lists == 1


async def test_backs_off_on_500s_then_syncs(
    api: FakeApiServer, client: KubeClient, running: list[Reflector[Any]]
) -> None:
    api.add(NODES, node_json("n1"))
    api.fail("GET", NODES, 500, times=3, watch=False)
    api.fail("GET", NODES, 503, times=2, watch=True)
    backoff = fast_backoff()
    delays: list[float] = []
    orig = backoff.next

    def spy() -> float:
        delays.append(orig())
        return delays[-1]

    backoff.next = spy  # type: ignore[method-assign]
    rec = Recorder()
    r: Reflector[Node] = start(running, Reflector(client, NODE_KIND, rec, backoff=backoff))
    await asyncio.wait_for(r.synced.wait(), 5)
    assert delays == [0.01, 0.02, 0.04]  # exponential
    await eventually(lambda: api.watchers(NODES) == 1)
    # The failed watches back off too (still growing: only delivered events reset it), and resume
    # from the list's RV without relisting.
    assert delays[3:] == [0.05, 0.05]
    assert r.lists == 1
    assert len(api.requests_to("GET", NODES)) == 3 + 1 + 2 + 1


async def test_lines_larger_than_the_stream_buffer_are_delivered(
    api: FakeApiServer, client: KubeClient, running: list[Reflector[Any]]
) -> None:
    rec = Recorder()
    r: Reflector[Node] = start(running, Reflector(client, NODE_KIND, rec))
    await asyncio.wait_for(r.synced.wait(), 5)
    await eventually(lambda: api.watchers(NODES) == 1)
    big = node_json("big", annotations={"blob": "x" * (3 * 1024 * 1024)})  # > aiohttp's 2 MiB line limit
    api.add(NODES, big)
    await eventually(lambda: rec.names("add") == ["big"])
    assert len(r.store["big"].metadata.annotations["blob"]) == 3 * 1024 * 1024


async def test_an_undecodable_object_does_not_hide_the_others(
    api: FakeApiServer, client: KubeClient, running: list[Reflector[Any]]
) -> None:
    bad = node_json("bad")
    bad["spec"]["unschedulable"] = "sometimes"  # not a bool
    api.add(NODES, node_json("n1"))
    api.add(NODES, bad)
    api.add(NODES, node_json("n2"))
    rec = Recorder()
    r: Reflector[Node] = start(running, Reflector(client, NODE_KIND, rec))
    await asyncio.wait_for(r.synced.wait(), 5)
    assert rec.names("add") == ["n1", "n2"]


async def test_an_object_nested_past_the_decoders_depth_does_not_hide_the_others(
    client: KubeClient,
) -> None:
    # The fake API server's JSON encoder cannot nest this deep either: decode a page directly.
    deep = "[" * 100_000 + "]" * 100_000
    items = [
        json.dumps(node_json("n1")),
        '{"metadata":{"name":"bad"},"spec":{"junk":' + deep + "}}",
        '{"metadata":' + deep + "}",
        json.dumps(node_json("n2")),
    ]
    body = ('{"metadata":{"resourceVersion":"7"},"items":[' + ",".join(items) + "]}").encode()
    r: Reflector[Node] = Reflector(client, NODE_KIND, Recorder())
    page = r._decode_page(body)
    assert [n.metadata.name for n in page.items] == ["n1", "n2"]


async def test_a_failing_handler_does_not_stop_the_stream(
    api: FakeApiServer, client: KubeClient, running: list[Reflector[Any]]
) -> None:
    class Flaky(Recorder):
        def on_add(self, obj: Any) -> None:
            super().on_add(obj)
            if obj.metadata.name == "boom":
                raise RuntimeError("handler bug")

    rec = Flaky()
    r: Reflector[Node] = start(running, Reflector(client, NODE_KIND, rec))
    await asyncio.wait_for(r.synced.wait(), 5)
    await eventually(lambda: api.watchers(NODES) == 1)
    api.add(NODES, node_json("boom"))
    api.add(NODES, node_json("after"))
    await eventually(lambda: rec.names("add") == ["boom", "after"])


async def test_iter_lines_reassembles_split_and_joined_lines() -> None:
    proto_chunks = [b'{"a":1}\n{"b"', b":2}\n\n", b'{"c":3}', b'\n{"d":4}']

    class Stream:
        async def iter_any(self) -> AsyncIterator[bytes]:
            for chunk in proto_chunks:
                yield chunk

    out = [line async for line in iter_lines(Stream())]  # type: ignore[arg-type]
    assert out == [b'{"a":1}', b'{"b":2}', b'{"c":3}', b'{"d":4}']


async def test_stop_closes_the_watch(api: FakeApiServer, client: KubeClient) -> None:
    r: Reflector[Node] = Reflector(client, NODE_KIND, Recorder())
    r.start()
    await asyncio.wait_for(r.synced.wait(), 5)
    await eventually(lambda: api.watchers(NODES) == 1)
    await r.stop()
    assert r.synced.is_set()
    # The fake server notices the dropped connection on its next write.
    api.add(NODES, node_json("after-stop"))
    await eventually(lambda: api.watchers(NODES) == 0)


async def test_pods_of_one_template_share_their_spec_listed_or_watched(
    api: FakeApiServer, client: KubeClient, running: list[Reflector[Any]]
) -> None:
    for name in ("a", "b", "c"):
        api.add(PODS, pod_json(name))
    api.add(PODS, pod_json("big", cpu="2"))
    rec = Recorder()
    r: Reflector[Pod] = start(running, Reflector(client, POD_KIND, rec, page_size=2))
    await asyncio.wait_for(r.synced.wait(), 5)
    await eventually(lambda: api.watchers(PODS) == 1)
    api.add(PODS, pod_json("d"))
    await eventually(lambda: "default/d" in r.store)
    pods = r.store
    spec = pods["default/a"].spec
    assert all(pods[f"default/{n}"].spec is spec for n in ("b", "c", "d"))  # across pages and the watch
    assert pods["default/big"].spec is not spec
    assert pods["default/big"].spec.containers[0].resources.requests == {"cpu": "2", "memory": "64Mi"}
    assert pods["default/d"].status is pods["default/a"].status
    assert [pods[f"default/{n}"].metadata.name for n in ("a", "b", "c", "d")] == ["a", "b", "c", "d"]
    assert pods["default/d"] == msgspec.json.decode(json.dumps(api.get(PODS, "default/d")), type=Pod)
