"""InterPodAffinity's PreFilter and Filter against upstream's documented semantics, case by case.

Nodes: n1 and n2 in zone z1, n3 in zone z2, n4 without a zone label (every node has its hostname).
Expected verdicts per node: "A" affinity rules (UnschedulableAndUnresolvable), "N" the pod's
anti-affinity rules, "E" existing pods' anti-affinity rules (both Unschedulable), "-" passes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from koordsched.api.core import Pod
from koordsched.api.kinds import NAMESPACES
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import Code
from tests.plugins.interpodaffinity.helpers import (
    AFFINITY_REASON,
    ANTI_REASON,
    EXISTING_REASON,
    ZONE,
    affinity,
    anode,
    apod,
    cluster,
    exprs,
    info,
    plugin,
    reasons,
    sel,
    set_namespace,
    term,
    verdicts,
)

NODES = [anode("n1", **{ZONE: "z1"}), anode("n2", **{ZONE: "z1"}), anode("n3", **{ZONE: "z2"}), anode("n4")]
SHORT = {"A": AFFINITY_REASON, "N": ANTI_REASON, "E": EXISTING_REASON, "-": None}

WEB = {"app": "web"}


def expect(spec: str) -> dict[str, str | None]:
    """ "AA-N" -> n1: affinity, n2: affinity, n3: passes, n4: anti-affinity."""
    return {f"n{i + 1}": SHORT[c] for i, c in enumerate(spec)}


# (name, incoming pod, placed pods as (node, pod), expected verdicts)
CASES: list[tuple[str, Pod, list[tuple[str, Pod]], str]] = [
    (
        "required affinity on hostname: only the node running a match",
        apod(aff=affinity(required=[term(sel(**WEB))])),
        [("n1", apod(labels=WEB))],
        "-AAA",
    ),
    (
        "required affinity on zone: every node of the zone; a node without the key never",
        apod(aff=affinity(required=[term(sel(**WEB), ZONE)])),
        [("n1", apod(labels=WEB))],
        "--AA",
    ),
    (
        "In operator",
        apod(aff=affinity(required=[term(exprs(("app", "In", ["web", "api"])))])),
        [("n3", apod(labels={"app": "api"})), ("n2", apod(labels={"app": "db"}))],
        "AA-A",
    ),
    (
        "NotIn matches pods without the key too",
        apod(labels=WEB, aff=affinity(required=[term(exprs(("app", "NotIn", ["web"])))])),
        [("n1", apod(labels=WEB)), ("n2", apod(labels={"tier": "x"}))],
        "A-AA",
    ),
    (
        "Exists and DoesNotExist",
        apod(aff=affinity(required=[term(exprs(("app", "Exists", []), ("tier", "DoesNotExist", [])))])),
        [("n1", apod(labels={"app": "a", "tier": "t"})), ("n3", apod(labels={"app": "b"}))],
        "AA-A",
    ),
    (
        "no pod matches and the pod does not match its own terms: nowhere",
        apod(labels={"app": "db"}, aff=affinity(required=[term(sel(**WEB))])),
        [("n1", apod(labels={"app": "db"}))],
        "AAAA",
    ),
    (
        "first pod of a self-matching group: any node with the key",
        apod(labels=WEB, aff=affinity(required=[term(sel(**WEB), ZONE)])),
        [("n1", apod(labels={"app": "db"}))],
        "---A",
    ),
    (
        "not the first pod when a match runs elsewhere",
        apod(labels=WEB, aff=affinity(required=[term(sel(**WEB), ZONE)])),
        [("n3", apod(labels=WEB))],
        "AA-A",
    ),
    (
        "a match on a node without the key is no pair: still the first pod",
        apod(labels=WEB, aff=affinity(required=[term(sel(**WEB), ZONE)])),
        [("n4", apod(labels=WEB))],
        "---A",
    ),
    (
        "one pod must match every affinity term",
        apod(aff=affinity(required=[term(sel(**WEB)), term(sel(tier="front"))])),
        [
            ("n1", apod(labels=WEB)),
            ("n1", apod(labels={"tier": "front"})),
            ("n2", apod(labels={**WEB, "tier": "front"})),
        ],
        "A-AA",
    ),
    (
        "terms with different keys: each of the node's domains must hold the match",
        apod(aff=affinity(required=[term(sel(**WEB), ZONE), term(sel(**WEB))])),
        [("n1", apod(labels=WEB))],
        "-AAA",
    ),
    (
        "anti-affinity on hostname",
        apod(aff=affinity(anti=[term(sel(**WEB))])),
        [("n1", apod(labels=WEB)), ("n3", apod(labels={"app": "db"}))],
        "N---",
    ),
    (
        "anti-affinity on zone; a node without the key passes",
        apod(aff=affinity(anti=[term(sel(**WEB), ZONE)])),
        [("n1", apod(labels=WEB))],
        "NN--",
    ),
    (
        "anti-affinity: any one term blocks",
        apod(aff=affinity(anti=[term(sel(**WEB)), term(sel(app="db"), ZONE)])),
        [("n1", apod(labels=WEB)), ("n3", apod(labels={"app": "db"}))],
        "N-N-",
    ),
    (
        "a placed pod's anti-affinity keeps the pod off its node",
        apod(labels=WEB),
        [("n1", apod(labels={"app": "db"}, aff=affinity(anti=[term(sel(**WEB))])))],
        "E---",
    ),
    (
        "a placed pod's zone anti-affinity keeps the pod out of its zone",
        apod(labels=WEB),
        [("n1", apod(aff=affinity(anti=[term(sel(**WEB), ZONE)])))],
        "EE--",
    ),
    (
        "a placed pod's anti-affinity on a node without its key blocks nothing",
        apod(labels=WEB),
        [("n4", apod(aff=affinity(anti=[term(sel(**WEB), ZONE)])))],
        "----",
    ),
    (
        "a placed pod's anti-affinity only sees its own namespace by default",
        apod(labels=WEB),
        [("n1", apod(namespace="other", aff=affinity(anti=[term(sel(**WEB))])))],
        "----",
    ),
    (
        "a placed pod's anti-affinity naming the pod's namespace",
        apod(labels=WEB),
        [("n1", apod(namespace="other", aff=affinity(anti=[term(sel(**WEB), namespaces=["default"])])))],
        "E---",
    ),
    (
        "affinity is checked first",
        apod(labels=WEB, aff=affinity(required=[term(sel(app="db"))], anti=[term(sel(**WEB))])),
        [("n1", apod(labels=WEB)), ("n2", apod(labels={"app": "db"}))],
        "A-AA",
    ),
    (
        "then the pod's anti-affinity, then the placed pods'",
        apod(labels=WEB, aff=affinity(anti=[term(sel(app="db"))])),
        [
            ("n1", apod(labels={"app": "db"}, aff=affinity(anti=[term(sel(**WEB))]))),
            ("n2", apod(aff=affinity(anti=[term(sel(**WEB))]))),
        ],
        "NE--",
    ),
    (
        "terminating pods count",
        apod(aff=affinity(anti=[term(sel(**WEB))])),
        [("n1", apod(labels=WEB, terminating=True))],
        "N---",
    ),
    (
        "a nil label selector matches no pod",
        apod(aff=affinity(required=[term(None)], anti=[term(None)])),
        [("n1", apod(labels=WEB))],
        "AAAA",
    ),
    (
        "an empty label selector matches every pod of the namespace",
        apod(aff=affinity(anti=[term({})])),
        [("n1", apod(labels=WEB)), ("n2", apod(namespace="other"))],
        "N---",
    ),
    (
        "namespaces: only the named ones",
        apod(aff=affinity(required=[term(sel(**WEB), namespaces=["other"])])),
        [("n1", apod(labels=WEB)), ("n3", apod(labels=WEB, namespace="other"))],
        "AA-A",
    ),
    (
        "an empty namespaceSelector selects every namespace",
        apod(aff=affinity(required=[term(sel(**WEB), ns_selector={})])),
        [("n3", apod(labels=WEB, namespace="elsewhere"))],
        "AA-A",
    ),
]


@pytest.mark.parametrize(("name", "pod", "placed", "expected"), CASES, ids=[c[0] for c in CASES])
def test_filter_table(name: str, pod: Pod, placed: list[tuple[str, Pod]], expected: str) -> None:
    snap, handle = cluster(NODES, placed)
    assert reasons(plugin(handle), pod, snap) == expect(expected)


def test_codes_are_upstreams() -> None:
    placed = [
        ("n1", apod(labels=WEB)),
        ("n2", apod(labels={"app": "db"}, aff=affinity(anti=[term(sel(app="api"))]))),
    ]
    snap, handle = cluster(NODES, placed)
    pod = apod(
        labels={"app": "api"}, aff=affinity(required=[term(sel(app="db"), ZONE)], anti=[term(sel(**WEB))])
    )
    _, per_node = verdicts(plugin(handle), pod, snap)
    assert per_node["n1"] is not None and per_node["n1"].code is Code.UNSCHEDULABLE
    assert per_node["n1"].message() == ANTI_REASON
    assert per_node["n2"] is not None and per_node["n2"].code is Code.UNSCHEDULABLE
    assert per_node["n2"].message() == EXISTING_REASON
    assert per_node["n3"] is not None and per_node["n3"].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert per_node["n3"].message() == AFFINITY_REASON


def test_skip_when_nothing_applies() -> None:
    placed = [("n1", apod(labels=WEB)), ("n2", apod(aff=affinity(anti=[term(sel(app="other"))])))]
    snap, handle = cluster(NODES, placed)
    pre, _ = verdicts(plugin(handle), apod(labels=WEB), snap)
    assert pre.code is Code.SKIP
    # Preferred terms alone do not filter.
    pre, _ = verdicts(
        plugin(handle),
        apod(aff=affinity(preferred=[{"weight": 5, "podAffinityTerm": term(sel(**WEB))}])),
        snap,
    )
    assert pre.code is Code.SKIP


def test_namespace_selector_reads_namespace_labels() -> None:
    placed = [("n1", apod(labels=WEB, namespace="third")), ("n3", apod(labels=WEB, namespace="other"))]
    snap, handle = cluster(NODES, placed)
    set_namespace(handle, "other", team="a")
    set_namespace(handle, "third", team="b")
    pod = apod(aff=affinity(required=[term(sel(**WEB), ns_selector=sel(team="a"))]))
    assert reasons(plugin(handle), pod, snap) == expect("AA-A")
    # namespaces and namespaceSelector add up.
    pod = apod(aff=affinity(required=[term(sel(**WEB), namespaces=["third"], ns_selector=sel(team="a"))]))
    assert reasons(plugin(handle), pod, snap) == expect("-A-A")
    # A Namespace that changed labels is read anew in the next cycle.
    set_namespace(handle, "other", team="b")
    pod = apod(aff=affinity(required=[term(sel(**WEB), ns_selector=sel(team="a"))]))
    assert reasons(plugin(handle), pod, snap) == expect("AAAA")


def test_placed_pods_namespace_selector_reads_the_incoming_pods_namespace() -> None:
    placed = [
        ("n1", apod(namespace="other", aff=affinity(anti=[term(sel(**WEB), ns_selector=sel(team="a"))])))
    ]
    snap, handle = cluster(NODES, placed)
    set_namespace(handle, "default", team="a")
    assert reasons(plugin(handle), apod(labels=WEB), snap) == expect("E---")
    set_namespace(handle, "default", team="b")
    pre, _ = verdicts(plugin(handle), apod(labels=WEB), snap)
    assert pre.code is Code.SKIP
    # A namespace the scheduler has no object for has no labels.
    handle.store_for(NAMESPACES).clear()
    pre, _ = verdicts(plugin(handle), apod(labels=WEB), snap)
    assert pre.code is Code.SKIP


def test_match_label_keys_merge_the_pods_own_values() -> None:
    v1 = {**WEB, "version": "v1"}
    v2 = {**WEB, "version": "v2"}
    snap, handle = cluster(NODES, [("n1", apod(labels=v1)), ("n2", apod(labels=v2))])
    pod = apod(labels=v2, aff=affinity(anti=[term(sel(**WEB), match_keys=["version"])]))
    assert reasons(plugin(handle), pod, snap) == expect("-N--")
    # Already merged by the API server (1.31+): the key is in the selector, not merged twice.
    merged = {
        "matchLabels": WEB,
        "matchExpressions": [{"key": "version", "operator": "In", "values": ["v2"]}],
    }
    pod = apod(labels=v2, aff=affinity(anti=[term(merged, match_keys=["version"])]))
    assert reasons(plugin(handle), pod, snap) == expect("-N--")
    # A key the pod has no label for is ignored.
    pod = apod(labels=WEB, aff=affinity(anti=[term(sel(**WEB), match_keys=["version"])]))
    assert reasons(plugin(handle), pod, snap) == expect("NN--")


def test_mismatch_label_keys() -> None:
    a = {**WEB, "tenant": "a"}
    b = {**WEB, "tenant": "b"}
    snap, handle = cluster(NODES, [("n1", apod(labels=a)), ("n2", apod(labels=b))])
    pod = apod(labels={"tenant": "a"}, aff=affinity(required=[term(sel(**WEB), mismatch_keys=["tenant"])]))
    assert reasons(plugin(handle), pod, snap) == expect("A-AA")


def test_placed_pods_match_label_keys_use_their_own_labels() -> None:
    placed = [
        ("n1", apod(labels={"version": "v1"}, aff=affinity(anti=[term(sel(**WEB), match_keys=["version"])])))
    ]
    snap, handle = cluster(NODES, placed)
    assert reasons(plugin(handle), apod(labels={**WEB, "version": "v1"}), snap) == expect("E---")
    pre, _ = verdicts(plugin(handle), apod(labels={**WEB, "version": "v2"}), snap)
    assert pre.code is Code.SKIP


@pytest.mark.parametrize(
    ("aff", "message"),
    [
        (
            affinity(anti=[term(exprs(("app", "In", [])))]),
            "parsing pod: requiredAntiAffinityTerms: [0].labelSelector: matchExpressions[0]: "
            "key 'app': operator In needs at least one value",
        ),
        (
            affinity(preferred=[{"weight": 1, "podAffinityTerm": term(exprs(("app", "Bad", ["x"])))}]),
            "parsing pod: preferredAffinityTerms: [0].podAffinityTerm.labelSelector: matchExpressions[0]: "
            "key 'app': 'Bad' is not a valid label selector operator",
        ),
        (
            affinity(
                required=[term(sel(**WEB), ns_selector=sel(**{"bad key!": "x"}))],
                anti=[term(sel(**{"a": "b c"}))],
            ),
            "parsing pod: [requiredAffinityTerms: [0].namespaceSelector: matchLabels: key 'bad key!' is not "
            "a valid label key, requiredAntiAffinityTerms: [0].labelSelector: matchLabels: key 'a': value "
            "'b c' is not a valid label value]",
        ),
    ],
)
def test_unparsable_terms_refuse_the_pod(aff: dict[str, Any], message: str) -> None:
    snap, handle = cluster(NODES, [])
    pre, _ = verdicts(plugin(handle), apod(aff=aff), snap)
    assert pre.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert pre.message() == message


def test_placed_pod_with_unparsable_terms_keeps_its_other_kinds() -> None:
    bad = affinity(required=[term(exprs(("app", "In", [])))], anti=[term(sel(**WEB))])
    snap, handle = cluster(NODES, [("n1", apod(aff=bad))])
    assert reasons(plugin(handle), apod(labels=WEB), snap) == expect("E---")


# --- preemption: AddPod / RemovePod -----------------------------------------------------------


def _state(pod: Pod, placed: list[tuple[str, Pod]]) -> tuple[Any, CycleState, Any]:
    snap, handle = cluster(NODES, placed)
    pl = plugin(handle)
    state = CycleState()
    _, status = pl.pre_filter(state, info(pod))
    assert status.ok, status
    return pl, state, snap


def _codes(pl: Any, state: CycleState, pod: Pod, snap: Any) -> list[int]:
    return pl.filter_batch(state, info(pod), np.arange(snap.n, dtype=np.int64)).tolist()  # type: ignore[no-any-return]


def test_remove_and_add_pod_update_the_counts() -> None:
    web = apod(labels=WEB)
    pod = apod(aff=affinity(anti=[term(sel(**WEB))]))
    pl, state, snap = _state(pod, [("n1", web)])
    assert _codes(pl, state, pod, snap) == [2, 0, 0, 0]
    fork = state.clone()
    assert pl.remove_pod(fork, info(pod), info(web), snap.by_name["n1"]).ok
    assert _codes(pl, fork, pod, snap) == [0, 0, 0, 0]
    assert pl.add_pod(fork, info(pod), info(apod(labels=WEB)), snap.by_name["n3"]).ok
    assert _codes(pl, fork, pod, snap) == [0, 0, 2, 0]
    # The state it was cloned from is untouched.
    assert _codes(pl, state, pod, snap) == [2, 0, 0, 0]


def test_remove_pod_of_placed_anti_affinity() -> None:
    blocker = apod(aff=affinity(anti=[term(sel(**WEB), ZONE)]))
    pod = apod(labels=WEB)
    pl, state, snap = _state(pod, [("n1", blocker)])
    assert _codes(pl, state, pod, snap) == [3, 3, 0, 0]
    pl.remove_pod(state, info(pod), info(blocker), snap.by_name["n1"])
    assert _codes(pl, state, pod, snap) == [0, 0, 0, 0]
    pl.add_pod(state, info(pod), info(blocker), snap.by_name["n3"])
    assert _codes(pl, state, pod, snap) == [0, 0, 3, 0]


def test_removing_the_last_match_makes_the_pod_first_of_its_group() -> None:
    web = apod(labels=WEB)
    pod = apod(labels=WEB, aff=affinity(required=[term(sel(**WEB), ZONE)]))
    pl, state, snap = _state(pod, [("n3", web)])
    assert _codes(pl, state, pod, snap) == [1, 1, 0, 1]
    pl.remove_pod(state, info(pod), info(web), snap.by_name["n3"])
    assert _codes(pl, state, pod, snap) == [0, 0, 0, 1]
    pl.add_pod(state, info(pod), info(web), snap.by_name["n1"])
    assert _codes(pl, state, pod, snap) == [0, 0, 1, 1]
