"""Label and node selector matching and validation with Kubernetes semantics."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from koordsched.api.core import LabelSelector, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod
from koordsched.api.selectors import (
    SelectorError,
    is_qualified_name,
    is_valid_label_value,
    match_label_selector,
    match_node_selector,
    match_node_selector_requirement,
    match_node_selector_term,
    pod_matches_node_selector_and_affinity,
    validate_label_selector,
    validate_node_selector,
    validate_node_selector_term,
)
from tests import builders

NODE_LABELS = {
    "kubernetes.io/hostname": "node-1",
    "topology.kubernetes.io/zone": "zone-a",
    "node.koordinator.sh/gpu-model": "A100",
    "cores": "64",
    "gen": "not-a-number",
    "empty": "",
}


def label_selector(d: dict[str, Any]) -> LabelSelector:
    return msgspec.convert(d, LabelSelector)


def req(key: str, operator: str, *values: str) -> NodeSelectorRequirement:
    return msgspec.convert(
        {"key": key, "operator": operator, "values": list(values)}, NodeSelectorRequirement
    )


def term(d: dict[str, Any]) -> NodeSelectorTerm:
    return msgspec.convert(d, NodeSelectorTerm)


def node_selector(*terms: dict[str, Any]) -> NodeSelector:
    return msgspec.convert({"nodeSelectorTerms": list(terms)}, NodeSelector)


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


# --- label selectors ------------------------------------------------------------------------------


def test_nil_label_selector_selects_nothing() -> None:
    assert match_label_selector(None, {"app": "web"}) is False
    assert match_label_selector(None, {}) is False


@pytest.mark.parametrize(
    ("sel", "labels", "want"),
    [
        ({}, {}, True),
        ({}, {"app": "web"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "web", "tier": "fe"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
        ({"matchLabels": {"app": "web"}}, {}, False),
        ({"matchLabels": {"app": ""}}, {"app": ""}, True),
        ({"matchLabels": {"app": ""}}, {}, False),
        ({"matchLabels": {"app": "web", "tier": "fe"}}, {"app": "web"}, False),
        ({"matchExpressions": [expr("app", "In", "web", "api")]}, {"app": "api"}, True),
        ({"matchExpressions": [expr("app", "In", "web")]}, {"app": "db"}, False),
        ({"matchExpressions": [expr("app", "In", "web")]}, {}, False),
        ({"matchExpressions": [expr("app", "NotIn", "web")]}, {"app": "db"}, True),
        ({"matchExpressions": [expr("app", "NotIn", "web")]}, {"app": "web"}, False),
        ({"matchExpressions": [expr("app", "NotIn", "web")]}, {}, True),
        ({"matchExpressions": [expr("app", "Exists")]}, {"app": ""}, True),
        ({"matchExpressions": [expr("app", "Exists")]}, {"other": "x"}, False),
        ({"matchExpressions": [expr("app", "DoesNotExist")]}, {"other": "x"}, True),
        ({"matchExpressions": [expr("app", "DoesNotExist")]}, {"app": "web"}, False),
        (
            {"matchLabels": {"app": "web"}, "matchExpressions": [expr("tier", "In", "fe")]},
            {"app": "web", "tier": "be"},
            False,
        ),
        (
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [expr("tier", "In", "fe"), expr("x", "Exists")],
            },
            {"app": "web", "tier": "fe", "x": "1"},
            True,
        ),
    ],
)
def test_match_label_selector(sel: dict[str, Any], labels: dict[str, str], want: bool) -> None:
    assert match_label_selector(label_selector(sel), labels) is want


@pytest.mark.parametrize(
    ("expression", "pattern"),
    [
        (expr("app", "In"), "needs at least one value"),
        (expr("app", "NotIn"), "needs at least one value"),
        (expr("app", "Exists", "x"), "must not have values"),
        (expr("app", "DoesNotExist", "x"), "must not have values"),
        (expr("app", "Gt", "1"), "not a valid label selector operator"),
        (expr("app", "Equals", "x"), "not a valid label selector operator"),
        (expr("app", "in", "x"), "not a valid label selector operator"),
    ],
)
def test_match_label_selector_rejects_malformed(expression: dict[str, Any], pattern: str) -> None:
    # matchLabels fail first, yet the malformed expression is still reported, as Go builds the whole selector.
    sel = label_selector({"matchLabels": {"app": "nope"}, "matchExpressions": [expression]})
    with pytest.raises(SelectorError, match=pattern):
        match_label_selector(sel, {"app": "web"})
    with pytest.raises(SelectorError, match=r"matchExpressions\[0\]: key 'app'"):
        validate_label_selector(sel)


@pytest.mark.parametrize(
    ("sel", "pattern"),
    [
        ({"matchLabels": {"bad key": "x"}}, "matchLabels: key 'bad key'"),
        ({"matchLabels": {"app": "bad value"}}, "matchLabels: key 'app': value 'bad value'"),
        ({"matchExpressions": [expr("-app", "Exists")]}, r"matchExpressions\[0\]: key '-app'"),
        ({"matchExpressions": [expr("app", "In", "a/b")]}, r"matchExpressions\[0\]: key 'app': value 'a/b'"),
    ],
)
def test_validate_label_selector_syntax(sel: dict[str, Any], pattern: str) -> None:
    with pytest.raises(SelectorError, match=pattern):
        validate_label_selector(label_selector(sel))


@pytest.mark.parametrize(
    "sel",
    [
        None,
        {},
        {"matchLabels": {"app.kubernetes.io/name": "web", "empty": ""}},
        {"matchExpressions": [expr("a", "In", "b")]},
    ],
)
def test_validate_label_selector_accepts(sel: dict[str, Any] | None) -> None:
    validate_label_selector(None if sel is None else label_selector(sel))


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("app", True),
        ("app.kubernetes.io/name", True),
        ("a", True),
        ("A_b-c.d", True),
        ("x" * 63, True),
        ("x" * 64, False),
        ("", False),
        ("-app", False),
        ("app-", False),
        ("/app", False),
        ("app/", False),
        ("a/b/c", False),
        ("Upper.com/app", False),
        ("a_b.com/app", False),
        ("bad key", False),
    ],
)
def test_is_qualified_name(name: str, want: bool) -> None:
    assert is_qualified_name(name) is want


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("", True),
        ("web", True),
        ("a.b_c-D", True),
        ("x" * 63, True),
        ("x" * 64, False),
        ("-a", False),
        ("a b", False),
    ],
)
def test_is_valid_label_value(value: str, want: bool) -> None:
    assert is_valid_label_value(value) is want


# --- node selector requirements -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requirement", "want"),
    [
        (req("topology.kubernetes.io/zone", "In", "zone-a", "zone-b"), True),
        (req("topology.kubernetes.io/zone", "In", "zone-b"), False),
        (req("missing", "In", "x"), False),
        (req("empty", "In", ""), True),
        (req("topology.kubernetes.io/zone", "NotIn", "zone-b"), True),
        (req("topology.kubernetes.io/zone", "NotIn", "zone-a"), False),
        (req("missing", "NotIn", "x"), True),
        (req("cores", "Exists"), True),
        (req("empty", "Exists"), True),
        (req("missing", "Exists"), False),
        (req("missing", "DoesNotExist"), True),
        (req("cores", "DoesNotExist"), False),
        (req("cores", "Gt", "32"), True),
        (req("cores", "Gt", "64"), False),
        (req("cores", "Gt", "-1"), True),
        (req("cores", "Gt", "+63"), True),
        (req("cores", "Lt", "65"), True),
        (req("cores", "Lt", "64"), False),
        (req("missing", "Gt", "1"), False),
        (req("missing", "Lt", "1"), False),
        (req("gen", "Gt", "1"), False),
        (req("gen", "Lt", "1"), False),
        (req("empty", "Lt", "1"), False),
    ],
)
def test_match_node_selector_requirement(requirement: NodeSelectorRequirement, want: bool) -> None:
    assert match_node_selector_requirement(requirement, NODE_LABELS) is want


@pytest.mark.parametrize(
    ("labels", "want"),
    [
        ({"n": "9223372036854775807"}, True),
        ({"n": "9223372036854775808"}, False),  # overflows int64: Go's ParseInt fails
        ({"n": " 5"}, False),
        ({"n": "5.0"}, False),
        ({"n": "1_0"}, False),
        ({"n": "0x10"}, False),
    ],
)
def test_gt_label_value_must_be_int64(labels: dict[str, str], want: bool) -> None:
    assert match_node_selector_requirement(req("n", "Gt", "0"), labels) is want


@pytest.mark.parametrize(
    ("requirement", "pattern"),
    [
        (req("k", "Bogus", "x"), "'Bogus' is not a valid node selector operator"),
        (req("k", "in", "x"), "'in' is not a valid node selector operator"),
        (req("k", "", "x"), "'' is not a valid node selector operator"),
        (req("k", "In"), "needs at least one value"),
        (req("k", "NotIn"), "needs at least one value"),
        (req("k", "Exists", "x"), "must not have values"),
        (req("k", "DoesNotExist", "x"), "must not have values"),
        (req("k", "Gt"), "exactly one integer value"),
        (req("k", "Gt", "1", "2"), "exactly one integer value"),
        (req("k", "Gt", "abc"), "exactly one integer value"),
        (req("k", "Lt", "1.5"), "exactly one integer value"),
        (req("k", "Lt", "99999999999999999999"), "exactly one integer value"),
    ],
)
def test_match_node_selector_requirement_rejects_malformed(
    requirement: NodeSelectorRequirement, pattern: str
) -> None:
    with pytest.raises(SelectorError, match=pattern):
        match_node_selector_requirement(requirement, NODE_LABELS)


# --- node selector terms --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "node_name", "want"),
    [
        ({}, "node-1", False),
        ({"matchExpressions": [expr("topology.kubernetes.io/zone", "In", "zone-a")]}, "node-1", True),
        (
            {
                "matchExpressions": [
                    expr("topology.kubernetes.io/zone", "In", "zone-a"),
                    expr("cores", "Gt", "128"),
                ]
            },
            "node-1",
            False,
        ),
        ({"matchFields": [expr("metadata.name", "In", "node-1")]}, "node-1", True),
        ({"matchFields": [expr("metadata.name", "In", "node-1")]}, "node-2", False),
        ({"matchFields": [expr("metadata.name", "NotIn", "node-1")]}, "node-2", True),
        ({"matchFields": [expr("metadata.name", "NotIn", "node-1")]}, "node-1", False),
        (
            {
                "matchExpressions": [expr("cores", "Exists")],
                "matchFields": [expr("metadata.name", "In", "node-1")],
            },
            "node-1",
            True,
        ),
        (
            {
                "matchExpressions": [expr("cores", "DoesNotExist")],
                "matchFields": [expr("metadata.name", "In", "node-1")],
            },
            "node-1",
            False,
        ),
        (
            {
                "matchExpressions": [expr("cores", "Exists")],
                "matchFields": [expr("metadata.name", "In", "node-1")],
            },
            "node-2",
            False,
        ),
    ],
)
def test_match_node_selector_term(t: dict[str, Any], node_name: str, want: bool) -> None:
    assert match_node_selector_term(term(t), NODE_LABELS, node_name) is want


@pytest.mark.parametrize(
    ("t", "pattern"),
    [
        ({"matchFields": [expr("metadata.uid", "In", "x")]}, "field 'metadata.uid' is not supported"),
        ({"matchFields": [expr("metadata.name", "Exists")]}, "not a valid field selector operator"),
        ({"matchFields": [expr("metadata.name", "In", "a", "b")]}, "exactly one value"),
        ({"matchFields": [expr("metadata.name", "In")]}, "exactly one value"),
        (
            # The first requirement already fails, but the malformed second one is still reported.
            {"matchExpressions": [expr("missing", "Exists"), expr("k", "Gt", "x")]},
            "exactly one integer value",
        ),
    ],
)
def test_match_node_selector_term_rejects_malformed(t: dict[str, Any], pattern: str) -> None:
    with pytest.raises(SelectorError, match=pattern):
        match_node_selector_term(term(t), NODE_LABELS, "node-1")


# --- node selectors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("terms", "want"),
    [
        ((), False),
        (({},), False),
        (({"matchExpressions": [expr("cores", "Lt", "8")]},), False),
        (
            (
                {"matchExpressions": [expr("cores", "Lt", "8")]},
                {"matchExpressions": [expr("node.koordinator.sh/gpu-model", "In", "A100", "H100")]},
            ),
            True,
        ),
        (({"matchFields": [expr("metadata.name", "In", "node-1")]},), True),
        # A malformed term never matches, but a later good term still can (upstream ignores the error).
        (({"matchExpressions": [expr("cores", "Bogus")]},), False),
        (
            ({"matchExpressions": [expr("cores", "Bogus")]}, {"matchExpressions": [expr("cores", "Exists")]}),
            True,
        ),
        (({"matchExpressions": [expr("cores", "Exists", "x")]},), False),
        (({"matchExpressions": [expr("cores", "NotIn")]},), False),
    ],
)
def test_match_node_selector(terms: tuple[dict[str, Any], ...], want: bool) -> None:
    assert match_node_selector(node_selector(*terms), NODE_LABELS, "node-1") is want


@pytest.mark.parametrize(
    ("terms", "pattern"),
    [
        ((), "at least one term"),
        (
            ({"matchExpressions": [expr("zone", "Bogus", "a")]},),
            r"nodeSelectorTerms\[0\]\.matchExpressions\[0\]: key 'zone': 'Bogus' is not a valid",
        ),
        (
            ({}, {"matchExpressions": [expr("a", "Exists"), expr("cores", "Gt", "many")]}),
            r"nodeSelectorTerms\[1\]\.matchExpressions\[1\]: key 'cores': .*integer",
        ),
        (
            ({"matchExpressions": [expr("zone", "In")]},),
            r"nodeSelectorTerms\[0\]\.matchExpressions\[0\]: key 'zone': .*at least one value",
        ),
        (
            ({"matchExpressions": [expr("zone", "DoesNotExist", "a")]},),
            r"key 'zone': .*must not have values",
        ),
        (
            ({"matchExpressions": [expr("bad key", "Exists")]},),
            r"nodeSelectorTerms\[0\]\.matchExpressions\[0\]: key 'bad key' is not a valid label key",
        ),
        (
            ({"matchExpressions": [expr("zone", "In", "a b")]},),
            r"key 'zone': value 'a b' is not a valid label value",
        ),
        (
            ({"matchFields": [expr("metadata.namespace", "In", "x")]},),
            r"nodeSelectorTerms\[0\]\.matchFields\[0\]: key 'metadata.namespace'",
        ),
    ],
)
def test_validate_node_selector(terms: tuple[dict[str, Any], ...], pattern: str) -> None:
    with pytest.raises(SelectorError, match=pattern):
        validate_node_selector(node_selector(*terms))


def test_validate_node_selector_accepts_good_selector() -> None:
    validate_node_selector(
        node_selector(
            {},
            {
                "matchExpressions": [
                    expr("topology.kubernetes.io/zone", "In", "zone-a"),
                    expr("cores", "Gt", "8"),
                    expr("gpu", "DoesNotExist"),
                ],
                "matchFields": [expr("metadata.name", "NotIn", "node-9")],
            },
        )
    )


def test_validate_node_selector_term_uses_index() -> None:
    with pytest.raises(SelectorError, match=r"nodeSelectorTerms\[3\]"):
        validate_node_selector_term(term({"matchExpressions": [expr("k", "Lt")]}), 3)


# --- pods -----------------------------------------------------------------------------------------


def make_pod(spec: dict[str, Any]) -> Pod:
    return builders.make_pod("p", uid="", **spec)


def required_affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


@pytest.mark.parametrize(
    ("spec", "node_name", "want"),
    [
        ({}, "node-1", True),
        ({"nodeSelector": {"topology.kubernetes.io/zone": "zone-a"}}, "node-1", True),
        ({"nodeSelector": {"topology.kubernetes.io/zone": "zone-b"}}, "node-1", False),
        ({"nodeSelector": {"topology.kubernetes.io/zone": "zone-a", "missing": "x"}}, "node-1", False),
        ({"affinity": {}}, "node-1", True),
        ({"affinity": {"nodeAffinity": {}}}, "node-1", True),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 1, "preference": {"matchExpressions": [expr("cores", "DoesNotExist")]}}
                        ]
                    }
                }
            },
            "node-1",
            True,
        ),
        ({"affinity": required_affinity()}, "node-1", False),
        ({"affinity": required_affinity({"matchExpressions": [expr("cores", "Gt", "32")]})}, "node-1", True),
        ({"affinity": required_affinity({"matchExpressions": [expr("cores", "Gt", "64")]})}, "node-1", False),
        (
            {"affinity": required_affinity({"matchFields": [expr("metadata.name", "In", "node-1")]})},
            "node-2",
            False,
        ),
        (
            {
                "nodeSelector": {"topology.kubernetes.io/zone": "zone-b"},
                "affinity": required_affinity({"matchExpressions": [expr("cores", "Exists")]}),
            },
            "node-1",
            False,
        ),
        (
            {
                "nodeSelector": {"topology.kubernetes.io/zone": "zone-a"},
                "affinity": required_affinity(
                    {"matchExpressions": [expr("cores", "DoesNotExist")]},
                    {"matchExpressions": [expr("cores", "Exists")]},
                ),
            },
            "node-1",
            True,
        ),
    ],
)
def test_pod_matches_node_selector_and_affinity(spec: dict[str, Any], node_name: str, want: bool) -> None:
    assert pod_matches_node_selector_and_affinity(make_pod(spec), NODE_LABELS, node_name) is want
