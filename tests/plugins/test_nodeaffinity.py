"""NodeAffinity: upstream's filter/PreFilter/score tables, args validation, batch-vs-per-node properties."""

from __future__ import annotations

import random
from typing import Any

import msgspec
import numpy as np
import pytest

from koordsched.api.core import NodeSelector, NodeSelectorTerm
from koordsched.api.selectors import (
    SelectorError,
    match_node_selector,
    match_node_selector_term,
    pod_matches_node_selector_and_affinity,
)
from koordsched.config.catalog import ArgsError
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.status import Code
from koordsched.framework.types import NODE_ADD, NODE_UPDATE
from koordsched.plugins.nodeaffinity import NodeAffinity, NodeAffinityArgs
from tests.builders import make_node, make_pod, pod_info
from tests.fakes import FakeHandle
from tests.plugins.conftest import add_node, all_rows, statuses

ALLOC = {"cpu": 4000, "memory": 8 * 1024**3, "pods": 110}
POD_REASON = "node(s) didn't match Pod's node affinity/selector"
ENFORCED_REASON = "node(s) didn't match scheduler-enforced node affinity"


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)}


def name_field(op: str, *values: str) -> dict[str, Any]:
    return {"key": "metadata.name", "operator": op, "values": list(values)}


def required(*terms: dict[str, Any] | None) -> dict[str, Any]:
    """``affinity`` with required terms; a None term list stands for a nil nodeSelectorTerms."""
    sel: dict[str, Any] = {} if terms == (None,) else {"nodeSelectorTerms": list(terms)}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": sel}}


def term(*exprs: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"matchExpressions": list(exprs)}
    if fields:
        out["matchFields"] = fields
    return out


def preferred(*weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "preference": t} for w, t in weighted
            ]
        }
    }


def plugin_with(handle: FakeHandle, added: dict[str, Any] | None = None) -> NodeAffinity:
    args = msgspec.convert({"addedAffinity": added} if added else {}, NodeAffinityArgs)
    return NodeAffinity(args, handle)


