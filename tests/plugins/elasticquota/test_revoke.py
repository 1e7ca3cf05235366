"""The overuse revoke controller's choice (Koordinator's ``QuotaOverUsedRevokeController``):
when a quota's used has exceeded its runtime for longer than ``delayEvictTime``, which of its
bound pods go. Table-driven from Koordinator's documented rules."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import pytest

from koordsched.api.kinds import ELASTIC_QUOTAS
from koordsched.framework.types import PodInfo
from koordsched.plugins.elasticquota import ElasticQuotaPlugin
from koordsched.plugins.elasticquota.revoke import pods_to_revoke, within
from tests.fakes import FakeHandle
from tests.plugins.elasticquota.helpers import cluster, plugin, qpod, quota

WALL = 1_700_000_000.0


def running(
    name: str, cpu: int, priority: int, started: str = "", *, non_preemptible: bool = False
) -> PodInfo:
    info = qpod(name, "team-a", str(cpu), non_preemptible=non_preemptible)
    pod = info.pod
    pod = msgspec.structs.replace(
        pod,
        spec=msgspec.structs.replace(pod.spec, node_name="n0"),
        status=msgspec.structs.replace(pod.status, start_time=started or None),
    )
    return PodInfo(pod, info.requests, priority)


@dataclass
class Case:
    name: str
    pods: list[PodInfo]
    used: int
    limit: int
    want: list[str]


CASES = [
    Case("within the limit: nobody", [running("a", 1, 0)], 1, 2, []),
    Case(
        "lowest priority first",
        [running("hi", 1, 10), running("lo", 1, 1), running("mid", 1, 5)],
        3,
        2,
        ["lo"],
    ),
    Case(
        "among equals the later started goes first",
        [running("old", 1, 1, "2026-01-01T00:00:00Z"), running("new", 1, 1, "2026-02-01T00:00:00Z")],
        2,
        1,
        ["new"],
    ),
    Case(
        "a taken pod that fits back stays (put back most important first)",
        # Taken off: lo1 (1), lo2 (1), big (4) until used 3 <= 4... then lo2 and lo1 fit back.
        [running("big", 4, 3), running("lo1", 1, 1), running("lo2", 1, 2), running("top", 2, 9)],
        8,
        4,
        ["big"],
    ),
    Case(
        "when even every pod is not enough, all go",
        [running("a", 1, 0), running("b", 1, 0)],
        # 3 more cpu used by pods assumed in this scheduler (not bound): not revocable.
        5,
        2,
        ["a", "b"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_pods_to_revoke(case: Case) -> None:
    requests = {p.uid: {"cpu": p.requests["cpu"]} for p in case.pods}
    chosen = pods_to_revoke(
        case.pods, lambda p: requests[p.uid], {"cpu": case.used * 1000}, {"cpu": case.limit * 1000}, WALL
    )
    assert sorted(p.pod.metadata.name for p in chosen) == sorted(case.want)


def test_within_compares_the_limits_resources_only() -> None:
    assert within({"cpu": 5, "memory": 10}, {"memory": 10})
    assert not within({"cpu": 5}, {"cpu": 4})
    assert within({}, {"cpu": 0})


def borrowed(**args: object) -> tuple[ElasticQuotaPlugin, FakeHandle]:
    """team-a (min 2, max 4) runs 4 one-cpu pods on a 4-cpu cluster; team-b (min 2) asks for 2."""
    handle = cluster(4)
    handle.put(
        ELASTIC_QUOTAS,
        quota("team-a", max={"cpu": 4}, min={"cpu": 2}),
        quota("team-b", max={"cpu": 4}, min={"cpu": 2}),
    )
    p = plugin(handle, **args)
    for i in range(4):
        p.on_pod_seen(running(f"a{i}", 1, i), True)
    return p, handle


def ask(p: ElasticQuotaPlugin) -> None:
    for i in range(2):
        p.on_pod_seen(qpod(f"b{i}", "team-b"), False)


def test_off_by_default() -> None:
    p, _ = borrowed()
    ask(p)
    assert p.revoke_interval is None
    assert p.revoke(1000.0) == [] and p.revoke_due(0.0) is None


def test_revoked_only_after_the_delay_and_then_the_clock_starts_again() -> None:
    p, _ = borrowed(monitorAllQuotas=True, delayEvictTime="10s", revokePodInterval="1s")
    assert p.revoke(0.0) == []  # within its runtime (4): nobody asks for more
    ask(p)  # team-b's request takes team-a's runtime down to its min
    assert p.revoke(1.0) == []
    # Last seen within at 0: the first round more than 10 s later.
    assert p.revoke_due(1.0) == 11.0
    assert p.revoke(10.0) == []  # 10 s exactly is not longer than the delay
    gone = p.revoke(11.0)
    # In Koordinator's order: the put-back pass goes from the most important down.
    assert [(r.pod.pod.metadata.name, r.quota) for r in gone] == [("a1", "team-a"), ("a0", "team-a")]
    assert (
        gone[0].message == "revoked: quota team-a used cpu:4 more than its runtime cpu:2 for longer than 10s"
    )
    # Nothing was evicted (the backend does that): the clock started again.
    assert p.revoke(13.0) == [] and p.revoke_due(13.0) == 22.0


def test_a_quota_back_within_its_runtime_restarts_the_clock() -> None:
    p, _ = borrowed(monitorAllQuotas=True, delayEvictTime="10s")
    p.revoke(0.0)
    ask(p)
    p.revoke(5.0)
    for i in range(2):
        p.on_pod_gone(f"uid-team-b-b{i}")
    assert p.revoke(8.0) == []  # within again: last seen within at 8
    ask(p)
    assert p.revoke(15.0) == []
    assert sorted(r.pod.pod.metadata.name for r in p.revoke(19.0)) == ["a0", "a1"]


def test_non_preemptible_and_unbound_pods_are_not_revoked() -> None:
    p, _ = borrowed(monitorAllQuotas=True, delayEvictTime="0s")
    p.on_pod_seen(running("np", 1, -5, non_preemptible=True), True)
    p.revoke(0.0)
    ask(p)
    # used 5 > runtime 2: a0, a1, a2 go (np, the least important, is held against min).
    assert sorted(r.pod.pod.metadata.name for r in p.revoke(1.0)) == ["a0", "a1", "a2"]
