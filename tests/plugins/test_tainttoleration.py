"""TaintToleration: filter reasons name the first untolerated taint; score counts PreferNoSchedule taints."""

from __future__ import annotations

import random
from typing import Any

import msgspec
import numpy as np
import pytest

from koordsched.api.core import Toleration
from koordsched.api.taints import count_intolerable_prefer_no_schedule, find_untolerated_taint
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.status import Code
from koordsched.plugins.tainttoleration import TaintToleration
from tests.builders import make_node, make_pod, pod_info
from tests.fakes import FakeHandle
from tests.plugins.conftest import add_node, all_rows, statuses

ALLOC = {"cpu": 4000, "memory": 8 * 1024**3, "pods": 110}


def taint(key: str, effect: str, value: str = "") -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


@pytest.mark.parametrize(
    ("taints", "tolerations", "reason"),
    [
        # Upstream TestTaintTolerationFilter cases.
        ([taint("dedicated", "NoSchedule", "user1")], [], "node(s) had untolerated taint {dedicated: user1}"),
        (
            [taint("dedicated", "NoSchedule", "user1")],
            [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
            None,
        ),
        (
            [taint("dedicated", "NoSchedule", "user1")],
            [{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}],
            "node(s) had untolerated taint {dedicated: user1}",
        ),
        (
            [taint("foo", "NoSchedule", "bar")],
            [{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
            None,
        ),
        (
            [taint("dedicated", "NoSchedule", "user2"), taint("foo", "NoSchedule", "bar")],
            [
                {"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"},
                {"key": "foo", "operator": "Exists", "effect": "NoSchedule"},
            ],
            None,
        ),
        (
            [taint("foo", "PreferNoSchedule", "bar")],
            [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"}],
            None,
        ),
        ([taint("foo", "PreferNoSchedule", "bar")], [], None),
        ([taint("foo", "NoExecute", "bar")], [], "node(s) had untolerated taint {foo: bar}"),
        ([taint("none", "NoSchedule")], [], "node(s) had untolerated taint {none: }"),
        # The first untolerated one is named, in the node's order.
        (
            [taint("a", "NoSchedule", "1"), taint("b", "NoExecute", "2")],
            [{"key": "a", "operator": "Exists"}],
            "node(s) had untolerated taint {b: 2}",
        ),
        ([taint("a", "NoSchedule", "1"), taint("b", "NoExecute", "2")], [{"operator": "Exists"}], None),
    ],
)
def test_filter(
    snap: Snapshot,
    handle: FakeHandle,
    taints: list[dict[str, str]],
    tolerations: list[dict[str, str]],
    reason: str | None,
) -> None:
    add_node(snap, make_node("clean"), ALLOC)
    add_node(snap, make_node("tainted", taints=taints), ALLOC)
    got = statuses(TaintToleration(None, handle), pod_info(make_pod(tolerations=tolerations)), snap)
    assert got["clean"] is None
    status = got["tainted"]
    if reason is None:
        assert status is None
    else:
        assert status is not None
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (reason,)


def score(plugin: TaintToleration, pod: Any, snap: Snapshot) -> list[int]:
    state = CycleState()
    rows = all_rows(snap)
    assert plugin.pre_score(state, pod, rows).ok
    scores = plugin.score_batch(state, pod, rows)
    assert plugin.normalize_score(state, pod, rows, scores).ok
    return [int(s) for s in scores]


@pytest.mark.parametrize(
    ("node_taints", "tolerations", "expected"),
    [
        # Upstream TestTaintTolerationScore: "node with taints tolerated by the pod, gets a higher score".
        (
            [[], [taint("foo", "PreferNoSchedule", "bar")]],
            [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
            [100, 100],
        ),
        # "the more intolerable taints a node has, the lower score it gets".
        (
            [
                [],
                [taint("cpu-type", "PreferNoSchedule", "arm64")],
                [
                    taint("cpu-type", "PreferNoSchedule", "arm64"),
                    taint("disk-type", "PreferNoSchedule", "ssd"),
                ],
            ],
            [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
            [100, 50, 0],
        ),
        # "only taints and tolerations that have effect PreferNoSchedule are checked".
        (
            [
                [],
                [taint("cpu-type", "NoSchedule", "arm64")],
                [
                    taint("cpu-type", "PreferNoSchedule", "arm64"),
                    taint("disk-type", "PreferNoSchedule", "ssd"),
                ],
            ],
            [
                {"key": "cpu-type", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"},
                {"key": "disk-type", "operator": "Equal", "value": "ssd", "effect": "NoSchedule"},
            ],
            [100, 100, 0],
        ),
        # "Default behaviour No taints and tolerations, lands on node with no taints".
        ([[], [taint("cpu-type", "PreferNoSchedule", "arm64")]], [], [100, 0]),
        # A toleration with an empty effect covers PreferNoSchedule too.
        (
            [[taint("a", "PreferNoSchedule")], [taint("b", "PreferNoSchedule")]],
            [{"key": "a", "operator": "Exists"}],
            [100, 0],
        ),
        # Three counts: normalized as 100 - 100*count/max.
        (
            [
                [taint("a", "PreferNoSchedule")],
                [
                    taint("a", "PreferNoSchedule"),
                    taint("b", "PreferNoSchedule"),
                    taint("c", "PreferNoSchedule"),
                ],
                [],
            ],
            [],
            [67, 0, 100],
        ),
    ],
)
def test_score(
    snap: Snapshot,
    handle: FakeHandle,
    node_taints: list[list[dict[str, str]]],
    tolerations: list[dict[str, str]],
    expected: list[int],
) -> None:
    for i, taints in enumerate(node_taints):
        add_node(snap, make_node(f"n{i}", taints=taints), ALLOC)
    assert score(TaintToleration(None, handle), pod_info(make_pod(tolerations=tolerations)), snap) == expected


def test_untainted_cluster_is_all_zeros(snap: Snapshot, handle: FakeHandle) -> None:
    for i in range(5):
        add_node(snap, make_node(f"n{i}"), ALLOC)
    plugin = TaintToleration(None, handle)
    pod = pod_info(make_pod())
    assert plugin.filter_batch(CycleState(), pod, all_rows(snap)).tolist() == [0] * 5
    assert score(plugin, pod, snap) == [100] * 5


def test_tables_follow_new_taint_sets(snap: Snapshot, handle: FakeHandle) -> None:
    """A node with a new taint set arriving after the pod's tables were built is still checked."""
    add_node(snap, make_node("a"), ALLOC)
    plugin = TaintToleration(None, handle)
    pod = pod_info(make_pod(tolerations=[{"key": "x", "operator": "Exists"}]))
    assert plugin.filter_batch(CycleState(), pod, all_rows(snap)).tolist() == [0]
    add_node(snap, make_node("b", taints=[taint("y", "NoSchedule")]), ALLOC)
    add_node(snap, make_node("c", taints=[taint("x", "NoSchedule")]), ALLOC)
    codes = plugin.filter_batch(CycleState(), pod, all_rows(snap))
    assert codes[0] == 0 and codes[1] != 0 and codes[2] == 0
    # Another pod with the same tolerations reuses the tables.
    other = pod_info(make_pod("other", tolerations=[{"key": "x", "operator": "Exists"}]))
    assert plugin.filter_batch(CycleState(), other, all_rows(snap)).tolist() == codes.tolist()


def _random_taints(rng: random.Random) -> list[dict[str, str]]:
    keys = ["dedicated", "gpu", "spot", "zone"]
    effects = ["NoSchedule", "NoExecute", "PreferNoSchedule"]
    return [
        taint(rng.choice(keys), rng.choice(effects), rng.choice(["", "a", "b"]))
        for _ in range(rng.randrange(4))
    ]


def _random_tolerations(rng: random.Random) -> list[dict[str, str]]:
    out = []
    for _ in range(rng.randrange(4)):
        t: dict[str, str] = {}
        if rng.random() < 0.8:
            t["key"] = rng.choice(["dedicated", "gpu", "spot", "zone"])
        t["operator"] = rng.choice(["Exists", "Equal", ""])
        if t["operator"] != "Exists":
            t["value"] = rng.choice(["", "a", "b"])
        if rng.random() < 0.7:
            t["effect"] = rng.choice(["NoSchedule", "NoExecute", "PreferNoSchedule"])
        if t["operator"] == "Exists" and "key" not in t and rng.random() < 0.5:
            t["key"] = "dedicated"
        out.append(t)
    return out


def test_batch_matches_per_node(snap: Snapshot, handle: FakeHandle, rng: random.Random) -> None:
    for i in range(80):
        add_node(snap, make_node(f"n{i}", taints=_random_taints(rng)), ALLOC)
    plugin = TaintToleration(None, handle)
    for k in range(60):
        pod = pod_info(make_pod(f"p{k}", tolerations=_random_tolerations(rng)))
        tolerations = [msgspec.convert(t, Toleration) for t in pod.pod.spec.tolerations]
        rows = np.asarray(rng.sample(range(snap.n), 30), dtype=np.int64)
        state = CycleState()
        codes = plugin.filter_batch(state, pod, rows)
        raw = plugin.score_batch(state, pod, rows)
        for row, code, count in zip(rows.tolist(), codes.tolist(), raw.tolist(), strict=True):
            taints = snap.infos[row].taints
            bad = find_untolerated_taint(taints, tolerations, ("NoSchedule", "NoExecute"))
            if bad is None:
                assert code == 0
            else:
                assert plugin.explain(state, pod, code).reasons == (
                    f"node(s) had untolerated taint {{{bad.key}: {bad.value}}}",
                )
            assert count == count_intolerable_prefer_no_schedule(taints, tolerations)