FILTER_CASES: list[tuple[str, dict[str, Any], dict[str, str], str, str | None]] = [
    # (name, pod spec, node labels, node name, expected reason)
    ("missing labels", {"nodeSelector": {"foo": "bar"}}, {}, "node1", POD_REASON),
    ("same labels", {"nodeSelector": {"foo": "bar"}}, {"foo": "bar"}, "node1", None),
    ("labels superset", {"nodeSelector": {"foo": "bar"}}, {"foo": "bar", "baz": "blah"}, "node1", None),
    ("labels subset", {"nodeSelector": {"foo": "bar", "baz": "blah"}}, {"foo": "bar"}, "node1", POD_REASON),
    (
        "In matches",
        {"affinity": required(term(expr("foo", "In", "bar", "value2")))},
        {"foo": "bar"},
        "node1",
        None,
    ),
    (
        "Gt",
        {"affinity": required(term(expr("kernel-version", "Gt", "0204")))},
        {"kernel-version": "0206"},
        "n",
        None,
    ),
    ("Gt fails", {"affinity": required(term(expr("kv", "Gt", "10")))}, {"kv": "9"}, "n", POD_REASON),
    ("Gt non-int label", {"affinity": required(term(expr("kv", "Gt", "1")))}, {"kv": "x"}, "n", POD_REASON),
    ("Lt", {"affinity": required(term(expr("kv", "Lt", "10")))}, {"kv": "-3"}, "n", None),
    ("Lt missing key", {"affinity": required(term(expr("kv", "Lt", "10")))}, {}, "n", POD_REASON),
    (
        "NotIn",
        {"affinity": required(term(expr("mem-type", "NotIn", "DDR", "DDR2")))},
        {"mem-type": "DDR3"},
        "n",
        None,
    ),
    ("NotIn absent key", {"affinity": required(term(expr("mem-type", "NotIn", "DDR")))}, {}, "n", None),
    (
        "NotIn hit",
        {"affinity": required(term(expr("mem", "NotIn", "DDR", "DDR2")))},
        {"mem": "DDR2"},
        "n",
        POD_REASON,
    ),
    ("Exists", {"affinity": required(term(expr("GPU", "Exists")))}, {"GPU": "NVIDIA-GRID-K1"}, "n", None),
    (
        "DoesNotExist",
        {"affinity": required(term(expr("GPU", "DoesNotExist")))},
        {"GPU": "x"},
        "n",
        POD_REASON,
    ),
    (
        "In no match",
        {"affinity": required(term(expr("foo", "In", "value1", "value2")))},
        {"foo": "bar"},
        "n",
        POD_REASON,
    ),
    ("nil terms", {"affinity": required(None)}, {"foo": "bar"}, "n", POD_REASON),
    ("empty terms", {"affinity": required()}, {"foo": "bar"}, "n", POD_REASON),
    ("empty matchExpressions", {"affinity": required(term())}, {"foo": "bar"}, "n", POD_REASON),
    ("no affinity", {}, {"foo": "bar"}, "n", None),
    ("affinity without required", {"affinity": {"nodeAffinity": {}}}, {"foo": "bar"}, "n", None),
    (
        "ANDed expressions match",
        {"affinity": required(term(expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER")))},
        {"GPU": "NVIDIA-GRID-K1"},
        "n",
        None,
    ),
    (
        "ANDed expressions fail",
        {"affinity": required(term(expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER")))},
        {"GPU": "NVIDIA-GRID-K1"},
        "n",
        POD_REASON,
    ),
    (
        "ORed terms",
        {
            "affinity": required(
                term(expr("foo", "In", "bar", "value2")), term(expr("diffkey", "In", "wrong"))
            )
        },
        {"foo": "bar"},
        "n",
        None,
    ),
    (
        "nodeSelector and affinity both hold",
        {"nodeSelector": {"foo": "bar"}, "affinity": required(term(expr("foo", "Exists")))},
        {"foo": "bar"},
        "n",
        None,
    ),
    (
        "affinity holds, nodeSelector does not",
        {"nodeSelector": {"foo": "bar"}, "affinity": required(term(expr("foo", "Exists")))},
        {"foo": "barrrrrr"},
        "n",
        POD_REASON,
    ),
    ("matchFields In", {"affinity": required(term(fields=[name_field("In", "node1")]))}, {}, "node1", None),
    (
        "matchFields In other",
        {"affinity": required(term(fields=[name_field("In", "node1")]))},
        {},
        "node2",
        POD_REASON,
    ),
    (
        "matchFields NotIn",
        {"affinity": required(term(fields=[name_field("NotIn", "node1")]))},
        {},
        "node2",
        None,
    ),
    (
        "two terms: fields miss, expressions match",
        {"affinity": required(term(fields=[name_field("In", "node1")]), term(expr("foo", "In", "bar")))},
        {"foo": "bar"},
        "node2",
        None,
    ),
    (
        "one term: fields miss, expressions match",
        {"affinity": required(term(expr("foo", "In", "bar"), fields=[name_field("In", "node1")]))},
        {"foo": "bar"},
        "node2",
        POD_REASON,
    ),
    (
        "one term: both match",
        {"affinity": required(term(expr("foo", "In", "bar"), fields=[name_field("In", "node1")]))},
        {"foo": "bar"},
        "node1",
        None,
    ),
    (
        "malformed term is dropped, the other still matches",
        {"affinity": required(term(expr("foo", "Bogus", "x")), term(expr("foo", "In", "bar")))},
        {"foo": "bar"},
        "n",
        None,
    ),
    (
        "malformed only term",
        {"affinity": required(term(expr("foo", "Gt", "x")))},
        {"foo": "1"},
        "n",
        POD_REASON,
    ),
]


@pytest.mark.parametrize(
    ("spec", "labels", "node_name", "reason"), [c[1:] for c in FILTER_CASES], ids=[c[0] for c in FILTER_CASES]
)
def test_filter(
    snap: Snapshot,
    handle: FakeHandle,
    spec: dict[str, Any],
    labels: dict[str, str],
    node_name: str,
    reason: str | None,
) -> None:
    add_node(snap, make_node("other", labels={"unrelated": "x"}), ALLOC)
    add_node(snap, make_node(node_name, labels=labels), ALLOC)
    pod = pod_info(make_pod(**spec))
    status = statuses(plugin_with(handle), pod, snap)[node_name]
    if reason is None:
        assert status is None
    else:
        assert status is not None
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (reason,)
    # The vectorised answer agrees with the per-node matcher.
    assert (status is None) == pod_matches_node_selector_and_affinity(pod.pod, labels, node_name)


@pytest.mark.parametrize(
    ("spec", "skip", "names", "conflict"),
    [
        ({}, True, None, False),
        ({"affinity": {"nodeAffinity": {}}}, True, None, False),
        ({"nodeSelector": {"a": "b"}}, False, None, False),
        ({"affinity": required(term(expr("foo", "In", "bar")))}, False, None, False),
        ({"affinity": required(term(fields=[name_field("In", "node1")]))}, False, {"node1"}, False),
        (
            {
                "affinity": required(
                    term(fields=[name_field("In", "node1")]), term(fields=[name_field("In", "node2")])
                )
            },
            False,
            {"node1", "node2"},
            False,
        ),
        (
            {"affinity": required(term(fields=[name_field("In", "node1")]), term(expr("foo", "In", "bar")))},
            False,
            None,
            False,
        ),
        ({"affinity": required(term(fields=[name_field("NotIn", "node1")]))}, False, None, False),
        (
            {"affinity": required(term(fields=[name_field("In", "node1"), name_field("In", "node2")]))},
            False,
            None,
            True,
        ),
        (
            # One conflicting term does not doom the pod when another term names nodes.
            {
                "affinity": required(
                    term(fields=[name_field("In", "node1"), name_field("In", "node2")]),
                    term(fields=[name_field("In", "node3")]),
                )
            },
            False,
            {"node3"},
            False,
        ),
    ],
)
def test_pre_filter(
    handle: FakeHandle, spec: dict[str, Any], skip: bool, names: set[str] | None, conflict: bool
) -> None:
    result, status = plugin_with(handle).pre_filter(CycleState(), pod_info(make_pod(**spec)))
    if skip:
        assert status.code is Code.SKIP
        return
    if conflict:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == ("pod affinity terms conflict",)
        return
    assert status.ok
    assert (None if result is None else result.node_names) == names


def test_added_affinity_is_not_skipped(handle: FakeHandle) -> None:
    plugin = plugin_with(
        handle,
        {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [term(expr("zone", "Exists"))]
            }
        },
    )
    _, status = plugin.pre_filter(CycleState(), pod_info(make_pod()))
    assert status.ok
    # Only preferred added terms: nothing for the filter to do.
    plugin = plugin_with(
        handle,
        {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": term(expr("zone", "Exists"))}
            ]
        },
    )
    _, status = plugin.pre_filter(CycleState(), pod_info(make_pod()))
    assert status.code is Code.SKIP


@pytest.mark.parametrize(
    ("pod_zone_values", "node_zone", "reason"),
    [
        (["foo"], "foo", None),  # matches added affinity and the pod's
        (["bar"], "foo", POD_REASON),  # matches added affinity, not the pod's
        (["bar"], "bar", ENFORCED_REASON),  # does not match added affinity: reported first
    ],
)
def test_added_affinity(
    snap: Snapshot, handle: FakeHandle, pod_zone_values: list[str], node_zone: str, reason: str | None
) -> None:
    added = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [term(expr("zone", "In", "foo"))]
        }
    }
    add_node(snap, make_node("n", labels={"zone": node_zone}), ALLOC)
    pod = pod_info(make_pod(affinity=required(term(expr("zone", "In", *pod_zone_values)))))
    status = statuses(plugin_with(handle, added), pod, snap)["n"]
    if reason is None:
        assert status is None
    else:
        assert status is not None and status.reasons == (reason,)
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


# --- score -----------------------------------------------------------------------------------------


def scores(plugin: NodeAffinity, pod: Any, snap: Snapshot) -> list[int] | None:
    state = CycleState()
    rows = all_rows(snap)
    status = plugin.pre_score(state, pod, rows)
    if status.code is Code.SKIP:
        return None
    assert status.ok, status
    out = plugin.score_batch(state, pod, rows)
    assert plugin.normalize_score(state, pod, rows, out).ok
    return [int(s) for s in out]


AFFINITY2 = preferred(
    (2, term(expr("foo", "In", "bar"))),
    (4, term(expr("key", "In", "value"))),
    (5, term(expr("foo", "In", "bar"), expr("key", "In", "value"), expr("az", "In", "az1"))),
)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, None),
        (preferred((2, term(expr("foo", "In", "bar")))), [100, 0, 100]),
        (preferred((3, term(expr("nope", "Exists")))), [0, 0, 0]),
        # Upstream: "all nodes matches the preferred scheduling requirements of pod but with different
        # priorities".
        (AFFINITY2, [18, 36, 100]),
        # Weight-0 terms are dropped, leaving nothing to score.
        (preferred((0, term(expr("foo", "In", "bar")))), None),
        (preferred((7, term(fields=[name_field("In", "node2")]))), [0, 100, 0]),
    ],
)
def test_score(snap: Snapshot, handle: FakeHandle, spec: dict[str, Any], expected: list[int] | None) -> None:
    add_node(snap, make_node("node1", labels={"foo": "bar"}), ALLOC)
    add_node(snap, make_node("node2", labels={"key": "value"}), ALLOC)
    add_node(snap, make_node("node3", labels={"foo": "bar", "key": "value", "az": "az1"}), ALLOC)
    pod = pod_info(make_pod(affinity=spec) if spec else make_pod())
    assert scores(plugin_with(handle), pod, snap) == expected


