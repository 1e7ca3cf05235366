"""Properties of the runtime quota over random trees: what children get never adds up to more
than their parent has (beyond their guaranteed mins), nobody gets more than it asks or than its
max, and a child that asks no more than its min gets what it asks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from koordsched.plugins.elasticquota.runtime import compute_runtime, distribute, limited, tree_requests
from koordsched.plugins.elasticquota.tree import QuotaTree
from tests.plugins.elasticquota.helpers import quota

child = st.tuples(
    st.integers(0, 50),  # min
    st.integers(0, 200),  # limited request
    st.integers(0, 30),  # weight
    st.booleans(),  # allow lent
)


@settings(max_examples=300, deadline=None)
@given(total=st.integers(0, 500), children=st.lists(child, min_size=1, max_size=8))
def test_distribute(total: int, children: list[tuple[int, int, int, bool]]) -> None:
    rows = [(f"c{i}", m, req, w, lent) for i, (m, req, w, lent) in enumerate(children)]
    runtime = distribute(total, rows)
    min_sum = sum(m for _, m, _, _, _ in rows)
    scaled = {name: (m * total // min_sum if min_sum > total else m) for name, m, _, _, _ in rows}
    for name, _, req, w, lent in rows:
        got = runtime[name]
        assert got >= 0
        if req <= scaled[name]:
            assert got == (req if lent else scaled[name])
        else:
            # Shares only ever go up to the request; a child with no weight keeps its min.
            assert scaled[name] <= got <= req
            if w == 0:
                assert got == scaled[name]
    # Nothing is handed out that the parent does not have (mins scaled down to fit first).
    assert sum(runtime.values()) <= total


@settings(max_examples=100, deadline=None)
@given(
    total=st.integers(0, 100_000),
    maxes=st.lists(st.integers(0, 40_000), min_size=2, max_size=6),
    asks=st.lists(st.integers(0, 60_000), min_size=6, max_size=6),
)
def test_tree_children_stay_within_their_parent(total: int, maxes: list[int], asks: list[int]) -> None:
    # One parent over len(maxes) - 1 leaves, next to one top-level sibling.
    parent_max = maxes[0]
    objs = [
        ("p/p", quota("p", max={"cpu": f"{parent_max}m"}, is_parent=True)),
        ("s/s", quota("s", max={"cpu": "40"})),
    ]
    leaves = [f"l{i}" for i in range(len(maxes) - 1)]
    for name, m in zip(leaves, maxes[1:], strict=True):
        objs.append((f"{name}/{name}", quota(name, max={"cpu": f"{m}m"}, parent="p")))
    tree = QuotaTree.build(objs, {}, {})
    leaf_requests = {name: {"cpu": ask} for name, ask in zip([*leaves, "s"], asks, strict=False)}
    requests = tree_requests(tree, leaf_requests)
    runtime = compute_runtime(tree, requests, {"cpu": total})
    assert runtime["p"]["cpu"] + runtime["s"]["cpu"] <= max(total, 0)
    assert sum(runtime[name]["cpu"] for name in leaves) <= runtime["p"]["cpu"]
    for name in [*leaves, "s", "p"]:
        node = tree.nodes[name]
        assert runtime[name]["cpu"] <= limited(requests[name], node.max).get("cpu", 0)
