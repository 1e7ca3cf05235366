"""InterPodAffinity's PreScore, Score and NormalizeScore against upstream's documented semantics.

Nodes: n1 and n2 in zone z1, n3 in zone z2, n4 without a zone label. Scores are normalized over
all four nodes: lowest raw score 0, highest 100, linear in between (truncated).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from koordsched.api.core import Pod
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import Code
from koordsched.plugins.interpodaffinity.scoring import normalize
from tests.plugins.interpodaffinity.helpers import (
    ZONE,
    affinity,
    anode,
    apod,
    cluster,
    info,
    plugin,
    raw_scores,
    scores,
    sel,
    set_namespace,
    term,
    weighted,
)

NODES = [anode("n1", **{ZONE: "z1"}), anode("n2", **{ZONE: "z1"}), anode("n3", **{ZONE: "z2"}), anode("n4")]
WEB = {"app": "web"}
DB = {"app": "db"}


def per_node(*values: int) -> dict[str, int]:
    return {f"n{i + 1}": v for i, v in enumerate(values)}


# (name, incoming pod, placed pods, plugin args, expected normalized scores or None for Skip)
CASES: list[tuple[str, Pod, list[tuple[str, Pod]], dict[str, Any], dict[str, int] | None]] = [
    ("nothing to score", apod(labels=WEB), [("n1", apod(labels=WEB))], {}, None),
    (
        "preferred affinity on hostname",
        apod(aff=affinity(preferred=[weighted(5, term(sel(**WEB)))])),
        [("n1", apod(labels=WEB))],
        {},
        per_node(100, 0, 0, 0),
    ),
    (
        "preferred affinity on zone",
        apod(aff=affinity(preferred=[weighted(5, term(sel(**WEB), ZONE))])),
        [("n1", apod(labels=WEB))],
        {},
        per_node(100, 100, 0, 0),
    ),
    (
        "preferred anti-affinity: negative, normalized from the lowest",
        apod(aff=affinity(preferred_anti=[weighted(5, term(sel(**WEB), ZONE))])),
        [("n1", apod(labels=WEB))],
        {},
        per_node(0, 0, 100, 100),
    ),
    (
        "affinity and anti-affinity together",
        apod(
            aff=affinity(
                preferred=[weighted(10, term(sel(**WEB)))],
                preferred_anti=[weighted(4, term(sel(**DB), ZONE))],
            )
        ),
        [("n1", apod(labels=WEB)), ("n3", apod(labels=DB))],
        {},
        per_node(100, 28, 0, 28),
    ),
    (
        "each matching pod adds the weight",
        apod(aff=affinity(preferred=[weighted(2, term(sel(**WEB), ZONE))])),
        [
            ("n1", apod(labels=WEB)),
            ("n1", apod(labels=WEB)),
            ("n2", apod(labels=WEB)),
            ("n3", apod(labels=WEB)),
        ],
        {},
        per_node(100, 100, 33, 0),
    ),
    (
        "a placed pod's preferred affinity for the pod",
        apod(labels=WEB),
        [("n3", apod(aff=affinity(preferred=[weighted(7, term(sel(**WEB), ZONE))])))],
        {},
        per_node(0, 0, 100, 0),
    ),
    (
        "a placed pod's preferred anti-affinity against the pod",
        apod(labels=WEB),
        [("n2", apod(aff=affinity(preferred_anti=[weighted(3, term(sel(**WEB)))])))],
        {},
        per_node(100, 0, 100, 100),
    ),
    (
        "a placed pod's required affinity weighs hardPodAffinityWeight",
        apod(labels=WEB),
        [("n1", apod(aff=affinity(required=[term(sel(**WEB))])))],
        {},
        per_node(100, 0, 0, 0),
    ),
    (
        "hardPodAffinityWeight 0 turns that off",
        apod(labels=WEB),
        [("n1", apod(aff=affinity(required=[term(sel(**WEB))])))],
        {"hardPodAffinityWeight": 0},
        None,
    ),
    (
        "a placed pod's required anti-affinity does not score",
        apod(labels=WEB),
        [("n1", apod(aff=affinity(anti=[term(sel(**WEB))])))],
        {},
        None,
    ),
    (
        "ignorePreferredTermsOfExistingPods: a pod without preferred terms is not scored",
        apod(labels=WEB),
        [("n3", apod(aff=affinity(preferred=[weighted(7, term(sel(**WEB), ZONE))])))],
        {"ignorePreferredTermsOfExistingPods": True},
        None,
    ),
    (
        "ignorePreferredTermsOfExistingPods: one with them is scored by both",
        apod(labels=WEB, aff=affinity(preferred=[weighted(1, term(sel(**DB)))])),
        [
            ("n3", apod(aff=affinity(preferred=[weighted(7, term(sel(**WEB), ZONE))]))),
            ("n1", apod(labels=DB)),
        ],
        {"ignorePreferredTermsOfExistingPods": True},
        per_node(14, 0, 100, 0),
    ),
    (
        "preferred terms matching nothing: Skip",
        apod(aff=affinity(preferred=[weighted(5, term(sel(**WEB)))])),
        [("n1", apod(labels=DB))],
        {},
        None,
    ),
    (
        "a match on a node without the key adds nothing",
        apod(aff=affinity(preferred=[weighted(5, term(sel(**WEB), ZONE))])),
        [("n4", apod(labels=WEB))],
        {},
        None,
    ),
    (
        "weights that cancel still score (all equal: 0)",
        apod(
            aff=affinity(
                preferred=[weighted(5, term(sel(**WEB)))], preferred_anti=[weighted(5, term(sel(**WEB)))]
            )
        ),
        [("n1", apod(labels=WEB))],
        {},
        per_node(0, 0, 0, 0),
    ),
    (
        "the pod's own namespace by default",
        apod(aff=affinity(preferred=[weighted(5, term(sel(**WEB)))])),
        [("n1", apod(labels=WEB, namespace="other")), ("n2", apod(labels=WEB))],
        {},
        per_node(0, 100, 0, 0),
    ),
    (
        "every namespace with an empty namespaceSelector",
        apod(aff=affinity(preferred=[weighted(5, term(sel(**WEB), ns_selector={}))])),
        [("n1", apod(labels=WEB, namespace="other")), ("n2", apod(labels=WEB))],
        {},
        per_node(100, 100, 0, 0),
    ),
]


@pytest.mark.parametrize(("name", "pod", "placed", "args", "expected"), CASES, ids=[c[0] for c in CASES])
def test_score_table(
    name: str, pod: Pod, placed: list[tuple[str, Pod]], args: dict[str, Any], expected: dict[str, int] | None
) -> None:
    snap, handle = cluster(NODES, placed)
    assert scores(plugin(handle, **args), pod, snap) == expected


def test_raw_scores_sum_weights() -> None:
    placed = [
        ("n1", apod(labels=WEB)),
        ("n3", apod(labels=DB, aff=affinity(required=[term(sel(**WEB), ZONE)]))),
        ("n3", apod(aff=affinity(preferred_anti=[weighted(4, term(sel(**WEB)))]))),
    ]
    snap, handle = cluster(NODES, placed)
    pod = apod(labels=WEB, aff=affinity(preferred=[weighted(10, term(sel(**WEB), ZONE))]))
    # n1, n2: +10 (web in z1); n3: +7 (hard weight 7, zone z2) - 4 (hostname n3).
    assert raw_scores(plugin(handle, hardPodAffinityWeight=7), pod, snap) == per_node(10, 10, 3, 0)


def test_placed_pods_namespace_selector_in_scoring() -> None:
    placed = [
        (
            "n2",
            apod(
                namespace="other",
                aff=affinity(preferred=[weighted(3, term(sel(**WEB), ns_selector=sel(team="a")))]),
            ),
        )
    ]
    snap, handle = cluster(NODES, placed)
    set_namespace(handle, "default", team="a")
    assert scores(plugin(handle), apod(labels=WEB), snap) == per_node(0, 100, 0, 0)
    set_namespace(handle, "default", team="b")
    assert scores(plugin(handle), apod(labels=WEB), snap) is None


def test_incoming_namespace_selector_in_scoring() -> None:
    placed = [("n1", apod(labels=WEB, namespace="a1")), ("n3", apod(labels=WEB, namespace="b1"))]
    snap, handle = cluster(NODES, placed)
    set_namespace(handle, "a1", team="a")
    set_namespace(handle, "b1", team="b")
    pod = apod(aff=affinity(preferred=[weighted(5, term(sel(**WEB), ns_selector=sel(team="b")))]))
    assert scores(plugin(handle), pod, snap) == per_node(0, 0, 100, 0)


def test_score_of_a_subset_of_rows() -> None:
    _, handle = cluster(NODES, [("n1", apod(labels=WEB)), ("n3", apod(labels=WEB))])
    pl = plugin(handle)
    pod = info(apod(aff=affinity(preferred=[weighted(5, term(sel(**WEB), ZONE))])))
    state = CycleState()
    rows = np.asarray([3, 2], dtype=np.int64)
    assert pl.pre_score(state, pod, rows).ok
    raw = pl.score_batch(state, pod, rows)
    assert raw.tolist() == [0, 5]
    pl.normalize_score(state, pod, rows, raw)
    assert raw.tolist() == [0, 100]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ([5, 10], [0, 100]),  # the lowest, not 0, maps to 0
        ([-5, 0, 5], [0, 50, 100]),
        ([0, 1, 3], [0, 33, 100]),  # truncated
        ([7, 7], [0, 0]),
        ([], []),
    ],
)
def test_normalize(raw: list[int], expected: list[int]) -> None:
    arr = np.asarray(raw, dtype=np.int64)
    normalize(arr)
    assert arr.tolist() == expected


def test_unparsable_pod_fails_prescore() -> None:
    _, handle = cluster(NODES, [])
    bad = apod(
        aff=affinity(preferred=[weighted(1, term({"matchExpressions": [{"key": "a", "operator": "In"}]}))])
    )
    status = plugin(handle).pre_score(CycleState(), info(bad), np.arange(4, dtype=np.int64))
    assert status.code is Code.ERROR
