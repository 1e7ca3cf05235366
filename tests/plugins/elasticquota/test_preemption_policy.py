"""Quota-aware preemption's decisions (Koordinator's preempt.go), table-driven: who may preempt,
who is a victim, and whether the pod fits its quota once victims are gone."""

from __future__ import annotations

import msgspec
import pytest

from koordsched.api.core import Pod
from koordsched.api.kinds import ELASTIC_QUOTAS
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import Code, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.elasticquota.preemption import (
    NOT_ELIGIBLE_NEVER,
    NOT_ELIGIBLE_TERMINATING,
    QuotaPreemption,
)
from tests.plugins.elasticquota.helpers import cluster, plugin, qpod, quota


def with_priority(pod: PodInfo, priority: int) -> PodInfo:
    pod.priority = priority
    return pod


def variant(pod: PodInfo, **spec: object) -> PodInfo:
    raw = msgspec.to_builtins(pod.pod)
    for key, value in spec.items():
        if key == "nominatedNodeName":
            raw.setdefault("status", {})[key] = value
        elif key == "deletionTimestamp":
            raw["metadata"][key] = value
        else:
            raw["spec"][key] = value
    out = PodInfo(msgspec.convert(raw, Pod), pod.requests, pod.priority)
    return out


@pytest.fixture
def setup() -> tuple[QuotaPreemption, object]:
    handle = cluster(8)
    handle.put(ELASTIC_QUOTAS, quota("a", max={"cpu": "2"}), quota("b", max={"cpu": "2"}))
    p = plugin(handle)
    p.tree()
    return QuotaPreemption(p, handle), handle


@pytest.mark.parametrize(
    ("victim", "expected"),
    [
        pytest.param(with_priority(qpod("v", "a"), 1), True, id="same-quota-lower"),
        pytest.param(with_priority(qpod("v", "a"), 10), False, id="same-priority"),
        pytest.param(with_priority(qpod("v", "a"), 20), False, id="higher"),
        pytest.param(with_priority(qpod("v", "b"), 1), False, id="other-quota"),
        pytest.param(with_priority(qpod("v", "a", non_preemptible=True), 1), False, id="non-preemptible"),
    ],
)
def test_potential_victim(setup: tuple[QuotaPreemption, object], victim: PodInfo, expected: bool) -> None:
    policy, _ = setup
    policy.plugin.on_pod_seen(victim, True)
    pod = with_priority(qpod("p", "a"), 10)
    policy.plugin.on_pod_seen(pod, False)
    assert policy.potential_victim(pod, victim) is expected


def test_pod_eligible(setup: tuple[QuotaPreemption, object]) -> None:
    policy, handle = setup
    pod = with_priority(qpod("p", "a"), 10)
    assert policy.pod_eligible(pod, "", None) == (True, "")
    assert policy.pod_eligible(variant(pod, preemptionPolicy="Never"), "", None) == (
        False,
        NOT_ELIGIBLE_NEVER,
    )
    # A terminating lower-priority pod of the same quota on the nominated node: it preempted already.
    snap = handle.snapshot  # type: ignore[attr-defined]
    going = variant(with_priority(qpod("old", "a"), 1), deletionTimestamp="2026-01-01T00:00:00Z")
    policy.plugin.on_pod_seen(going, True)
    snap.add_pod(snap.by_name["n0"], going)
    assert policy.pod_eligible(pod, "n0", None) == (False, NOT_ELIGIBLE_TERMINATING)
    assert policy.pod_eligible(pod, "n0", Status.unresolvable("gone")) == (True, "")
    # Of another quota it does not count.
    other = with_priority(qpod("p2", "b"), 10)
    assert policy.pod_eligible(other, "n0", None) == (True, "")


def test_offset_and_candidates(setup: tuple[QuotaPreemption, object]) -> None:
    policy, _ = setup
    assert policy.offset_and_num_candidates(500) == (0, 500)


def test_quota_fits_after_victims_are_removed(setup: tuple[QuotaPreemption, object]) -> None:
    policy, handle = setup
    p = policy.plugin
    victim = with_priority(qpod("v", "a", "2"), 1)
    p.on_pod_seen(victim, True)
    pod = with_priority(qpod("p", "a", "1"), 10)
    state = CycleState()
    _, status = p.pre_filter(state, pod)
    assert status.code is Code.UNSCHEDULABLE
    assert policy.quota_fits(state, pod).message() == (
        "Insufficient quotas, quotaName: a, runtime: cpu:2, used: cpu:2, pod's request: cpu:1, "
        "exceedDimensions: [cpu]"
    )
    node = handle.snapshot.infos[0]  # type: ignore[attr-defined]
    trial = state.clone()
    p.remove_pod(trial, pod, victim, node)
    assert policy.quota_fits(trial, pod).ok
    # The cycle's own state did not move.
    assert not policy.quota_fits(state, pod).ok


def test_no_victims_on_a_node_is_worded_as_koordinator() -> None:
    from koordsched.framework.snapshot import Snapshot
    from koordsched.plugins.elasticquota.preemption import QuotaEvaluator
    from tests.builders import make_node
    from tests.fakes import FakeHandle

    snap = Snapshot()
    info = snap.add_node(make_node("n7"), {"cpu": 8000, "memory": 1 << 30, "pods": 110})
    handle = FakeHandle(snap)
    handle.put(ELASTIC_QUOTAS, quota("a", max={"cpu": "2"}))
    p = plugin(handle)
    p.tree()
    policy = QuotaPreemption(p, handle)
    evaluator = QuotaEvaluator("ElasticQuota", handle, policy, list)  # type: ignore[arg-type]
    pod = with_priority(qpod("urgent", "a"), 10)
    victims, violations, status = evaluator.select_victims_on_node(CycleState(), pod, info, [])
    assert (victims, violations) == ([], 0)
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message() == "No victims found on node n7 for preemptor pod urgent"
