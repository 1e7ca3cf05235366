"""PodTopologySpread PreScore/Score/NormalizeScore: upstream's TestPodTopologySpreadScore table.

Scores are the normalized ones upstream's test compares, for the candidate nodes (the ones
that passed the filters); the other nodes of the cluster still hold pods that count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from koordsched.api.core import Node, Pod
from koordsched.api.kinds import SERVICES
from tests.plugins.podtopologyspread.helpers import (
    BAR,
    FOO,
    HOSTNAME,
    TAINT,
    cluster,
    labelled,
    node,
    plugin,
    pod,
    scores,
    spread,
)

FOO_POD = labelled("foo")
ANYWAY = "ScheduleAnyway"


def on(node_name: str, *names: str, labels: dict[str, str] | None = None, **kw: object) -> list[Pod]:
    return [pod(n, labels=FOO_POD if labels is None else labels, node_name=node_name, **kw) for n in names]  # type: ignore[arg-type]


def hosts(*names: str) -> list[Node]:
    return [node(n, **{HOSTNAME: n}) for n in names]


def zoned(*pairs: tuple[str, str]) -> list[Node]:
    return [node(n, zone=z, **{HOSTNAME: n}) for n, z in pairs]


@dataclass
class Case:
    name: str
    pod: Pod
    nodes: list[Node]
    want: dict[str, int]
    pods: list[Pod] = field(default_factory=list)
    failed: list[Node] = field(default_factory=list)
    services: list[dict[str, object]] = field(default_factory=list)


HOST_1 = spread(1, HOSTNAME, ANYWAY, FOO)
PODS_4321 = [
    *on("node-a", "a1", "a2", "a3", "a4"),
    *on("node-b", "b1", "b2", "b3"),
    *on("node-c", "c1", "c2"),
    *on("node-d", "d1"),
]
PODS_2103 = [*on("node-a", "a1", "a2"), *on("node-b", "b1"), *on("node-d", "d1", "d2", "d3")]
PODS_421_3 = [
    *on("node-a", "a1", "a2", "a3", "a4"),
    *on("node-b", "b1", "b2"),
    *on("node-x", "x1"),
    *on("node-y", "y1", "y2", "y3"),
]
MIXED = [
    *on("node-a", "a1"),
    *on("node-b", "b1", labels=labelled("foo", "bar")),
    *on("node-y", "y1"),
    *on("node-y", "y2", labels=labelled("bar")),
]
POLICY_NODES = [
    node("node-a", node="node-a", foo=""),
    node("node-b", node="node-b", foo=""),
    node("node-c", node="node-c"),
]
POLICY_PODS = [*on("node-a", "a1", "a2"), *on("node-b", "b1"), *on("node-c", "c1")]
FOO_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "foo", "operator": "In", "values": [""]}]}]
        }
    }
}

CASES = [
    Case(
        "one constraint on node, no existing pods",
        pod("p", HOST_1, labels=FOO_POD),
        hosts("node-a", "node-b"),
        {"node-a": 100, "node-b": 100},
    ),
    Case(
        "one constraint on node, only one node is candidate",
        pod("p", HOST_1, labels=FOO_POD),
        hosts("node-a"),
        {"node-a": 100},
        [*on("node-a", "a1", "a2"), *on("node-b", "b1")],
        hosts("node-b"),
    ),
    Case(
        "one constraint on node, all nodes have the same number of matching pods",
        pod("p", HOST_1, labels=FOO_POD),
        hosts("node-a", "node-b"),
        {"node-a": 100, "node-b": 100},
        [*on("node-a", "a1"), *on("node-b", "b1")],
    ),
    Case(
        "one constraint on node, all 4 nodes are candidates",
        pod("p", HOST_1, labels=FOO_POD),
        hosts("node-a", "node-b", "node-c", "node-d"),
        {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0},
        PODS_2103,
    ),
    Case(
        "one constraint on node, null selector",
        pod("p", spread(1, HOSTNAME, ANYWAY), labels=FOO_POD),
        hosts("node-a", "node-b", "node-c", "node-d"),
        {"node-a": 100, "node-b": 100, "node-c": 100, "node-d": 100},
        PODS_2103,
    ),
    Case(
        "one constraint on node, all 4 nodes are candidates, maxSkew=2",
        pod("p", spread(2, HOSTNAME, ANYWAY, FOO), labels=FOO_POD),
        hosts("node-a", "node-b", "node-c", "node-d"),
        {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16},
        PODS_2103,
    ),
    Case(
        "one constraint on node, all 4 nodes are candidates, maxSkew=3",
        pod("p", spread(3, HOSTNAME, ANYWAY, FOO), labels=FOO_POD),
        hosts("node-a", "node-b", "node-c", "node-d"),
        {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100},
        PODS_4321,
    ),
    Case(
        "system defaulting, nodes don't have zone, pods match service",
        pod("p", labels=FOO_POD),
        hosts("node-a", "node-b", "node-c", "node-d"),
        {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100},
        PODS_4321,
        services=[{"metadata": {"name": "svc", "namespace": "default"}, "spec": {"selector": {"foo": ""}}}],
    ),
    Case(
        "one constraint on node, 3 out of 4 nodes are candidates",
        pod("p", HOST_1, labels=FOO_POD),
        hosts("node-a", "node-b", "node-x"),
        {"node-a": 33, "node-b": 83, "node-x": 100},
        PODS_421_3,
        hosts("node-y"),
    ),
    Case(
        "one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
        pod("p", HOST_1, labels=FOO_POD),
        [
            node("node-a", **{HOSTNAME: "node-a"}),
            node("node-b", n="node-b"),
            node("node-x", **{HOSTNAME: "node-x"}),
        ],
        {"node-a": 16, "node-b": 0, "node-x": 100},
        PODS_421_3,
        hosts("node-y"),
    ),
    Case(
        "one constraint on zone, 3 out of 4 nodes are candidates",
        pod("p", spread(1, "zone", ANYWAY, FOO), labels=FOO_POD),
        zoned(("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2")),
        {"node-a": 75, "node-b": 75, "node-x": 100},
        PODS_421_3,
        zoned(("node-y", "zone2")),
    ),
    Case(
        "two Constraints on zone and node, 2 out of 4 nodes are candidates",
        pod("p", spread(1, "zone", ANYWAY, FOO), HOST_1, labels=FOO_POD),
        zoned(("node-a", "zone1"), ("node-x", "zone2")),
        {"node-a": 100, "node-x": 63},
        [
            *on("node-a", "a1", "a2"),
            *on("node-b", "b1"),
            *on("node-x", "x1", "x2"),
            *on("node-y", "y1", "y2", "y3", "y4"),
        ],
        zoned(("node-b", "zone1"), ("node-y", "zone2")),
    ),
    Case(
        "two Constraints on zone and node, with different labelSelectors",
        pod(
            "p",
            spread(1, "zone", ANYWAY, FOO),
            spread(1, HOSTNAME, ANYWAY, BAR),
            labels=labelled("foo", "bar"),
        ),
        zoned(("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2")),
        {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60},
        MIXED,
    ),
    Case(
        "two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
        pod(
            "p",
            spread(1, "zone", ANYWAY, FOO),
            spread(1, HOSTNAME, ANYWAY, BAR),
            labels=labelled("foo", "bar"),
        ),
        zoned(("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2")),
        {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0},
        [
            *on("node-b", "b1", labels=labelled("bar")),
            *on("node-x", "x1"),
            *on("node-y", "y1", labels=labelled("foo", "bar")),
        ],
    ),
    Case(
        "two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates",
        pod(
            "p",
            spread(1, "zone", ANYWAY, FOO),
            spread(1, HOSTNAME, ANYWAY, BAR),
            labels=labelled("foo", "bar"),
        ),
        zoned(("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2")),
        {"node-a": 50, "node-b": 25, "node-x": 100},
        MIXED,
        zoned(("node-y", "zone2")),
    ),
    Case(
        "existing pods in a different namespace do not count",
        pod("p", HOST_1, labels=FOO_POD),
        hosts("node-a", "node-b"),
        {"node-a": 100, "node-b": 33},
        [*on("node-a", "a1", namespace="ns1"), *on("node-a", "a2"), *on("node-b", "b1", "b2")],
    ),
    Case(
        "terminating Pods should be excluded",
        pod("p", HOST_1, labels=FOO_POD),
        hosts("node-a", "node-b"),
        {"node-a": 100, "node-b": 0},
        [*on("node-a", "a", terminating=True), *on("node-b", "b")],
    ),
    Case(
        "NodeAffinityPolicy honored with labelSelectors",
        pod("p", spread(1, "node", ANYWAY, FOO), labels=FOO_POD, nodeSelector={"foo": ""}),
        POLICY_NODES,
        {"node-a": 0, "node-b": 33, "node-c": 100},
        POLICY_PODS,
    ),
    Case(
        "NodeAffinityPolicy ignored with labelSelectors",
        pod(
            "p",
            spread(1, "node", ANYWAY, FOO, affinity_policy="Ignore"),
            labels=FOO_POD,
            nodeSelector={"foo": ""},
        ),
        POLICY_NODES,
        {"node-a": 66, "node-b": 100, "node-c": 100},
        POLICY_PODS,
    ),
    Case(
        "NodeAffinityPolicy honored with nodeAffinity",
        pod("p", spread(1, "node", ANYWAY, FOO), labels=FOO_POD, affinity=FOO_AFFINITY),
        POLICY_NODES,
        {"node-a": 0, "node-b": 33, "node-c": 100},
        POLICY_PODS,
    ),
    Case(
        "NodeAffinityPolicy ignored with nodeAffinity",
        pod(
            "p",
            spread(1, "node", ANYWAY, FOO, affinity_policy="Ignore"),
            labels=FOO_POD,
            affinity=FOO_AFFINITY,
        ),
        POLICY_NODES,
        {"node-a": 66, "node-b": 100, "node-c": 100},
        POLICY_PODS,
    ),
    Case(
        "NodeTaintsPolicy honored",
        pod("p", spread(1, "node", ANYWAY, FOO, taints_policy="Honor"), labels=FOO_POD),
        [
            node("node-a", node="node-a"),
            node("node-b", node="node-b"),
            node("node-c", taints=[TAINT], node="node-c"),
        ],
        {"node-a": 0, "node-b": 33, "node-c": 100},
        POLICY_PODS,
    ),
    Case(
        "NodeTaintsPolicy ignored",
        pod("p", spread(1, "node", ANYWAY, FOO), labels=FOO_POD),
        [
            node("node-a", node="node-a"),
            node("node-b", node="node-b"),
            node("node-c", taints=[TAINT], node="node-c"),
        ],
        {"node-a": 66, "node-b": 100, "node-c": 100},
        POLICY_PODS,
    ),
    Case(
        "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
        pod(
            "p",
            spread(1, "zone", ANYWAY, {}, match_label_keys=["foo"]),
            spread(1, HOSTNAME, ANYWAY, {}, match_label_keys=["bar"]),
            labels=labelled("foo", "bar"),
        ),
        zoned(("node-a", "zone1"), ("node-b", "zone1"), ("node-c", "zone2"), ("node-d", "zone2")),
        {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100},
        [
            *on("node-a", "a1"),
            *on("node-b", "b1", labels=labelled("foo", "bar")),
            *on("node-c", "y1"),
            *on("node-c", "y2", labels=labelled("bar")),
        ],
    ),
    Case(
        "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
        pod(
            "p",
            spread(1, "zone", ANYWAY, FOO),
            spread(1, HOSTNAME, ANYWAY, BAR, match_label_keys=["baz"]),
            labels=labelled("foo", "bar", "baz"),
        ),
        zoned(("node-a", "zone1"), ("node-b", "zone1"), ("node-c", "zone2"), ("node-d", "zone2")),
        {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100},
        [
            *on("node-a", "a1"),
            *on("node-b", "b1", labels=labelled("foo", "bar", "baz")),
            *on("node-c", "c1"),
            *on("node-c", "c2", labels=labelled("bar")),
            *on("node-c", "d3", labels=labelled("bar", "baz")),
        ],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_score(case: Case) -> None:
    h = cluster([*case.nodes, *case.failed], case.pods)
    for svc in case.services:
        h.put(SERVICES, svc)
    # Upstream's score table runs with the system defaults (only the Service case uses them).
    pl = plugin(h, {"defaultingType": "System"})
    assert scores(pl, h, case.pod, [n.metadata.name for n in case.nodes]) == case.want


def test_pre_score_skips_without_soft_constraints() -> None:
    h = cluster(hosts("node-a", "node-b"))
    pl = plugin(h, {"defaultingType": "System"})
    # No constraints, no Service, no controller: no default constraints either.
    assert scores(pl, h, pod("p", labels=FOO_POD), ["node-a", "node-b"]) is None
    # Hard constraints only.
    assert scores(pl, h, pod("q", spread(1, HOSTNAME, selector=FOO), labels=FOO_POD), ["node-a"]) is None
    # No candidates.
    assert scores(pl, h, pod("r", HOST_1, labels=FOO_POD), []) is None


def test_system_defaults_do_not_require_the_zone_key() -> None:
    """With the system defaults a node without a zone still scores by hostname (and counts in the
    empty zone for the weight); with the same constraints given as a List it is ignored and scores
    0, as upstream's requireAllTopologies."""
    zone = "topology.kubernetes.io/zone"
    nodes = [
        node("node-a", **{zone: "zone1", HOSTNAME: "node-a"}),
        node("node-b", **{zone: "zone1", HOSTNAME: "node-b"}),
        node("node-c", **{HOSTNAME: "node-c"}),
    ]
    pods = [*on("node-a", "a1", "a2"), *on("node-b", "b1"), *on("node-c", "c1", "c2", "c3")]
    svc = {"metadata": {"name": "svc", "namespace": "default"}, "spec": {"selector": {"foo": ""}}}
    listed = {
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 3, "topologyKey": HOSTNAME, "whenUnsatisfiable": ANYWAY},
            {"maxSkew": 5, "topologyKey": zone, "whenUnsatisfiable": ANYWAY},
        ],
    }
    candidates = ["node-a", "node-b", "node-c"]
    h = cluster(nodes, pods)
    h.put(SERVICES, svc)
    # System: hostname weight log(3+2); zone domains {zone1, ""} -> weight log(2+2), zone1 holds 3.
    # Raw: a = 2*log5+2 + 3*log4+4 = 13, b = log5+2 + 3*log4+4 = 12, c = 3*log5+2 = 7 (no zone term).
    system = scores(plugin(h, {"defaultingType": "System"}), h, pod("p", labels=FOO_POD), candidates)
    assert system == {"node-a": 53, "node-b": 61, "node-c": 100}
    # List: node-c lacks the zone key and is ignored; hostname weight log(2+2), zone weight log(1+2).
    # Raw: a = 2*log4+2 + 3*log3+4 = 12, b = log4+2 + 3*log3+4 = 11.
    listed_scores = scores(plugin(h, listed), h, pod("p", labels=FOO_POD), candidates)
    assert listed_scores == {"node-a": 91, "node-b": 100, "node-c": 0}
