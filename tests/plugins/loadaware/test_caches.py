"""What LoadAwareScheduling remembers between pods and cycles, and when it must not.

Nodes have 10 cpu (10000m) and 10Gi. A pod asking 1 cpu and 1Gi without labels is Burstable,
hence koord-prod, and is estimated at 850m cpu; labelled koord-batch it asks under the batch
names, which it does not request, so it is estimated at the defaults: 250m and 200Mi.
"""

from __future__ import annotations

import json

import msgspec
import pytest

from koordsched.api.resources import resource_list
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.types import PodInfo
from koordsched.plugins.loadaware.estimator import pod_priority_class
from koordsched.plugins.loadaware.kernels import over_threshold, usage_percent
from koordsched.plugins.loadaware.plugin import ERR_NODE_METRIC_EXPIRED, NAME
from koordsched.plugins.loadaware.thresholds import ANNOTATION_USAGE_THRESHOLDS
from tests.plugins.loadaware.helpers import BATCH, MI, NOW, Cluster, make_metric, make_node, make_pod

CPU_OVER = "node(s) cpu usage exceed threshold"
REQUESTS = {"cpu": "1", "memory": "1Gi"}


def updated(old: PodInfo, labels: dict[str, str]) -> PodInfo:
    """A new object for the pod, as the scheduler builds it for an update that keeps the resources:
    a new PodInfo sharing the old one's ``extra`` (see ``Scheduler.on_pod_update``)."""
    pod = msgspec.structs.replace(old.pod, metadata=msgspec.structs.replace(old.pod.metadata, labels=labels))
    info = PodInfo(pod, old.requests, old.priority)
    info.extra = old.extra
    return info


# --- no NodeMetric anywhere -----------------------------------------------------------------------


def test_without_metrics_filter_passes_and_score_is_skipped() -> None:
    c = Cluster()
    c.add_node("n1")
    c.add_node("n2")
    state = CycleState()
    codes = c.plugin.filter_batch(state, make_pod("p", REQUESTS), c.rows())
    assert codes.tolist() == [0, 0]
    assert NAME in state.skip_score
    assert c.scores(make_pod("q", REQUESTS)) == {"n1": 0, "n2": 0}


def test_first_metric_after_cycles_without_any() -> None:
    """Rows were never built while no node had a metric: the first metric builds them all."""
    c = Cluster()
    c.add_node("n1")
    assert c.filter(make_pod("p", REQUESTS)) == {"n1": None}
    c.add_node("n2")
    c.set_metric(make_metric("n2", cpu="9", memory="1Gi"))
    state = CycleState()
    codes = c.plugin.filter_batch(state, make_pod("q", REQUESTS), c.rows())
    assert NAME not in state.skip_score
    assert c.plugin.explain(state, make_pod("q"), int(codes[1])).message() == CPU_OVER
    assert codes[0] == 0
    # n1 has no metric: 0. n2: cpu (10000 - 9850) * 100 / 10000 = 1, memory
    # (10Gi - 1Gi - 751619277) * 100 / 10Gi = 82: (1 + 82) / 2 = 41.
    assert c.scores(make_pod("r", REQUESTS)) == {"n1": 0, "n2": 41}


def test_metrics_removed_rows_are_cleared_then_skipped() -> None:
    c = Cluster()
    c.add_node("n1")
    c.set_metric(make_metric("n1", cpu="9", memory="1Gi"))
    assert c.filter(make_pod("p", REQUESTS)) == {"n1": CPU_OVER}
    c.set_metric(None, "n1")
    # The first cycle after the removal rebuilds the row (no metric: passes) ...
    state = CycleState()
    assert c.plugin.filter_batch(state, make_pod("q", REQUESTS), c.rows()).tolist() == [0]
    assert NAME not in state.skip_score
    # ... later ones need not look at any row.
    state = CycleState()
    assert c.plugin.filter_batch(state, make_pod("r", REQUESTS), c.rows()).tolist() == [0]
    assert NAME in state.skip_score


def test_daemonset_pods_skip_nothing() -> None:
    c = Cluster()
    c.add_node("n1")
    state = CycleState()
    ds = make_pod("ds", REQUESTS, owner_kind="DaemonSet")
    assert c.plugin.filter_batch(state, ds, c.rows()).tolist() == [0]
    assert NAME not in state.skip_score


# --- the pod's side -------------------------------------------------------------------------------


