"""The runtime quota (spec 4.5 "Runtime quota"), table-driven from the documented rules."""

from __future__ import annotations

import pytest

from koordsched.plugins.elasticquota.runtime import compute_runtime, distribute, limited, tree_requests
from koordsched.plugins.elasticquota.tree import QuotaTree
from tests.plugins.elasticquota.helpers import quota

# (total, [(name, min, limited request, weight, allow lent)], expected runtime)
CASES = [
    pytest.param(10, [("a", 2, 5, 1, True), ("b", 2, 5, 1, True)], {"a": 5, "b": 5}, id="both-reach-request"),
    pytest.param(
        10, [("a", 0, 8, 1, True), ("b", 0, 8, 3, True)], {"a": 3, "b": 7}, id="by-weight-exact-sum"
    ),
    pytest.param(
        10, [("a", 0, 2, 1, True), ("b", 0, 20, 1, True)], {"a": 2, "b": 8}, id="excess-goes-round-again"
    ),
    pytest.param(
        10, [("a", 4, 1, 1, False), ("b", 0, 10, 1, True)], {"a": 4, "b": 6}, id="no-lending-keeps-min"
    ),
    pytest.param(10, [("a", 4, 1, 1, True), ("b", 0, 10, 1, True)], {"a": 1, "b": 9}, id="lends-unused-min"),
    pytest.param(
        6, [("a", 6, 6, 1, True), ("b", 6, 6, 1, True)], {"a": 3, "b": 3}, id="mins-scaled-to-total"
    ),
    pytest.param(
        10, [("a", 0, 5, 0, True), ("b", 0, 5, 1, True)], {"a": 0, "b": 5}, id="zero-weight-gets-min"
    ),
    pytest.param(10, [("a", 3, 5, 1, True)], {"a": 5}, id="single-child-up-to-request"),
    pytest.param(0, [("a", 0, 5, 1, True)], {"a": 0}, id="nothing-to-share"),
    pytest.param(-4, [("a", 2, 5, 1, True)], {"a": 2}, id="negative-total-keeps-min"),
    pytest.param(
        7,
        [("a", 0, 9, 1, True), ("b", 0, 9, 1, True), ("c", 0, 9, 1, True)],
        {"a": 3, "b": 2, "c": 2},
        id="ties-by-name",
    ),
]


@pytest.mark.parametrize(("total", "children", "expected"), CASES)
def test_distribute(
    total: int, children: list[tuple[str, int, int, int, bool]], expected: dict[str, int]
) -> None:
    assert distribute(total, children) == expected


def test_shares_never_exceed_what_is_left() -> None:
    # Koordinator's float rounding would give 1 + 1 + 1 of 2 here (0.67 rounds up three times).
    runtime = distribute(2, [("a", 0, 5, 1, True), ("b", 0, 5, 1, True), ("c", 0, 5, 1, True)])
    assert sum(runtime.values()) == 2


def test_limited_caps_only_what_max_names() -> None:
    assert limited({"cpu": 5000, "memory": 10}, {"cpu": 2000}) == {"cpu": 2000, "memory": 10}


def test_tree_parent_shares_its_runtime_with_its_children() -> None:
    tree = QuotaTree.build(
        [
            ("p/p", quota("p", max={"cpu": "10"}, is_parent=True)),
            ("c1/c1", quota("c1", max={"cpu": "10"}, parent="p")),
            ("c2/c2", quota("c2", max={"cpu": "10"}, parent="p")),
            ("q/q", quota("q", max={"cpu": "10"})),
        ],
        {},
        {},
    )
    requests = tree_requests(tree, {"c1": {"cpu": 4000}, "c2": {"cpu": 8000}, "q": {"cpu": 10000}})
    # The parent asks for its children's limited requests, capped by its own max.
    assert requests["p"] == {"cpu": 12000}
    runtime = compute_runtime(tree, requests, {"cpu": 10000})
    assert runtime["p"] == {"cpu": 5000} and runtime["q"] == {"cpu": 5000}
    # c1 and c2 share p's 5 cpu by their weight (their max): 2.5 each, the odd milli to c1.
    assert runtime["c1"] == {"cpu": 2500} and runtime["c2"] == {"cpu": 2500}


def test_runtime_is_masked_to_the_quota_max() -> None:
    tree = QuotaTree.build(
        [("a/a", quota("a", max={"cpu": "4"})), ("b/b", quota("b", max={"cpu": "4", "memory": "1Gi"}))],
        {},
        {},
    )
    requests = tree_requests(tree, {"a": {"cpu": 1000, "memory": 5}, "b": {"memory": 1024}})
    runtime = compute_runtime(tree, requests, {"cpu": 8000, "memory": 1 << 40})
    assert runtime["a"] == {"cpu": 1000}
    assert runtime["b"] == {"cpu": 0, "memory": 1024}