def test_score_with_added_preferred(snap: Snapshot, handle: FakeHandle) -> None:
    add_node(snap, make_node("node1", labels={"foo": "bar"}), ALLOC)
    add_node(snap, make_node("node2", labels={"key": "value"}), ALLOC)
    add_node(snap, make_node("node3", labels={"foo": "bar", "key": "value", "az": "az1"}), ALLOC)
    added = {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": term(expr("key", "Exists"))}
        ]
    }
    plugin = plugin_with(handle, added)
    # Added terms alone keep the score running: 0, 5, 5.
    assert scores(plugin, pod_info(make_pod()), snap) == [0, 100, 100]
    # With the pod's own: node1 2, node2 5+4, node3 5+2+4+5.
    assert scores(plugin, pod_info(make_pod(affinity=AFFINITY2)), snap) == [12, 56, 100]


def test_malformed_preferred_term_is_an_error(handle: FakeHandle) -> None:
    pod = pod_info(make_pod(affinity=preferred((1, term(expr("foo", "Bogus", "x"))))))
    status = plugin_with(handle).pre_score(CycleState(), pod, np.zeros(0, dtype=np.int64))
    assert status.code is Code.ERROR
    assert "[0].preference.matchExpressions[0]" in status.message()


# --- args ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("added", "error"),
    [
        (
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [term(expr("zone", "In", "a"))]
                }
            },
            None,
        ),
        ({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term()]}}, None),
        (
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [term(), term(expr("z", "Bogus"))]
                }
            },
            "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1].matchExpressions[0]",
        ),
        (
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [term(expr("z", "In"))]
                }
            },
            "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]",
        ),
        (
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [term(fields=[name_field("In", "a", "b")])]
                }
            },
            "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0]",
        ),
        (
            {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": term(expr("z", "Gt", "x"))}
                ]
            },
            "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0]",
        ),
        # A weight-0 preferred term is ignored upstream, malformed or not.
        (
            {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 0, "preference": term(expr("z", "Gt", "x"))}
                ]
            },
            None,
        ),
        (
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [term(expr("bad key!", "Exists"))]
                }
            },
            "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]",
        ),
    ],
)
def test_args_validation(handle: FakeHandle, added: dict[str, Any], error: str | None) -> None:
    args = msgspec.convert({"addedAffinity": added}, NodeAffinityArgs)
    if error is None:
        args.validate()
        NodeAffinity(args, handle)
        return
    with pytest.raises(ArgsError, match=error.replace("[", r"\[").replace("]", r"\]")):
        args.validate()
    with pytest.raises(ArgsError):
        NodeAffinity(args, handle)