def test_priority_class_and_estimate_follow_a_label_change() -> None:
    """n1 uses 6 cpu: the prod pod (850m) makes 68.5 % -> 69 > 65 and is refused; the same pod
    relabelled koord-batch (250m) makes 62.5 % -> 63 and passes, although the new PodInfo shares
    the old one's cache."""
    c = Cluster()
    c.add_node("n1")
    c.set_metric(make_metric("n1", cpu="6"))
    prod = make_pod("p", REQUESTS)
    assert c.filter(prod) == {"n1": CPU_OVER}
    assert c.plugin.estimate(prod) == {"cpu": 850, "memory": 751619277}
    batch = updated(prod, BATCH)
    assert batch.extra is prod.extra
    assert pod_priority_class(batch) == "koord-batch"
    assert c.plugin.estimate(batch) == {"cpu": 250, "memory": 200 * MI}
    assert c.filter(batch) == {"n1": None}
    # And back: the first object is still answered as prod.
    assert c.filter(prod) == {"n1": CPU_OVER}


def test_estimates_are_shared_only_by_equal_resources_and_class() -> None:
    c = Cluster()
    assert c.plugin.estimate(make_pod("a", {"cpu": "1"})) == {"cpu": 850, "memory": 200 * MI}
    assert c.plugin.estimate(make_pod("b", {"cpu": "2"})) == {"cpu": 1700, "memory": 200 * MI}
    assert c.plugin.estimate(make_pod("c", {"cpu": "1"}, limits={"cpu": "3"})) == {
        "cpu": 2550,
        "memory": 200 * MI,
    }
    assert c.plugin.estimate(make_pod("d", {"cpu": "1"}, labels=BATCH)) == {"cpu": 250, "memory": 200 * MI}
    assert c.plugin.estimate(make_pod("e", {"cpu": "1"})) == {"cpu": 850, "memory": 200 * MI}


def test_pod_vector_follows_new_columns() -> None:
    """A node annotation brings a threshold on a new resource: the pod's vector, remembered with two
    columns, gets the third. n2 offers 100 ephemeral-storage and uses 90: 90 % > 50."""
    c = Cluster()
    c.add_node("n1")
    c.set_metric(make_metric("n1", cpu="1"))
    pod = make_pod("p", REQUESTS)
    assert c.filter(pod) == {"n1": None}
    annotation = json.dumps({"usageThresholds": {"cpu": 65, "ephemeral-storage": 50}})
    node = make_node("n2", annotations={ANNOTATION_USAGE_THRESHOLDS: annotation})
    alloc = {"cpu": "10", "memory": "10Gi", "ephemeral-storage": "100", "pods": "110"}
    c.snap.add_node(node, resource_list(alloc))
    c.set_metric(make_metric("n2", raw_node_usage={"resources": {"cpu": "1", "ephemeral-storage": "90"}}))
    assert c.filter(pod) == {"n1": None, "n2": "node(s) ephemeral-storage usage exceed threshold"}
    assert c.plugin.rows.names == ["cpu", "memory", "ephemeral-storage"]


# --- the node's side ------------------------------------------------------------------------------


@pytest.mark.parametrize("same_object", [False, True])
def test_row_follows_the_nodes_allocatable(same_object: bool) -> None:
    """n1 uses 6 cpu of 10: 68.5 % for the prod pod, refused. Given 20 cpu (a new Node object, or
    the same one with another allocatable) it is 34.25 % -> 34: passes."""
    c = Cluster()
    c.add_node("n1")
    c.set_metric(make_metric("n1", cpu="6"))
    assert c.filter(make_pod("p", REQUESTS)) == {"n1": CPU_OVER}
    node = c.snap.by_name["n1"].node if same_object else make_node("n1", cpu="20")
    c.snap.update_node(node, resource_list({"cpu": "20", "memory": "10Gi", "pods": "110"}))
    assert c.filter(make_pod("q", REQUESTS)) == {"n1": None}


def test_row_rebuilt_for_a_placed_pod_keeps_its_totals() -> None:
    """A pod placed on n1 (6 cpu used) is estimated on top: 6000 + 850 (placed) + 850 = 7700 -> 77 %
    over 65; with 20 cpu after an update, 7700 / 20000 -> 39 %: passes."""
    c = Cluster()
    c.add_node("n1")
    c.set_metric(make_metric("n1", cpu="6", memory="1Gi"))
    c.place(make_pod("placed", REQUESTS, node="n1"), "n1")
    rows = c.plugin.rows
    assert c.filter(make_pod("p", REQUESTS)) == {"n1": CPU_OVER}
    assert rows.filter_base[0].tolist()[:1] == [6850]
    assert rows.total[0].tolist()[:2] == [10000, 10 * 1024 * MI]
    c.snap.update_node(
        make_node("n1", cpu="20"), resource_list({"cpu": "20", "memory": "10Gi", "pods": "110"})
    )
    assert c.filter(make_pod("q", REQUESTS)) == {"n1": None}
    assert rows.total[0].tolist()[:1] == [20000]


