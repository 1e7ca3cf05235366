"""ElasticQuota's PreFilter, Reserve and Unreserve (spec 4.5), called directly as upstream's
plugin tests do; messages compared byte for byte."""

from __future__ import annotations

import pytest

from koordsched.api.elastic_quota import DEFAULT_QUOTA_NAME
from koordsched.api.kinds import ELASTIC_QUOTAS
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import Code, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.elasticquota import ElasticQuotaPlugin
from tests.fakes import FakeHandle
from tests.plugins.elasticquota.helpers import cluster, plugin, qpod, quota


def pre_filter(p: ElasticQuotaPlugin, pod: PodInfo) -> Status:
    _, status = p.pre_filter(CycleState(), pod)
    return status


def bind(p: ElasticQuotaPlugin, *pods: PodInfo) -> None:
    for pod in pods:
        p.on_pod_seen(pod, False)
        assert pre_filter(p, pod).ok, pod
        assert p.reserve(CycleState(), pod, "n0").ok


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(qpod("x", "team-a", quota_name="labelled"), "labelled", id="label"),
        pytest.param(qpod("x", "team-a", quota_name="nobody"), DEFAULT_QUOTA_NAME, id="unknown-label"),
        pytest.param(qpod("x", "team-a"), "team-a", id="same-name-in-namespace"),
        pytest.param(qpod("x", "listed"), "by-annotation", id="namespaces-annotation"),
        pytest.param(qpod("x", "elsewhere"), DEFAULT_QUOTA_NAME, id="default"),
        # A quota named like the namespace but living in another namespace is not "the same name".
        pytest.param(qpod("x", "other"), DEFAULT_QUOTA_NAME, id="same-name-other-namespace"),
    ],
)
def test_quota_of(pod: PodInfo, expected: str) -> None:
    handle = cluster(8)
    handle.put(
        ELASTIC_QUOTAS,
        quota("labelled", "ns1", max={"cpu": "1"}),
        quota("team-a", max={"cpu": "1"}),
        quota("by-annotation", "ns2", max={"cpu": "1"}, namespaces=["listed"]),
        quota("other", "not-other", max={"cpu": "1"}),
    )
    p = plugin(handle)
    p.tree()
    assert p.quota_of(pod) == expected


def test_max_caps_used_with_koordinators_message() -> None:
    handle = cluster(8)
    handle.put(ELASTIC_QUOTAS, quota("team-a", max={"cpu": "2", "memory": "4Gi"}))
    p = plugin(handle)
    bind(p, qpod("a", "team-a", "1500m", memory="1Gi"))
    status = pre_filter(p, qpod("b", "team-a", "1", memory="1Gi"))
    assert status.code is Code.UNSCHEDULABLE
    assert status.message() == (
        # The runtime follows what the quota's pods ask for (2.5 cpu, 2Gi), capped at max.
        "Insufficient quotas, quotaName: team-a, runtime: cpu:2,memory:2Gi, used: cpu:1500m,memory:1Gi, "
        "pod's request: cpu:1,memory:1Gi, exceedDimensions: [cpu]"
    )
    assert pre_filter(p, qpod("c", "team-a", "500m", memory="3Gi")).ok


def test_request_is_masked_to_the_resources_max_names() -> None:
    handle = cluster(8)
    handle.put(ELASTIC_QUOTAS, quota("team-a", max={"memory": "1Gi"}))
    p = plugin(handle)
    # cpu is not limited by the quota at all.
    assert pre_filter(p, qpod("a", "team-a", "6", memory="1Gi")).ok


def test_unreserve_gives_back_and_deletion_forgets() -> None:
    handle = cluster(8)
    handle.put(ELASTIC_QUOTAS, quota("team-a", max={"cpu": "1"}))
    p = plugin(handle)
    first = qpod("a", "team-a", "1")
    bind(p, first)
    second = qpod("b", "team-a", "1")
    assert not pre_filter(p, second).ok
    p.unreserve(CycleState(), first, "n0")
    assert pre_filter(p, second).ok
    assert p.reserve(CycleState(), second, "n0").ok
    assert not pre_filter(p, first).ok
    p.on_pod_gone(second.uid)
    assert pre_filter(p, first).ok


def test_bound_pods_count_as_used() -> None:
    handle = cluster(8)
    handle.put(ELASTIC_QUOTAS, quota("team-a", max={"cpu": "2"}))
    p = plugin(handle)
    p.on_pod_seen(qpod("running", "team-a", "2"), True)
    assert (
        pre_filter(p, qpod("new", "team-a", "100m"))
        .message()
        .startswith(
            "Insufficient quotas, quotaName: team-a, runtime: cpu:2, used: cpu:2, pod's request: cpu:100m"
        )
    )