def test_args_defaults_and_unknown_fields() -> None:
    assert NodeAffinityArgs().added_affinity is None
    NodeAffinityArgs().validate()
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"addedAfinity": {}}, NodeAffinityArgs)


def test_events(handle: FakeHandle) -> None:
    assert [e.event for e in plugin_with(handle).events_to_register()] == [NODE_ADD, NODE_UPDATE]


# --- properties --------------------------------------------------------------------------------------

KEYS = ["zone", "disk", "gpu", "rank"]
VALUES = ["a", "b", "c", "1", "7", "12", "-3"]


def _random_requirement(rng: random.Random) -> dict[str, Any]:
    op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus"])
    key = rng.choice(KEYS)
    if op in ("In", "NotIn"):
        return expr(key, op, *rng.sample(VALUES, rng.randrange(1, 3)))
    if op in ("Gt", "Lt"):
        return expr(key, op, rng.choice(["0", "5", "10", "x"]))
    if op == "Bogus":
        return expr(key, op, "a")
    return expr(key, op)


def _random_term(rng: random.Random, names: list[str]) -> dict[str, Any]:
    exprs = [_random_requirement(rng) for _ in range(rng.randrange(0, 3))]
    fields = [name_field(rng.choice(["In", "NotIn"]), rng.choice(names)) for _ in range(rng.randrange(0, 2))]
    return term(*exprs, fields=fields)


