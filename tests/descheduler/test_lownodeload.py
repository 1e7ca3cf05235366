"""LowNodeLoad, table-driven from Koordinator's documented semantics (spec 7.1)."""

from __future__ import annotations

from typing import Any

import pytest

from koordsched.api.core import Pod
from koordsched.descheduler.plugins.common import Namespaces
from koordsched.descheduler.plugins.lownodeload import LowNodeLoad, LowNodeLoadArgs
from koordsched.descheduler.plugins.lownodeload.args import LoadAnomalyCondition, NodePool
from koordsched.descheduler.plugins.lownodeload.detector import ANOMALY, OK, Detector
from koordsched.descheduler.plugins.lownodeload.sorting import sort_pods
from tests.descheduler.helpers import FakeHandle, ListFit, RecordingEvictor, metric, node, pod

SHIPPED: dict[str, Any] = {
    "low_thresholds": {"cpu": 45, "memory": 55},
    "high_thresholds": {"cpu": 75, "memory": 80},
    "evictable_namespaces": Namespaces(exclude=["kube-system", "koordinator-system"]),
}


def args(**over: Any) -> LowNodeLoadArgs:
    a = LowNodeLoadArgs(**{**SHIPPED, **over})
    a.validate()
    return a


def hot_cluster(hot_cpu: str = "9", pods_usage: tuple[str, ...] = ("3", "2", "1")) -> FakeHandle:
    """``hot`` at 90 % cpu with pods p0.. using ``pods_usage`` cores; two idle nodes at 10 %."""
    pods = [pod(f"p{i}", "hot", created=f"2024-01-0{i + 1}T00:00:00Z") for i in range(len(pods_usage))]
    return FakeHandle(
        nodes=[node("hot"), node("cold1"), node("cold2")],
        pods=pods,
        metrics={
            "hot": metric(
                "hot", hot_cpu, pods=[(p, u, "1Gi") for p, u in zip(pods, pods_usage, strict=True)]
            ),
            "cold1": metric("cold1", "1"),
            "cold2": metric("cold2", "1"),
        },
    )


def rounds(h: FakeHandle, a: LowNodeLoadArgs, n: int) -> tuple[LowNodeLoad, list[int]]:
    """Run ``n`` rounds 10 s apart; returns the plugin and how many evictions each round asked."""
    pl = LowNodeLoad(a, h)
    per_round: list[int] = []
    for _ in range(n):
        before = len(h.evictor_impl.evicted)
        pl.balance(h.nodes)
        per_round.append(len(h.evictor_impl.evicted) - before)
        h.now += 10
    return pl, per_round


# --- the anomaly detector -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("abnormalities", "first"),
    [(5, 6), (1, 2), (2, 3), (0, 6)],  # 0: the default (5) applies
)
def test_a_hot_node_is_acted_on_after_more_than_n_consecutive_rounds(abnormalities: int, first: int) -> None:
    h = hot_cluster()
    cond = LoadAnomalyCondition(timeout="1m", consecutive_abnormalities=abnormalities)
    _, per_round = rounds(h, args(anomaly_condition=cond), first)
    assert per_round[:-1] == [0] * (first - 1)
    assert per_round[-1] > 0


def test_detector_states() -> None:
    d = Detector(timeout=60, abnormalities=2)
    assert [d.mark(False, t) for t in (0, 1)] == [OK, OK]
    assert d.mark(False, 2) == ANOMALY
    assert d.mark(False, 30) == ANOMALY  # stays anomalous within the timeout
    assert d.current(63) == OK  # expires after it
    assert [d.mark(False, t) for t in (64, 65)] == [OK, OK]
    assert d.mark(True, 66) == OK  # a normal round breaks the streak
    assert [d.mark(False, t) for t in (67, 68, 69)] == [OK, OK, ANOMALY]
    assert d.mark(True, 70) == OK


def test_after_evicting_the_node_needs_a_new_streak() -> None:
    h = hot_cluster(pods_usage=("1", "1", "1"))  # one eviction is not enough to cool it
    h.fit = ListFit(refused={("p0", "cold1"), ("p0", "cold2"), ("p1", "cold1"), ("p1", "cold2")})
    _, per_round = rounds(h, args(), 12)
    assert per_round == [0] * 5 + [1] + [0] * 5 + [1]


