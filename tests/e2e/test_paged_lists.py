"""Lists against kube-apiserver 1.20.2: consistent reads in pages, then a watch from the list's version.

At ``resourceVersion=0`` the watch cache answers with the whole collection whatever the
``limit`` (150,000 pods: one body of some 200 MB, held while it is decoded). The reflector asks
for a consistent read instead, which the API server pages from etcd. What must hold against the
real server: every object arrives once over several pages, the requests carry ``limit`` and
``continue`` and no ``resourceVersion``, and the watch started at the list's resourceVersion
(etcd's, possibly newer than the watch cache has seen yet) delivers what changes after it.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from koordsched.api.core import Node
from koordsched.backends.kube.client import build_client
from koordsched.backends.kube.kinds import NODES
from koordsched.backends.kube.reflector import Reflector
from tests.e2e.conftest import SCHEDULER_USER
from tests.e2e.helpers import AuditLog, Cluster, wait_for

pytestmark = pytest.mark.e2e


class Added:
    def __init__(self) -> None:
        self.names: Counter[str] = Counter()

    def on_add(self, obj: Node) -> None:
        self.names[obj.metadata.name] += 1

    def on_update(self, old: Node, new: Node) -> None:
        pass

    def on_delete(self, obj: Node) -> None:
        pass


async def test_a_list_is_read_in_pages_and_watched_from_its_version(
    cluster: Cluster, scheduler_kubeconfig: Path, audit_log: AuditLog
) -> None:
    names = [await cluster.add_node(f"page-{i}") for i in range(5)]
    mark = audit_log.mark()
    added = Added()
    client = await build_client(str(scheduler_kubeconfig), qps=0, burst=0)
    r: Reflector[Node] = Reflector(client, NODES, added, page_size=2)
    try:
        r.start()
        await asyncio.wait_for(r.synced.wait(), 30)
        assert r.lists == 1
        assert {n: added.names[n] for n in names} == dict.fromkeys(names, 1)
        late = await cluster.add_node("page-late")

        async def arrived() -> bool:
            return late in r.store

        await wait_for(arrived, what=f"node {late} through the watch", timeout=30)
        assert added.names[late] == 1 and r.lists == 1  # watched, not relisted
    finally:
        await r.stop()
        await client.close()

    lists = [
        parse_qs(urlsplit(e.uri).query)
        for e in audit_log.events(mark)
        if e.resource == "nodes" and e.verb == "list" and e.user == SCHEDULER_USER
    ]
    assert len(lists) >= 3  # at least the 5 nodes, 2 a page
    assert lists[0]["limit"] == ["2"] and "resourceVersion" not in lists[0] and "continue" not in lists[0]
    assert all(q["limit"] == ["2"] and q["continue"] and "resourceVersion" not in q for q in lists[1:])
