"""PodTopologySpread Filter: upstream's TestSingleConstraint / TestMultipleConstraints tables.

Every node's verdict as upstream's plugin gives it when called alone (NodeAffinity and
TaintToleration do not run here, so nodes they would reject can still pass), plus the exact
reasons and codes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from koordsched.api.core import Node, Pod
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import Code
from koordsched.plugins.podtopologyspread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
)
from tests.plugins.podtopologyspread.helpers import (
    BAR,
    FOO,
    TAINT,
    cluster,
    filter_codes,
    filter_statuses,
    info,
    labelled,
    node,
    plugin,
    pod,
    spread,
)

OK = Code.SUCCESS
NO = Code.UNSCHEDULABLE
UAU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE

FOO_POD = labelled("foo")


def four_nodes_two_zones() -> list[Node]:
    return [
        node("node-a", zone="zone1", node="node-a"),
        node("node-b", zone="zone1", node="node-b"),
        node("node-x", zone="zone2", node="node-x"),
        node("node-y", zone="zone2", node="node-y"),
    ]


def existing(*placements: tuple[str, str], labels: dict[str, str] | None = None, **kw: object) -> list[Pod]:
    """Bound pods ``(name, node)`` with ``labels`` (foo by default)."""
    return [pod(n, labels=FOO_POD if labels is None else labels, node_name=at, **kw) for n, at in placements]  # type: ignore[arg-type]


SPREAD_2103 = existing(
    ("p-a1", "node-a"),
    ("p-a2", "node-a"),
    ("p-b1", "node-b"),
    ("p-y1", "node-y"),
    ("p-y2", "node-y"),
    ("p-y3", "node-y"),
)


@dataclass
class Case:
    name: str
    pod: Pod
    nodes: list[Node]
    want: dict[str, Code]
    pods: list[Pod] = field(default_factory=list)


CASES = [
    Case(
        "no existing pods",
        pod("p", spread(1, "zone", selector=FOO), labels=FOO_POD),
        four_nodes_two_zones(),
        {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
    ),
    Case(
        "no existing pods, incoming pod doesn't match itself",
        pod("p", spread(1, "zone", selector=BAR), labels=FOO_POD),
        four_nodes_two_zones(),
        {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
    ),
    Case(
        "existing pods in a different namespace do not count",
        pod("p", spread(1, "zone", selector=FOO), labels=FOO_POD),
        four_nodes_two_zones(),
        {"node-a": OK, "node-b": OK, "node-x": NO, "node-y": NO},
        [
            pod("p-a1", labels=FOO_POD, namespace="ns1", node_name="node-a"),
            pod("p-b1", labels=FOO_POD, namespace="ns2", node_name="node-a"),
            *existing(("p-x1", "node-x"), ("p-y1", "node-y")),
        ],
    ),
    Case(
        "existing pods do not match null selector",
        pod("p", spread(1, "zone"), labels=FOO_POD),
        four_nodes_two_zones(),
        {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
        existing(("p-x1", "node-x"), ("p-y1", "node-y")),
    ),
    Case(
        "pods spread across zones as 3/3, all nodes fit",
        pod("p", spread(1, "zone", selector=FOO), labels=FOO_POD),
        four_nodes_two_zones(),
        {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
        existing(
            ("p-a1", "node-a"),
            ("p-a2", "node-a"),
            ("p-b1", "node-b"),
            ("p-y1", "node-y"),
            ("p-y2", "node-y"),
            ("p-y3", "node-y"),
        ),
    ),
    Case(
        "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
        pod("p", spread(1, "zone", selector=FOO), labels=FOO_POD),
        [
            node("node-a", zone="zone1", node="node-a"),
            node("node-b", zon="zone1", node="node-b"),
            node("node-x", zone="zone2", node="node-x"),
            node("node-y", zone="zone2", node="node-y"),
        ],
        {"node-a": OK, "node-b": UAU, "node-x": NO, "node-y": NO},
        existing(("p-a1", "node-a"), ("p-b1", "node-b"), ("p-x1", "node-x"), ("p-y1", "node-y")),
    ),
    Case(
        "pod cannot be scheduled as all nodes don't have label 'rack'",
        pod("p", spread(1, "rack", selector=FOO), labels=FOO_POD),
        [node("node-a", zone="zone1", node="node-a"), node("node-x", zone="zone2", node="node-x")],
        {"node-a": UAU, "node-x": UAU},
    ),
    Case(
        "pods spread across nodes as 2/1/0/3, only node-x fits",
        pod("p", spread(1, "node", selector=FOO), labels=FOO_POD),
        four_nodes_two_zones(),
        {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO},
        SPREAD_2103,
    ),
    Case(
        "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
        pod("p", spread(2, "node", selector=FOO), labels=FOO_POD),
        four_nodes_two_zones(),
        {"node-a": NO, "node-b": OK, "node-x": OK, "node-y": NO},
        SPREAD_2103,
    ),
    Case(
        "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
        pod("p", spread(1, "node", selector=FOO), labels=labelled("bar")),
        four_nodes_two_zones(),
        {"node-a": NO, "node-b": OK, "node-x": OK, "node-y": NO},
        SPREAD_2103,
    ),
    Case(
        "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
        pod(
            "p",
            spread(1, "node", selector=FOO),
            labels=FOO_POD,
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "node", "operator": "In", "values": ["node-a", "node-y"]}
                                ]
                            }
                        ]
                    }
                }
            },
        ),
        four_nodes_two_zones(),
        {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": NO},
        SPREAD_2103,
    ),
    Case(
        "terminating Pods should be excluded",
        pod("p", spread(1, "node", selector=FOO), labels=FOO_POD),
        [node("node-a", node="node-a"), node("node-b", node="node-b")],
        {"node-a": OK, "node-b": NO},
        [*existing(("p-a", "node-a"), terminating=True), *existing(("p-b", "node-b"))],
    ),
    Case(
        "incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
        pod(
            "p",
            spread(1, "zone", selector=FOO),
            labels=FOO_POD,
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "node", "operator": "NotIn", "values": ["node-b"]}]}
                        ]
                    }
                }
            },
        ),
        four_nodes_two_zones(),
        {"node-a": OK, "node-b": OK, "node-x": NO, "node-y": NO},
        existing(("p-b1", "node-b"), ("p-b2", "node-b"), ("p-y1", "node-y")),
    ),
    Case(
        "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains, "
        "then the third node fits",
        pod("p", spread(2, "node", selector=FOO, min_domains=4), labels=FOO_POD),
        [node("node-a", node="node-a"), node("node-b", node="node-b"), node("node-c", node="node-c")],
        {"node-a": NO, "node-b": NO, "node-c": OK},
        existing(
            ("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b"), ("p-b2", "node-b"), ("p-c1", "node-c")
        ),
    ),
    Case(
        "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains, "
        "then the all nodes fit",
        pod("p", spread(2, "node", selector=FOO, min_domains=2), labels=FOO_POD),
        [node("node-a", node="node-a"), node("node-b", node="node-b"), node("node-c", node="node-c")],
        {"node-a": OK, "node-b": OK, "node-c": OK},
        existing(
            ("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b"), ("p-b2", "node-b"), ("p-c1", "node-c")
        ),
    ),
    Case(
        "pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, "
        "then the third and fourth nodes fit",
        pod("p", spread(2, "zone", selector=FOO, min_domains=3), labels=FOO_POD),
        four_nodes_two_zones(),
        {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": OK},
        existing(("p-b1", "node-a"), ("p-b2", "node-b"), ("p-y1", "node-y")),
    ),
    Case(
        "pods spread across zone as 2/1, maxSkew is 2 and the number of domains > minDomains, "
        "then the all nodes fit",
        pod("p", spread(2, "zone", selector=FOO, min_domains=1), labels=FOO_POD),
        four_nodes_two_zones(),
        {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
        existing(("p-b1", "node-a"), ("p-b2", "node-b"), ("p-y1", "node-y")),
    ),
    Case(
        "NodeAffinityPolicy honored with labelSelectors",
        pod("p", spread(1, "node", selector=FOO), labels=FOO_POD, nodeSelector={"foo": ""}),
        [
            node("node-a", node="node-a", foo=""),
            node("node-b", node="node-b", foo=""),
            node("node-x", node="node-x", foo=""),
            node("node-y", node="node-y"),
        ],
        {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": OK},
        existing(("p-b1", "node-a"), ("p-b2", "node-b"), ("p-y1", "node-y")),
    ),
    Case(
        "NodeAffinityPolicy ignored with labelSelectors",
        pod(
            "p",
            spread(1, "node", selector=FOO, affinity_policy="Ignore"),
            labels=FOO_POD,
            nodeSelector={"foo": ""},
        ),
        [
            node("node-a", node="node-a", foo=""),
            node("node-b", node="node-b", foo=""),
            node("node-x", node="node-x", foo=""),
            node("node-y", node="node-y"),
        ],
        {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO},
        existing(("p-b1", "node-a"), ("p-b2", "node-b"), ("p-y1", "node-y")),
    ),
    Case(
        "NodeAffinityPolicy honored with nodeAffinity",
        pod(
            "p",
            spread(1, "node", selector=FOO),
            labels=FOO_POD,
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "foo", "operator": "In", "values": [""]}]}
                        ]
                    }
                }
            },
        ),
        [
            node("node-a", node="node-a", foo=""),
            node("node-b", node="node-b", foo=""),
            node("node-x", node="node-x", foo=""),
            node("node-y", node="node-y"),
        ],
        {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": OK},
        existing(("p-b1", "node-a"), ("p-b2", "node-b"), ("p-y1", "node-y")),
    ),
    Case(
        "NodeTaintsPolicy honored",
        pod("p", spread(1, "node", selector=FOO, taints_policy="Honor"), labels=FOO_POD),
        [
            node("node-a", node="node-a", foo=""),
            node("node-b", node="node-b", foo=""),
            node("node-x", node="node-x", foo=""),
            node("node-y", taints=[TAINT], node="node-y"),
        ],
        {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": OK},
        existing(("p-b1", "node-a"), ("p-b2", "node-b"), ("p-y1", "node-y")),
    ),
    Case(
        "NodeTaintsPolicy honored, the pod tolerates the taint",
        pod(
            "p",
            spread(1, "node", selector=FOO, taints_policy="Honor"),
            labels=FOO_POD,
            tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        ),
        [
            node("node-a", node="node-a", foo=""),
            node("node-b", node="node-b", foo=""),
            node("node-x", node="node-x", foo=""),
            node("node-y", taints=[TAINT], node="node-y"),
        ],
        {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO},
        existing(("p-b1", "node-a"), ("p-b2", "node-b"), ("p-y1", "node-y")),
    ),
    Case(
        "NodeTaintsPolicy ignored",
        pod("p", spread(1, "node", selector=FOO), labels=FOO_POD),
        [
            node("node-a", node="node-a", foo=""),
            node("node-b", node="node-b", foo=""),
            node("node-x", node="node-x", foo=""),
            node("node-y", taints=[TAINT], node="node-y"),
        ],
        {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO},
        existing(("p-b1", "node-a"), ("p-b2", "node-b"), ("p-y1", "node-y")),
    ),
    # --- TestMultipleConstraints ---
    Case(
        # zone: 3/3 -> every zone passes; node: 2/1/0/3 -> node-x only.
        "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
        pod("p", spread(1, "zone", selector=FOO), spread(1, "node", selector=FOO), labels=FOO_POD),
        four_nodes_two_zones(),
        {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO},
        SPREAD_2103,
    ),
    Case(
        # zone: 4/2 -> zone2 only; node: 2/2/1/1 -> node-x and node-y; together node-x and node-y.
        "two Constraints on zone and node, spreads = [4/2, 2/2/1/1]",
        pod("p", spread(1, "zone", selector=FOO), spread(1, "node", selector=FOO), labels=FOO_POD),
        four_nodes_two_zones(),
        {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": OK},
        existing(
            ("p-a1", "node-a"),
            ("p-a2", "node-a"),
            ("p-b1", "node-b"),
            ("p-b2", "node-b"),
            ("p-x1", "node-x"),
            ("p-y1", "node-y"),
        ),
    ),
    Case(
        # Different selectors: zone counts foo (1/2: zone1 only), node counts bar (0/1/0/1: a, x).
        "two Constraints on zone and node, with different labelSelectors",
        pod(
            "p",
            spread(1, "zone", selector=FOO),
            spread(1, "node", selector=BAR),
            labels=labelled("foo", "bar"),
        ),
        four_nodes_two_zones(),
        {"node-a": OK, "node-b": NO, "node-x": NO, "node-y": NO},
        [
            pod("p-a1", labels=labelled("foo"), node_name="node-a"),
            pod("p-b1", labels=labelled("bar"), node_name="node-b"),
            pod("p-y1", labels=labelled("foo"), node_name="node-y"),
            pod("p-y2", labels=labelled("foo", "bar"), node_name="node-y"),
        ],
    ),
    Case(
        # node-x lacks "zone" (UAU, checked first); node-b lacks "node" (UAU from the second one).
        "two Constraints on zone and node, one node lacks each key",
        pod("p", spread(1, "zone", selector=FOO), spread(1, "node", selector=FOO), labels=FOO_POD),
        [
            node("node-a", zone="zone1", node="node-a"),
            node("node-b", zone="zone1"),
            node("node-x", node="node-x"),
            node("node-y", zone="zone2", node="node-y"),
        ],
        {"node-a": OK, "node-b": UAU, "node-x": UAU, "node-y": OK},
    ),
    Case(
        # node-c is in zone1 (2 pods against 0: skew 3) and lacks "node": the zone constraint
        # comes first, so Unschedulable, not the missing label's UnschedulableAndUnresolvable.
        "the first failing constraint decides the code",
        pod("p", spread(1, "zone", selector=FOO), spread(1, "node", selector=FOO), labels=FOO_POD),
        [
            node("node-a", zone="zone1", node="node-a"),
            node("node-b", zone="zone2", node="node-b"),
            node("node-c", zone="zone1"),
        ],
        {"node-a": NO, "node-b": OK, "node-c": NO},
        existing(("p-a1", "node-a"), ("p-a2", "node-a")),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_filter(case: Case) -> None:
    h = cluster(case.nodes, case.pods)
    assert filter_codes(plugin(h), h, case.pod) == case.want


def test_reasons_are_upstreams() -> None:
    h = cluster(
        [node("node-a", zone="zone1"), node("node-b", zon="zone1"), node("node-x", zone="zone2")],
        existing(("p-a1", "node-a")),
    )
    got = filter_statuses(plugin(h), h, pod("p", spread(1, "zone", selector=FOO), labels=FOO_POD))
    assert got["node-x"].ok
    assert (got["node-a"].code, got["node-a"].reasons) == (NO, (ERR_REASON_CONSTRAINTS_NOT_MATCH,))
    assert (got["node-b"].code, got["node-b"].reasons) == (UAU, (ERR_REASON_NODE_LABEL_NOT_MATCH,))
    assert ERR_REASON_CONSTRAINTS_NOT_MATCH == "node(s) didn't match pod topology spread constraints"
    assert ERR_REASON_NODE_LABEL_NOT_MATCH == (
        "node(s) didn't match pod topology spread constraints (missing required label)"
    )


def test_pod_without_hard_constraints_skips_the_filter() -> None:
    h = cluster(four_nodes_two_zones())
    pl = plugin(h)
    for p in (pod("p"), pod("q", spread(1, "zone", "ScheduleAnyway", selector=FOO))):
        _, status = pl.pre_filter(CycleState(), info(p))
        assert status.code is Code.SKIP


def test_match_label_keys_narrow_the_selector() -> None:
    """Only pods with the incoming pod's value of each matchLabelKeys key count."""
    h = cluster(
        four_nodes_two_zones(),
        [
            pod("old-1", labels={"app": "web", "rev": "1"}, node_name="node-a"),
            pod("old-2", labels={"app": "web", "rev": "1"}, node_name="node-b"),
            pod("new-1", labels={"app": "web", "rev": "2"}, node_name="node-x"),
        ],
    )
    web = {"matchLabels": {"app": "web"}}
    incoming = {"app": "web", "rev": "2"}
    without = pod("p", spread(1, "zone", selector=web), labels=incoming)
    with_keys = pod("q", spread(1, "zone", selector=web, match_label_keys=["rev"]), labels=incoming)
    pl = plugin(h)
    # All web pods: zone1 2, zone2 1 -> zone1 would be 3 - 1 > 1.
    assert filter_codes(pl, h, without) == {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": OK}
    # Only rev 2: zone1 0, zone2 1 -> zone2 would be 2 - 0 > 1.
    assert filter_codes(pl, h, with_keys) == {"node-a": OK, "node-b": OK, "node-x": NO, "node-y": NO}
    # A key the pod lacks adds nothing.
    absent = pod("r", spread(1, "zone", selector=web, match_label_keys=["track"]), labels=incoming)
    assert filter_codes(pl, h, absent) == filter_codes(pl, h, without)