# --- the kernel's threshold test --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("used", "total", "threshold", "over"),
    [
        (6500, 10000, 65, False),  # 65.0 -> 65
        (6549, 10000, 65, False),  # 65.49 -> 65
        (6550, 10000, 65, True),  # 65.5 -> 66 (halves away from zero)
        (6551, 10000, 65, True),
        (1, 3, 33, False),  # 33.33 -> 33
        (2, 3, 66, True),  # 66.67 -> 67
        (1, 200, 0, True),  # 0.5 -> 1
        (0, 10, 0, False),
        (-25, 10, -3, False),  # -250 is not over -3
        (5, 10, -1, True),  # 50 > -1
        (10**18, 1, 1 << 60, True),  # past int64: over any threshold
        (5, 10, 1 << 60, False),
    ],
)
def test_over_threshold_is_rounded_usage_above_threshold(
    used: int, total: int, threshold: int, over: bool
) -> None:
    assert over_threshold(used, total, threshold) is over
    assert (usage_percent(used, total) > threshold) is over


# --- results remembered per row -------------------------------------------------------------------
# n1 uses 1 cpu and 1Gi; the pod is estimated at 850m and 751619277: cpu (10000 - 1850) * 100 / 10000
# = 81, memory (10Gi - 1Gi - 751619277) * 100 / 10Gi = 82, score (81 + 82) / 2 = 81.
# Each pod is new but of one signature, so from the second on results come from the row memo.


def test_remembered_results_expire_with_the_metric() -> None:
    """The default expiration is 180 s; the metric is 100 s old at first."""
    c = Cluster()
    c.add_node("n1")
    c.set_metric(make_metric("n1", age=100, cpu="1", memory="1Gi"))
    for i in range(3):
        assert c.filter(make_pod(f"p{i}", REQUESTS)) == {"n1": None}
        assert c.scores(make_pod(f"s{i}", REQUESTS)) == {"n1": 81}
    c.clock.t = NOW + 79.9  # 179.9 s old: still fresh
    assert c.filter(make_pod("p3", REQUESTS)) == {"n1": None}
    assert c.scores(make_pod("s3", REQUESTS)) == {"n1": 81}
    c.clock.t = NOW + 80  # 180 s old: expired
    assert c.filter(make_pod("p4", REQUESTS)) == {"n1": ERR_NODE_METRIC_EXPIRED}
    assert c.scores(make_pod("s4", REQUESTS)) == {"n1": 0}
    # A wall clock set back makes the metric fresh again.
    c.clock.t = NOW
    assert c.filter(make_pod("p5", REQUESTS)) == {"n1": None}
    assert c.scores(make_pod("s5", REQUESTS)) == {"n1": 81}


def test_remembered_results_expire_for_a_metric_reported_later() -> None:
    """n2's metric is replaced after results were remembered, by one expiring before anything
    known then (reported 150 s before NOW, so 30 s on): that expiry counts too."""
    c = Cluster()
    c.add_node("n1")
    c.add_node("n2")
    c.set_metric(make_metric("n1", age=10, cpu="1", memory="1Gi"))
    c.set_metric(make_metric("n2", age=10, cpu="1", memory="1Gi"))
    for i in range(3):
        assert c.scores(make_pod(f"s{i}", REQUESTS)) == {"n1": 81, "n2": 81}
    c.clock.t = NOW + 20
    c.set_metric(make_metric("n2", age=150, cpu="1", memory="1Gi"))
    for i in range(3):
        assert c.scores(make_pod(f"t{i}", REQUESTS)) == {"n1": 81, "n2": 81}
    c.clock.t = NOW + 29.9
    assert c.scores(make_pod("u", REQUESTS)) == {"n1": 81, "n2": 81}
    c.clock.t = NOW + 30  # n2 expires
    assert c.scores(make_pod("v", REQUESTS)) == {"n1": 81, "n2": 0}
    c.clock.t = NOW + 170  # n1 expires
    assert c.scores(make_pod("w", REQUESTS)) == {"n1": 0, "n2": 0}


def test_remembered_codes_follow_placed_pods() -> None:
    """n1 uses 4.5 cpu: 850 + 4500 = 53.5 % passes; every pod placed adds 850 (it is newer than the
    metric): 62 % after one, 70.5 % -> 71 after two, over 65."""
    c = Cluster()
    c.add_node("n1")
    c.set_metric(make_metric("n1", cpu="4500m"))
    for i in range(3):
        assert c.filter(make_pod(f"p{i}", REQUESTS)) == {"n1": None}
    c.place(make_pod("a", REQUESTS, node="n1"), "n1")
    assert c.filter(make_pod("q", REQUESTS)) == {"n1": None}
    c.place(make_pod("b", REQUESTS, node="n1"), "n1")
    assert c.filter(make_pod("r", REQUESTS)) == {"n1": CPU_OVER}