def test_runtime_shares_the_cluster_by_pending_demand() -> None:
    # 4 cpu, two quotas of max 10 each with 4 one-cpu pods pending each: 2 cpu each.
    handle = cluster(4)
    handle.put(ELASTIC_QUOTAS, quota("a", max={"cpu": "10"}), quota("b", max={"cpu": "10"}))
    p = plugin(handle)
    a_pods = [qpod(f"a{i}", "a") for i in range(4)]
    b_pods = [qpod(f"b{i}", "b") for i in range(4)]
    for pod in a_pods + b_pods:
        p.on_pod_seen(pod, False)
    bind(p, *a_pods[:2])
    assert pre_filter(p, a_pods[2]).message() == (
        "Insufficient quotas, quotaName: a, runtime: cpu:2, used: cpu:2, pod's request: cpu:1, "
        "exceedDimensions: [cpu]"
    )
    # b's pods go away: a may use the whole cluster.
    for pod in b_pods:
        p.on_pod_gone(pod.uid)
    assert pre_filter(p, a_pods[2]).ok


def test_min_is_guaranteed_before_sharing() -> None:
    handle = cluster(4)
    handle.put(ELASTIC_QUOTAS, quota("a", max={"cpu": "10"}, min={"cpu": "3"}), quota("b", max={"cpu": "10"}))
    p = plugin(handle)
    for i in range(4):
        p.on_pod_seen(qpod(f"a{i}", "a"), False)
        p.on_pod_seen(qpod(f"b{i}", "b"), False)
    # a: min 3 + half of the 1 left (weights 10/10: 500m); b: the other 500m.
    assert p.limit_of(p.tree().nodes["a"]) == {"cpu": 3500}
    assert p.limit_of(p.tree().nodes["b"]) == {"cpu": 500}


def test_without_runtime_quota_the_limit_is_max() -> None:
    handle = cluster(1)
    handle.put(ELASTIC_QUOTAS, quota("a", max={"cpu": "10"}))
    p = plugin(handle, enableRuntimeQuota=False)
    bind(p, *(qpod(f"a{i}", "a") for i in range(10)))
    assert (
        pre_filter(p, qpod("a10", "a"))
        .message()
        .startswith("Insufficient quotas, quotaName: a, runtime: cpu:10,")
    )


def test_non_preemptible_pods_fit_under_min() -> None:
    handle = cluster(8)
    handle.put(ELASTIC_QUOTAS, quota("a", max={"cpu": "8"}, min={"cpu": "2"}))
    p = plugin(handle)
    bind(
        p, qpod("np1", "a", non_preemptible=True), qpod("np2", "a", non_preemptible=True), qpod("plain", "a")
    )
    status = pre_filter(p, qpod("np3", "a", non_preemptible=True))
    assert status.message() == (
        "Insufficient non-preemptible quotas, quotaName: a, min: cpu:2, nonPreemptibleUsed: cpu:2, "
        "pod's request: cpu:1, exceedDimensions: [cpu]"
    )
    assert pre_filter(p, qpod("plain2", "a")).ok


def test_parent_quota_checked_with_enable_check_parent_quota() -> None:
    handle = cluster(100)
    handle.put(
        ELASTIC_QUOTAS,
        quota("p", max={"cpu": "3"}, is_parent=True),
        quota("c1", max={"cpu": "3"}, parent="p"),
        quota("c2", max={"cpu": "3"}, parent="p"),
    )
    p = plugin(handle, enableCheckParentQuota=True, enableRuntimeQuota=False)
    bind(p, qpod("x", "c1", "2"))
    status = pre_filter(p, qpod("y", "c2", "2"))
    assert status.message() == (
        "Insufficient quotas, quotaNameTopo: [p c2], runtime: cpu:3, used: cpu:2, pod's request: cpu:2, "
        "exceedDimensions: [cpu]"
    )
    assert pre_filter(p, qpod("z", "c2", "1")).ok


def test_refused_quota_refuses_only_its_pods() -> None:
    handle = cluster(8)
    handle.put(
        ELASTIC_QUOTAS, quota("bad", max={"cpu": "1"}, min={"cpu": "2"}), quota("good", max={"cpu": "1"})
    )
    p = plugin(handle)
    status = pre_filter(p, qpod("x", "bad"))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message() == (
        'quota bad cannot be used: ElasticQuota "bad/bad" is invalid: spec.min[cpu]: Invalid value: "2": '
        "must be less than or equal to spec.max[cpu]"
    )
    assert pre_filter(p, qpod("y", "good")).ok
    assert pre_filter(p, qpod("z", "default")).ok