def _random_pod_spec(rng: random.Random, names: list[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if rng.random() < 0.4:
        spec["nodeSelector"] = {k: rng.choice(VALUES) for k in rng.sample(KEYS, rng.randrange(1, 3))}
    node_affinity: dict[str, Any] = {}
    if rng.random() < 0.7:
        terms = [_random_term(rng, names) for _ in range(rng.randrange(0, 3))]
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    if rng.random() < 0.7:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.randrange(1, 100), "preference": _random_term(rng, names)}
            for _ in range(rng.randrange(1, 4))
        ]
    if node_affinity:
        spec["affinity"] = {"nodeAffinity": node_affinity}
    return spec


def _term_matches(t: NodeSelectorTerm, labels: dict[str, str], name: str) -> bool:
    try:
        return match_node_selector_term(t, labels, name)
    except SelectorError:
        return False


@pytest.mark.parametrize("with_added", [False, True])
def test_batch_matches_per_node(
    snap: Snapshot, handle: FakeHandle, rng: random.Random, with_added: bool
) -> None:
    names = [f"n{i}" for i in range(60)]
    for name in names:
        labels = {k: rng.choice(VALUES) for k in KEYS if rng.random() < 0.6}
        add_node(snap, make_node(name, labels=labels), ALLOC)
    added_spec: dict[str, Any] | None = None
    added_required: NodeSelector | None = None
    if with_added:
        added_spec = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [term(expr("zone", "NotIn", "c"))]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 3, "preference": term(expr("gpu", "Exists"))}
            ],
        }
        added_required = msgspec.convert(
            added_spec["requiredDuringSchedulingIgnoredDuringExecution"], NodeSelector
        )
    plugin = plugin_with(handle, added_spec)
    checked = 0
    for k in range(120):
        pod = pod_info(make_pod(f"p{k}", **_random_pod_spec(rng, names)))
        state = CycleState()
        result, status = plugin.pre_filter(state, pod)
        if status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            continue
        rows = np.asarray(rng.sample(range(snap.n), 40), dtype=np.int64)
        codes = (
            np.zeros(len(rows), dtype=np.int64)
            if status.code is Code.SKIP
            else plugin.filter_batch(state, pod, rows)
        )
        for row, code in zip(rows.tolist(), codes.tolist(), strict=True):
            info = snap.infos[row]
            labels = info.node.metadata.labels
            if added_required is not None and not match_node_selector(added_required, labels, info.name):
                assert code == 2, (info.name, labels)
                continue
            fits = pod_matches_node_selector_and_affinity(pod.pod, labels, info.name)
            assert code == (0 if fits else 1), (info.name, labels, pod.pod.spec)
            if fits and result is not None and result.node_names is not None:
                assert info.name in result.node_names
            checked += 1
        # Scores: raw sums of matched weights.
        state = CycleState()
        ps = plugin.pre_score(state, pod, rows)
        if ps.code is Code.ERROR:
            continue
        na = pod.pod.spec.affinity.node_affinity if pod.pod.spec.affinity else None
        prefs = list(na.preferred_during_scheduling_ignored_during_execution) if na else []
        raw = (
            np.zeros(len(rows), dtype=np.int64)
            if ps.code is Code.SKIP
            else plugin.score_batch(state, pod, rows)
        )
        if ps.code is Code.SKIP:
            # Only empty (match-nothing) preferred terms, if any.
            assert not with_added
            assert all(not p.preference.match_expressions and not p.preference.match_fields for p in prefs)
        for row, got in zip(rows.tolist(), raw.tolist(), strict=True):
            info = snap.infos[row]
            labels = info.node.metadata.labels
            want = sum(p.weight for p in prefs if _term_matches(p.preference, labels, info.name))
            if with_added and "gpu" in labels:
                want += 3
            assert got == want, (info.name, labels, prefs)
    assert checked > 500


def test_masks_follow_label_changes(snap: Snapshot, handle: FakeHandle) -> None:
    """Gt/Lt results are cached per key; a label update must invalidate them."""
    add_node(snap, make_node("a", labels={"rank": "5"}), ALLOC)
    add_node(snap, make_node("b", labels={"rank": "50"}), ALLOC)
    plugin = plugin_with(handle)
    pod = pod_info(make_pod(affinity=required(term(expr("rank", "Gt", "10")))))
    codes = plugin.filter_batch(CycleState(), pod, all_rows(snap))
    assert codes.tolist() == [1, 0]
    snap.update_node(make_node("a", labels={"rank": "500"}), ALLOC)
    assert plugin.filter_batch(CycleState(), pod, all_rows(snap)).tolist() == [0, 0]
    snap.remove_node("b")
    assert plugin.filter_batch(CycleState(), pod, all_rows(snap)).tolist() == [0]