# --- classification and preconditions -----------------------------------------------------------


def test_reason_and_order_stop_when_the_node_is_no_longer_over() -> None:
    h = hot_cluster(pods_usage=("1", "3", "2"))
    pl, _ = rounds(h, args(), 6)
    names = [n for n, _ in h.evictor_impl.evicted]
    # 15 % over: the pod closest to covering the excess first (2 cores; 3 cores is further off),
    # then 90 % - 20 % = 70 % <= 75 %, so one is enough.
    assert names == ["p2"]
    (opts,) = [o for _, o in h.evictor_impl.evicted]
    assert opts.plugin == "LowNodeLoad"
    assert opts.reason == "node is overutilized, node cpu usage(90.00%)>threshold(75.00%)"
    (d,) = pl.decisions
    assert d.node == "hot" and d.target == "cold1" and d.evicted


def test_reason_lists_every_over_used_resource_by_name() -> None:
    h = hot_cluster()
    h.metrics["hot"] = metric("hot", "9", memory="90Gi", pods=[(h.pods[0], "3", "30Gi")])
    rounds(h, args(), 6)
    (_, opts), *_ = h.evictor_impl.evicted
    assert opts.reason == (
        "node is overutilized, node cpu usage(90.00%)>threshold(75.00%), "
        "node memory usage(90.00%)>threshold(80.00%)"
    )


@pytest.mark.parametrize(
    ("case", "mutate", "expect_evictions"),
    [
        ("baseline", lambda h, a: None, True),
        (
            "no low node",
            lambda h, a: h.metrics.update(cold1=metric("cold1", "6"), cold2=metric("cold2", "6")),
            False,
        ),
        ("numberOfNodes >= low nodes", lambda h, a: setattr(a, "number_of_nodes", 2), False),
        ("numberOfNodes below low nodes", lambda h, a: setattr(a, "number_of_nodes", 1), True),
        ("no hot node", lambda h, a: h.metrics.update(hot=metric("hot", "7")), False),
        ("paused", lambda h, a: setattr(a, "paused", True), False),
        ("dry run", lambda h, a: setattr(a, "dry_run", True), False),
        (
            "expired metric on the hot node",
            lambda h, a: h.metrics.update(hot=metric("hot", "9", update="2023-11-14T22:00:00Z")),
            False,
        ),
        ("no metric on the hot node", lambda h, a: h.metrics.pop("hot"), False),
        (
            "namespace excluded",
            lambda h, a: setattr(a, "evictable_namespaces", Namespaces(include=["other"])),
            False,
        ),
        ("evictor refuses all", lambda h, a: h.evictor_impl.refuse.update({"p0", "p1", "p2"}), False),
        (
            "fits nowhere",
            lambda h, a: setattr(
                h, "fit", ListFit({(f"p{i}", n) for i in range(3) for n in ("cold1", "cold2")})
            ),
            False,
        ),
        (
            "nodeFit off: fit not asked",
            lambda h, a: (
                setattr(a, "node_fit", False),
                setattr(h, "fit", ListFit({(f"p{i}", n) for i in range(3) for n in ("cold1", "cold2")})),
            ),
            True,
        ),
        (
            "node selector excludes the hot node",
            lambda h, a: setattr(a, "node_selector", _sel({"role": "x"})),
            False,
        ),
        (
            "pod selector matches nothing",
            lambda h, a: setattr(a, "pod_selectors", [_podsel({"app": "none"})]),
            False,
        ),
    ],
)
def test_preconditions(case: str, mutate: Any, expect_evictions: bool) -> None:
    h = hot_cluster()
    a = args()
    mutate(h, a)
    pl, _ = rounds(h, a, 6)
    assert bool(h.evictor_impl.evicted) is expect_evictions, case
    if case == "dry run":
        assert [d.pod.metadata.name for d in pl.decisions] == ["p1"] and not pl.decisions[0].evicted


def _sel(labels: dict[str, str]) -> Any:
    from koordsched.api.core import LabelSelector

    return LabelSelector(match_labels=labels)


def _podsel(labels: dict[str, str]) -> Any:
    from koordsched.descheduler.plugins.lownodeload.args import PodSelector

    return PodSelector(name="s", selector=_sel(labels))