def test_parent_quota_takes_no_pods() -> None:
    handle = cluster(8)
    handle.put(
        ELASTIC_QUOTAS, quota("p", max={"cpu": "4"}, is_parent=True), quota("c", max={"cpu": "4"}, parent="p")
    )
    p = plugin(handle)
    status = pre_filter(p, qpod("x", "p"))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message() == "quota p is a parent quota: pods are charged to the quotas at its leaves"


def test_a_new_quota_recharges_pods_from_the_default_quota() -> None:
    handle: FakeHandle = cluster(8)
    p = plugin(handle)
    running = qpod("r", "team-a", "3")
    p.on_pod_seen(running, True)
    assert p.ledger.used[DEFAULT_QUOTA_NAME] == {"cpu": 3000}
    handle.put(ELASTIC_QUOTAS, quota("team-a", max={"cpu": "3"}))
    assert (
        pre_filter(p, qpod("n", "team-a", "1"))
        .message()
        .startswith("Insufficient quotas, quotaName: team-a, runtime: cpu:3, used: cpu:3,")
    )
    assert not p.ledger.used.get(DEFAULT_QUOTA_NAME)


def test_preemption_dry_run_moves_used_of_the_same_quota_only() -> None:
    handle = cluster(8)
    handle.put(ELASTIC_QUOTAS, quota("a", max={"cpu": "2"}), quota("b", max={"cpu": "2"}))
    p = plugin(handle)
    victim, other = qpod("v", "a", "2"), qpod("o", "b", "1")
    bind(p, victim, other)
    state = CycleState()
    pod = qpod("new", "a", "1")
    _, status = p.pre_filter(state, pod)
    assert not status.ok
    node = handle.snapshot.infos[0]
    p.remove_pod(state, pod, other, node)
    p.remove_pod(state, pod, victim, node)
    assert p.used_in(state) == ({"cpu": 0}, {})
    p.add_pod(state, pod, victim, node)
    assert p.used_in(state) == ({"cpu": 2000}, {})
    # The ledger itself did not move.
    assert p.ledger.used["a"] == {"cpu": 2000}


@pytest.mark.parametrize(
    "memory",
    [
        2**63 - 1,  # what HeldRequests holds for an unreadable amount
        2**62,  # readable but absurd: more than the default quota's MaxInt64/5 could ever hold
        (2**63 - 1) // 5,
    ],
)
def test_an_unreadable_or_absurd_request_is_not_charged_but_logged(
    caplog: pytest.LogCaptureFixture, memory: int
) -> None:
    handle = cluster(8)
    p = plugin(handle)
    bad = qpod("bad", "default", "1")
    bad.requests = {"cpu": 1000, "memory": memory}
    with caplog.at_level("WARNING"):
        p.on_pod_seen(bad, True)
    assert p.ledger.used[DEFAULT_QUOTA_NAME] == {"cpu": 1000}
    assert any(
        "pod default/bad: its memory request cannot be read or is absurd (at least MaxInt64/5): "
        "not charged to quota koordinator-default-quota" in r.message
        for r in caplog.records
    )
    # The other pods of the quota are not stopped by it.
    assert pre_filter(p, qpod("good", "default", "1", memory="1Gi")).ok


def test_default_quota_admits_and_still_charges() -> None:
    """A cluster without quotas: every pod is charged to the default group, whose max (without
    defaultQuotaGroupMax) is unlimited; its state is written for PostFilter all the same."""
    from koordsched.plugins.elasticquota.state import STATE_KEY, QuotaState

    p = plugin(cluster(8))
    for i, pod in enumerate([qpod("a", "ns", "6"), qpod("b", "ns", "6", non_preemptible=True)]):
        state = CycleState()
        _, status = p.pre_filter(state, pod)
        assert status.ok
        qs = state.read(STATE_KEY, QuotaState)
        assert qs.quota == DEFAULT_QUOTA_NAME and qs.limit == p.limit_of(p.tree().nodes[DEFAULT_QUOTA_NAME])
        assert p.reserve(state, pod, "n0").ok
        assert p.ledger.used[DEFAULT_QUOTA_NAME] == {"cpu": 6000 * (i + 1)}


def test_default_quota_with_a_max_still_checks() -> None:
    p = plugin(cluster(8), defaultQuotaGroupMax={"cpu": "2"})
    bind(p, qpod("a", "ns", "1500m"))
    status = pre_filter(p, qpod("b", "ns", "1"))
    assert status.code is Code.UNSCHEDULABLE
    assert status.message().startswith(
        f"Insufficient quotas, quotaName: {DEFAULT_QUOTA_NAME}, runtime: cpu:2, used: cpu:1500m,"
    )
    assert pre_filter(p, qpod("c", "ns", "500m")).ok
