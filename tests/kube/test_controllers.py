"""The kube backend's one controller runner against the fake API server: each write kind's
requests, the status-subresource fallback, the outcome codes handed back, queued writers, and
status writes sent once per object version (shared with the port through the ledger)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import msgspec
import pytest

from koordsched.api.core import Pod
from koordsched.api.kinds import ELASTIC_QUOTAS, RESERVATIONS, ObjectKind
from koordsched.api.reservation import Reservation
from koordsched.backends.kube.client import KubeClient
from koordsched.backends.kube.controllers import ControllerRunner, StatusLedger, object_path
from koordsched.backends.sim.controllers import merge_patch
from koordsched.framework.controllers import (
    NO_ANSWER,
    Eviction,
    MergePatch,
    ObjectWrite,
    StatusWrite,
    Write,
    WriteResult,
)
from tests.kube.fake_apiserver import PODS, Collection, FakeApiServer, pod_json

QUOTAS = ELASTIC_QUOTAS.path
QUOTA = f"{QUOTAS.rsplit('/', 1)[0]}/namespaces/team/elasticquotas/q"


class Recording:
    """A controller whose rounds return ``writes`` once; it keeps every outcome."""

    name = "test"
    description = "the test controller"
    watches: tuple[ObjectKind[Any], ...] = ()
    interval = 0.01
    write_timeout = 5.0
    simulated = False

    def __init__(self, writes: Sequence[Write], workers: int = 0) -> None:
        self.writes = list(writes)
        self.workers = workers
        self.results: list[WriteResult] = []

    def reconcile(self) -> list[Write]:
        out, self.writes = self.writes, []
        return out

    def applied(self, write: Write, result: WriteResult) -> None:
        self.results.append(result)

    def next_due(self) -> float | None:
        return None


def quota_patch(body: dict[str, Any], sub: str = "", fallback: bool = False) -> MergePatch:
    return MergePatch(ELASTIC_QUOTAS, "team", "q", body, sub, fallback)


@pytest.mark.parametrize(
    ("kind", "namespace", "sub", "want"),
    [
        (ELASTIC_QUOTAS, "team", "status", f"{QUOTA}/status"),
        (ELASTIC_QUOTAS, "team", "", QUOTA),
        (RESERVATIONS, "", "status", f"{RESERVATIONS.path}/q/status"),
    ],
)
def test_object_path(kind: ObjectKind[Any], namespace: str, sub: str, want: str) -> None:
    assert object_path(kind, namespace, "q", sub) == want


async def test_patches_go_in_order_with_the_fallback(api: FakeApiServer, client: KubeClient) -> None:
    api.collections[QUOTAS] = Collection(QUOTAS, True, "ElasticQuota")
    api.add(QUOTAS, {"metadata": {"name": "q", "namespace": "team"}, "spec": {}})
    api.fail("PATCH", f"{QUOTA}/status", 404)  # a CRD without the status subresource
    write = ObjectWrite(
        "team/q",
        (
            quota_patch({"metadata": {"annotations": {"a": "1"}}}),
            quota_patch({"status": {"used": {"cpu": "1"}}}, "status", fallback=True),
        ),
    )
    c = Recording([write])
    assert await ControllerRunner(c, client).round() == 1
    assert c.results == [WriteResult(0, "", c.results[0].seconds)]
    patches = [(r.path, r.content_type) for r in api.requests if r.method == "PATCH"]
    merge = "application/merge-patch+json"
    assert patches == [(QUOTA, merge), (f"{QUOTA}/status", merge), (QUOTA, merge)]
    stored = api.get(QUOTAS, "team/q")
    assert stored["status"]["used"] == {"cpu": "1"} and stored["metadata"]["annotations"] == {"a": "1"}


@pytest.mark.parametrize(("status", "code"), [(404, 404), (500, 500), (None, NO_ANSWER)])
async def test_outcomes_reach_the_controller(
    api: FakeApiServer, client: KubeClient, status: int | None, code: int
) -> None:
    api.collections[QUOTAS] = Collection(QUOTAS, True, "ElasticQuota")
    api.add(QUOTAS, {"metadata": {"name": "q", "namespace": "team"}, "spec": {}})
    if status is None:
        api.stall("PATCH", QUOTA)
    else:
        api.fail("PATCH", QUOTA, status)
    c = Recording([ObjectWrite("team/q", (quota_patch({"metadata": {"labels": {"x": "y"}}}),))])
    c.write_timeout = 0.2
    await ControllerRunner(c, client).round()
    assert [r.code for r in c.results] == [code] and c.results[0].error


async def test_an_eviction_carries_the_uid(api: FakeApiServer, client: KubeClient) -> None:
    stored = api.add(PODS, pod_json("p", node="n1"))
    pod = msgspec.convert(stored, Pod)
    c = Recording([Eviction(pod, "overused")])
    await ControllerRunner(c, client).round()
    assert c.results[0].ok
    (post,) = [r for r in api.requests if r.method == "POST"]
    assert post.path == "/api/v1/namespaces/default/pods/p/eviction"
    assert post.body["deleteOptions"] == {"preconditions": {"uid": pod.metadata.uid}}


async def test_queued_writes_are_flushed_on_stop(api: FakeApiServer, client: KubeClient) -> None:
    api.collections[QUOTAS] = Collection(QUOTAS, True, "ElasticQuota")
    api.add(QUOTAS, {"metadata": {"name": "q", "namespace": "team"}, "spec": {}})
    c = Recording([ObjectWrite("team/q", (quota_patch({"metadata": {"labels": {"x": "y"}}}),))], workers=2)
    runner = ControllerRunner(c, client)
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    await asyncio.sleep(0)
    stop.set()
    await task
    assert [r.ok for r in c.results] == [True]


@pytest.mark.parametrize(
    ("target", "patch", "want"),
    [
        ({"a": 1, "b": {"c": 2}}, {"b": {"c": None, "d": 3}}, {"a": 1, "b": {"d": 3}}),
        ({"a": [1]}, {"a": [2, 3]}, {"a": [2, 3]}),
        ({}, {"s": {"phase": "x"}}, {"s": {"phase": "x"}}),
        ({"a": 1}, {"a": None}, {}),
    ],
)
def test_the_simulator_merges_as_rfc_7386(target: Any, patch: Any, want: Any) -> None:
    assert merge_patch(target, patch) == want


RESV = RESERVATIONS.path


def reservation_write(version: str, phase: str = "Failed") -> StatusWrite:
    obj = msgspec.convert(
        {"metadata": {"name": "r", "resourceVersion": version}, "status": {"phase": phase}}, Reservation
    )
    return StatusWrite(RESERVATIONS, "r", obj, version)


def reservations_served(api: FakeApiServer) -> None:
    api.collections[RESV] = Collection(RESV, False, "Reservation")
    api.add(RESV, {"metadata": {"name": "r"}, "spec": {}, "status": {"phase": "Available"}})


async def test_a_status_write_patches_the_status_with_the_whole_status(
    api: FakeApiServer, client: KubeClient
) -> None:
    reservations_served(api)
    c = Recording([reservation_write("7")])
    assert await ControllerRunner(c, client).round() == 1
    (patch,) = [r for r in api.requests if r.method == "PATCH"]
    assert patch.path == f"{RESV}/r/status" and patch.body["status"]["phase"] == "Failed"
    assert c.results[0].ok and api.get(RESV, "r")["status"]["phase"] == "Failed"


@pytest.mark.parametrize(
    ("case", "claimed", "versions", "sent"),
    [
        ("one write per version", None, ["7", "7"], 1),
        ("a new version is written", None, ["7", "8"], 2),
        ("no version: never de-duplicated", None, ["", ""], 2),
        ("the port claimed this version already (a failed attempt)", "7", ["7"], 0),
        ("the port claimed an older version", "6", ["7"], 1),
    ],
)
async def test_status_writes_are_sent_once_per_version_across_the_ledger(
    api: FakeApiServer, client: KubeClient, case: str, claimed: str | None, versions: list[str], sent: int
) -> None:
    reservations_served(api)
    ledger = StatusLedger()
    if claimed is not None:
        assert ledger.claim(reservation_write(claimed))
    runner = ControllerRunner(Recording([]), client, ledger=ledger)
    for v in versions:
        runner.controller.writes = [reservation_write(v)]  # type: ignore[attr-defined]
        await runner.round()
    assert len([r for r in api.requests if r.method == "PATCH"]) == sent, case


async def test_a_failed_status_write_is_forgotten_so_the_next_round_sends_it(
    api: FakeApiServer, client: KubeClient
) -> None:
    reservations_served(api)
    api.fail("PATCH", f"{RESV}/r/status", 500)
    c = Recording([reservation_write("7")])
    runner = ControllerRunner(c, client)
    await runner.round()
    c.writes = [reservation_write("7")]
    await runner.round()
    assert [r.code for r in c.results] == [500, 0]  # sent again from the same version, applied