def test_an_unschedulable_node_is_never_a_destination() -> None:
    h = hot_cluster()
    h.nodes = [node("hot"), node("cold1", unschedulable=True), node("cold2", unschedulable=True)]
    rounds(h, args(), 6)
    assert h.evictor_impl.evicted == []


def test_all_nodes_low_means_nothing_to_do() -> None:
    h = hot_cluster()
    _, per_round = rounds(
        h, args(low_thresholds={"cpu": 95, "memory": 95}, high_thresholds={"cpu": 95, "memory": 95}), 7
    )
    assert sum(per_round) == 0


# --- node fit with thresholds -------------------------------------------------------------------


def test_a_pod_is_not_moved_where_it_would_push_the_target_over_its_high_threshold() -> None:
    h = hot_cluster(pods_usage=("7", "1", "1"))
    h.nodes = [node("hot"), node("cold1")]
    # cold1 at 10 %: the 7-core pod would make it 80 % > 75 %; the 1-core ones fit.
    h.metrics.pop("cold2")
    pl, _ = rounds(h, args(), 6)
    assert [n for n, _ in h.evictor_impl.evicted] == ["p2", "p1"]
    assert all(d.target == "cold1" for d in pl.decisions)


def test_a_pod_without_a_metric_is_not_moved_with_node_fit() -> None:
    h = hot_cluster(pods_usage=("3",))
    h.pods.append(pod("nometric", "hot", created="2024-02-01T00:00:00Z"))
    rounds(h, args(), 6)
    assert [n for n, _ in h.evictor_impl.evicted] == ["p0"]


def test_headroom_of_the_low_nodes_stops_evictions() -> None:
    # Two nodes at 100 %, one low node at 40 % (3.5 cores below its 75 % threshold), no node fit:
    # hot-a sheds two 2-core pods (the second takes the headroom below 0), hot-b none.
    pa = [pod(f"a{i}", "hot-a", created=f"2024-01-0{i + 1}T00:00:00Z") for i in range(3)]
    pb = [pod(f"b{i}", "hot-b", created=f"2024-01-0{i + 1}T00:00:00Z") for i in range(3)]
    h = FakeHandle(
        nodes=[node("hot-a"), node("hot-b"), node("cold")],
        pods=pa + pb,
        metrics={
            "hot-a": metric("hot-a", "10", pods=[(p, "2", "1Gi") for p in pa]),
            "hot-b": metric("hot-b", "9.9", pods=[(p, "2", "1Gi") for p in pb]),
            "cold": metric("cold", "4"),
        },
    )
    rounds(h, args(node_fit=False), 6)
    assert [n for n, _ in h.evictor_impl.evicted] == ["a2", "a1"]


# --- eviction order -----------------------------------------------------------------------------


def _p(name: str, **kw: Any) -> Pod:
    return pod(name, "hot", **kw)


def test_pod_order_cheapest_to_move_first() -> None:
    prod = _p("prod", priority=9500)
    batch = _p("batch", priority=5500)
    free = _p("free", priority=3500)
    none = _p("none", priority=100)
    low_prio_prod = _p("prod-low", priority=9100)
    costly = _p(
        "batch-costly", priority=5500, annotations={"controller.kubernetes.io/pod-deletion-cost": "10"}
    )
    new = _p("batch-new", priority=5500, created="2024-06-01T00:00:00Z")
    pods = [prod, batch, free, none, low_prio_prod, costly, new]
    order = [p.metadata.name for p in sort_pods(pods, {}, {}, {})]
    # "none" (priority 100, no class label) is prod by its QoS default (Burstable -> LS -> prod).
    assert order == ["free", "batch-new", "batch", "batch-costly", "none", "prod-low", "prod"]


def test_pod_order_by_usage_of_the_over_used_resources_only() -> None:
    a, b, c = _p("a"), _p("b"), _p("c")
    metrics = {
        ("default", "a"): {"cpu": 1000, "memory": 9 << 30},
        ("default", "b"): {"cpu": 3000, "memory": 1 << 30},
        ("default", "c"): {"cpu": 2000, "memory": 1 << 30},
    }
    order = [p.metadata.name for p in sort_pods([a, b, c], metrics, {"cpu": 1500}, {"cpu": 1})]
    # Scores: c 1 + 1500/2000 = 1.75, b 1 + 1500/3000 = 1.5, a 1000/1500 = 0.67; memory is not
    # over its threshold, so a's 9Gi does not count.
    assert order == ["c", "b", "a"]


