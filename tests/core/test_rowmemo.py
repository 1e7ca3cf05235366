"""Remembered per-row results never go stale: a long random run against fresh computations.

The same plugin instances (which remember codes and scores per request signature) and
fresh instances (which remember nothing) must agree after every change to the cluster:
pods added and removed, nodes updated, nodes removed (rows move) and added.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.rowmemo import MAX_CONTENT_SIGNATURES, MAX_CONTENTS, ContentMemo, RowMemos
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.types import PodInfo
from koordsched.kernels import warm_up
from koordsched.plugins.noderesources.args import NodeResourcesBalancedAllocationArgs, NodeResourcesFitArgs
from koordsched.plugins.noderesources.balanced_allocation import NodeResourcesBalancedAllocation
from koordsched.plugins.noderesources.fit import NodeResourcesFit
from tests.builders import node, pod
from tests.fakes import FakeHandle

GI = 1 << 30


def _plugins(handle: Any) -> tuple[NodeResourcesFit, NodeResourcesBalancedAllocation]:
    return (
        NodeResourcesFit(NodeResourcesFitArgs(), handle),
        NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs(), handle),
    )


Plugins = tuple[NodeResourcesFit, NodeResourcesBalancedAllocation]


def _results(plugins: Plugins, p: PodInfo, snap: Snapshot) -> Any:
    fit, balanced = plugins
    rows = np.arange(snap.n, dtype=np.int64)
    state = CycleState()
    fit.pre_filter(state, p)
    fit.pre_score(state, p, rows)
    balanced.pre_score(state, p, rows)
    return (
        fit.filter_batch(state, p, rows).tolist(),
        fit.score_batch(state, p, rows).tolist(),
        balanced.score_batch(state, p, rows).tolist(),
    )


def test_memoized_results_match_fresh_ones_through_random_changes() -> None:
    warm_up()
    rng = random.Random(7)
    snap = Snapshot(capacity=4)
    handle = FakeHandle(snap)
    remembering = _plugins(handle)
    shapes = [(100, 128 << 20), (500, GI), (2000, 4 * GI), (100, 128 << 20)]
    placed: list[tuple[str, PodInfo]] = []
    names = 0

    def add_node() -> None:
        nonlocal names
        names += 1
        cpu = rng.choice([4000, 8000, 16000])
        snap.add_node(node(f"n{names}"), {"cpu": cpu, "memory": cpu * GI // 1000, "pods": 20})

    for _ in range(6):
        add_node()
    for step in range(400):
        op = rng.random()
        if op < 0.5 and snap.n:
            info = snap.infos[rng.randrange(snap.n)]
            cpu, mem = rng.choice(shapes)
            p = PodInfo(pod(f"p{step}"), {"cpu": cpu, "memory": mem})
            snap.add_pod(info, p)
            placed.append((info.name, p))
        elif op < 0.7 and placed:
            name, p = placed.pop(rng.randrange(len(placed)))
            if name in snap.by_name:
                snap.remove_pod(snap.by_name[name], p)
        elif op < 0.8 and snap.n:
            info = snap.infos[rng.randrange(snap.n)]
            cpu = rng.choice([4000, 8000, 16000])
            snap.update_node(info.node, {"cpu": cpu, "memory": cpu * GI // 1000, "pods": 20})
        elif op < 0.9 and snap.n > 2:
            info = snap.infos[rng.randrange(snap.n)]
            for p in list(info.pods.values()):
                snap.remove_pod(info, p)
            snap.remove_node(info.name)
        else:
            add_node()
        cpu, mem = rng.choice(shapes)
        probe = PodInfo(pod("probe"), {"cpu": cpu, "memory": mem})
        assert _results(remembering, probe, snap) == _results(_plugins(handle), probe, snap), f"step {step}"


def test_eager_memo_keeps_the_first_computation() -> None:
    warm_up()
    snap = Snapshot(capacity=4)
    for i in range(3):
        snap.add_node(node(f"n{i}"), {"cpu": 1000, "pods": 10})
    rows = np.arange(snap.n, dtype=np.int64)
    computed: list[list[int]] = []

    def compute(stale: np.ndarray) -> np.ndarray:
        computed.append(stale.tolist())
        return stale * 10

    eager, lazy = RowMemos(eager=True), RowMemos()
    for memos in (eager, lazy):
        computed.clear()
        assert memos.get("k", snap, rows, compute).tolist() == [0, 10, 20]
        snap.touch("n1")
        assert memos.get("k", snap, rows, compute).tolist() == [0, 10, 20]
        # Eager: only the touched row again; lazy: the first sighting kept nothing.
        assert computed[1] == ([1] if memos is eager else [0, 1, 2])
        memos.clear()
        assert memos.get("k", snap, rows, compute).tolist() == [0, 10, 20]


def test_content_memo_is_bounded() -> None:
    memo: ContentMemo[int] = ContentMemo()
    table = memo.table("sig")
    table.update((i, i) for i in range(MAX_CONTENTS))
    assert memo.table("sig") == {}  # full: started afresh
    for k in range(MAX_CONTENT_SIGNATURES):
        memo.table(k)[0] = k
    assert memo.table("new") == {} and memo.table(0) == {}


def test_a_row_or_two_are_computed_not_remembered() -> None:
    """Up to DIRECT_ROWS rows, RowMemos computes them (nothing stored); more rows go through the
    memo, which still serves only rows that did not change since; eager memos always remember."""
    from koordsched.framework.rowmemo import DIRECT_ROWS

    snap = Snapshot()
    for i in range(6):
        snap.add_node(node(f"n{i}"), {"cpu": 4000, "memory": 8 * GI, "pods": 110})
    asked: list[list[int]] = []

    def compute(rows: np.ndarray) -> np.ndarray:
        asked.append(rows.tolist())
        return rows * 10 + snap.row_gen[rows]

    memos = RowMemos()
    everything = np.arange(6, dtype=np.int64)
    few = np.arange(DIRECT_ROWS, dtype=np.int64)
    for _ in range(3):
        assert memos.get("k", snap, few, compute).tolist() == (few * 10 + snap.row_gen[few]).tolist()
    assert asked == [few.tolist()] * 3
    asked.clear()
    for _ in range(3):  # the second time a signature is seen it gets a memo; then it serves
        memos.get("k", snap, everything, compute)
    assert asked == [everything.tolist()] * 2
    asked.clear()
    snap.touch("n1")
    got = memos.get("k", snap, everything, compute)
    assert asked == [[1]] and got.tolist() == (everything * 10 + snap.row_gen[everything]).tolist()
    eager = RowMemos(eager=True)
    asked.clear()
    for _ in range(2):
        eager.get("k", snap, few, compute)
    assert asked == [few.tolist()]