# --- deviation thresholds, pools, prod ------------------------------------------------------------


def test_deviation_thresholds_are_around_the_mean() -> None:
    # Mean cpu (60 + 10 + 20) / 3 = 30 %; low = 30 - 10 = 20 %, high = 30 + 20 = 50 %.
    h = hot_cluster(hot_cpu="6", pods_usage=("2", "1"))
    h.metrics["cold2"] = metric("cold2", "2")
    a = args(use_deviation_thresholds=True, low_thresholds={"cpu": 10}, high_thresholds={"cpu": 20})
    pl, _ = rounds(h, a, 6)
    # 10 % over the 50 % threshold: p1 (1 core) just covers it.
    assert [n for n, _ in h.evictor_impl.evicted] == ["p1"]
    assert pl.decisions[0].reason == "node is overutilized, node cpu usage(60.00%)>threshold(20.00%)"


def test_node_pools_first_pool_that_selects_a_node() -> None:
    h = hot_cluster()
    h.nodes = [
        node("hot", labels={"pool": "a"}),
        node("cold1", labels={"pool": "a"}),
        node("cold2", labels={"pool": "b"}),
    ]
    # Pool a treats 90 % as fine; pool b never sees the hot node.
    a = args(
        low_thresholds={},
        high_thresholds={},
        node_pools=[
            NodePool(
                name="a",
                node_selector=_sel({"pool": "a"}),
                low_thresholds={"cpu": 45},
                high_thresholds={"cpu": 95},
            ),
            NodePool(name="all", low_thresholds={"cpu": 45}, high_thresholds={"cpu": 75}),
        ],
    )
    rounds(h, a, 6)
    assert h.evictor_impl.evicted == []
    a2 = args(
        low_thresholds={},
        high_thresholds={},
        node_pools=[
            NodePool(
                name="a",
                node_selector=_sel({"pool": "a"}),
                low_thresholds={"cpu": 45},
                high_thresholds={"cpu": 75},
            )
        ],
    )
    h2 = hot_cluster()
    h2.nodes = h.nodes
    pl, _ = rounds(h2, a2, 6)
    assert [d.pool for d in pl.decisions] == ["a"] and pl.decisions[0].target == "cold1"


def test_prod_thresholds_move_prod_pods_off_a_node_low_overall() -> None:
    # "mixed": 40 % overall (low for cpu 45 %) but its prod pods use 35 % > prod high 30 %.
    prod_a = pod("prod-a", "mixed", priority=9500)
    prod_b = pod("prod-b", "mixed", priority=9500)
    batch = pod("batch", "mixed", priority=5500)
    h = FakeHandle(
        nodes=[node("mixed"), node("idle"), node("busy")],
        pods=[prod_a, prod_b, batch],
        metrics={
            "mixed": metric(
                "mixed", "4", pods=[(prod_a, "2", "1Gi"), (prod_b, "1.5", "1Gi"), (batch, "0.5", "1Gi")]
            ),
            "idle": metric("idle", "1"),
            "busy": metric("busy", "6"),
        },
    )
    a = args(prod_low_thresholds={"cpu": 10}, prod_high_thresholds={"cpu": 30})
    pl, _ = rounds(h, a, 6)
    # 5 % over: prod-b (15 %) is closer to the excess than prod-a (20 %); batch is not prod.
    assert [n for n, _ in h.evictor_impl.evicted] == ["prod-b"]
    assert pl.decisions[0].reason == "node is overutilized, prod cpu usage(35.00%)>threshold(30.00%)"
    # Prod destinations: prod-low nodes first ("busy": 60 % overall, no prod), then both-low ones.
    assert pl.decisions[0].target == "busy"


def test_recording_evictor_refusal_is_not_a_decision() -> None:
    class Refusing(RecordingEvictor):
        def evict(self, pod: Pod, options: Any) -> bool:
            super().evict(pod, options)
            return False

    h = hot_cluster()
    h.evictor_impl = Refusing()
    pl, _ = rounds(h, args(), 6)
    assert pl.decisions == [] and len(h.evictor_impl.evicted) == 3
