"""Taint/toleration matching as v1.Toleration.ToleratesTaint and the TaintToleration plugin."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from koordsched.api.core import Node, Pod, Taint, Toleration
from koordsched.api.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    UNSCHEDULABLE_TAINT,
    count_intolerable_prefer_no_schedule,
    find_untolerated_taint,
    toleration_tolerates_taint,
    tolerations_tolerate_taint,
)


def taint(key: str, effect: str, value: str = "") -> Taint:
    return msgspec.convert({"key": key, "value": value, "effect": effect}, Taint)


def tol(**kw: Any) -> Toleration:
    return msgspec.convert(kw, Toleration)


def test_constants() -> None:
    assert (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE) == ("NoSchedule", "PreferNoSchedule", "NoExecute")
    assert taint("node.kubernetes.io/unschedulable", "NoSchedule") == UNSCHEDULABLE_TAINT


GPU = taint("nvidia.com/gpu", "NoSchedule", "present")


@pytest.mark.parametrize(
    ("toleration", "t", "want"),
    [
        (tol(key="nvidia.com/gpu", operator="Equal", value="present", effect="NoSchedule"), GPU, True),
        (tol(key="nvidia.com/gpu", operator="Equal", value="absent", effect="NoSchedule"), GPU, False),
        (tol(key="nvidia.com/gpu", operator="Equal", value="present"), GPU, True),  # empty effect: all
        (tol(key="nvidia.com/gpu", operator="Equal", value="present", effect="NoExecute"), GPU, False),
        (tol(key="nvidia.com/gpu", value="present", effect="NoSchedule"), GPU, True),  # "" means Equal
        (tol(key="nvidia.com/gpu", value="", effect="NoSchedule"), GPU, False),
        (tol(key="nvidia.com/gpu", operator="Exists"), GPU, True),
        (tol(key="nvidia.com/gpu", operator="Exists", value="ignored"), GPU, True),
        (tol(key="other", operator="Exists"), GPU, False),
        (tol(operator="Exists"), GPU, True),  # empty key + Exists: everything
        (tol(operator="Exists", effect="NoSchedule"), GPU, True),
        (tol(operator="Exists", effect="PreferNoSchedule"), GPU, False),
        (tol(operator="Equal", value="present"), GPU, True),  # empty key is a wildcard in ToleratesTaint too
        (tol(operator="Equal", value="nope"), GPU, False),
        (tol(key="nvidia.com/gpu", operator="exists"), GPU, False),  # operators are case-sensitive
        (tol(key="nvidia.com/gpu", operator="Bogus", value="present"), GPU, False),
        (tol(key="k", operator="Equal"), taint("k", "NoExecute"), True),  # empty values are equal
        (
            tol(key="k", operator="Exists", effect="NoExecute", toleration_seconds=30),
            taint("k", "NoExecute"),
            True,
        ),
    ],
)
def test_toleration_tolerates_taint(toleration: Toleration, t: Taint, want: bool) -> None:
    assert toleration_tolerates_taint(toleration, t) is want


def test_tolerations_tolerate_taint() -> None:
    assert tolerations_tolerate_taint([], GPU) is False
    assert tolerations_tolerate_taint(
        [tol(key="x", operator="Exists"), tol(key="nvidia.com/gpu", operator="Exists")], GPU
    )


NODE_TAINTS = [
    taint("soft", "PreferNoSchedule"),
    taint("dedicated", "NoSchedule", "infra"),
    taint("evict", "NoExecute"),
]
FILTER_EFFECTS = (NO_SCHEDULE, NO_EXECUTE)


@pytest.mark.parametrize(
    ("tolerations", "effects", "want"),
    [
        ([], FILTER_EFFECTS, NODE_TAINTS[1]),
        (
            [tol(key="dedicated", operator="Equal", value="infra", effect="NoSchedule")],
            FILTER_EFFECTS,
            NODE_TAINTS[2],
        ),
        ([tol(key="dedicated", operator="Equal", value="other")], FILTER_EFFECTS, NODE_TAINTS[1]),
        (
            [tol(key="dedicated", operator="Exists"), tol(key="evict", operator="Exists")],
            FILTER_EFFECTS,
            None,
        ),
        ([tol(operator="Exists")], FILTER_EFFECTS, None),
        ([tol(operator="Exists", effect="NoSchedule")], FILTER_EFFECTS, NODE_TAINTS[2]),
        ([], (NO_EXECUTE,), NODE_TAINTS[2]),
        ([], (PREFER_NO_SCHEDULE,), NODE_TAINTS[0]),
        ([], (), None),
        ([], frozenset({NO_SCHEDULE}), NODE_TAINTS[1]),
    ],
)
def test_find_untolerated_taint(
    tolerations: list[Toleration], effects: tuple[str, ...], want: Taint | None
) -> None:
    assert find_untolerated_taint(NODE_TAINTS, tolerations, effects) == want


def test_find_untolerated_taint_no_taints() -> None:
    assert find_untolerated_taint([], [], FILTER_EFFECTS) is None


def test_unschedulable_taint_needs_a_toleration() -> None:
    assert find_untolerated_taint([UNSCHEDULABLE_TAINT], [], [NO_SCHEDULE]) == UNSCHEDULABLE_TAINT
    t = tol(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule")
    assert find_untolerated_taint([UNSCHEDULABLE_TAINT], [t], [NO_SCHEDULE]) is None


@pytest.mark.parametrize(
    ("taints", "tolerations", "want"),
    [
        ([], [], 0),
        ([taint("a", "PreferNoSchedule"), taint("b", "PreferNoSchedule")], [], 2),
        ([taint("a", "PreferNoSchedule"), taint("b", "NoSchedule")], [], 1),  # only PreferNoSchedule counts
        (
            [taint("a", "PreferNoSchedule"), taint("b", "PreferNoSchedule")],
            [tol(key="a", operator="Exists")],
            1,
        ),
        (
            [taint("a", "PreferNoSchedule")],
            [tol(key="a", operator="Exists", effect="PreferNoSchedule")],
            0,
        ),
        ([taint("a", "PreferNoSchedule")], [tol(key="a", operator="Exists", effect="NoSchedule")], 1),
        ([taint("a", "PreferNoSchedule", "v")], [tol(key="a", value="w")], 1),
        ([taint("a", "PreferNoSchedule", "v")], [tol(key="a", value="v")], 0),
        ([taint("a", "PreferNoSchedule"), taint("b", "PreferNoSchedule")], [tol(operator="Exists")], 0),
    ],
)
def test_count_intolerable_prefer_no_schedule(
    taints: list[Taint], tolerations: list[Toleration], want: int
) -> None:
    assert count_intolerable_prefer_no_schedule(taints, tolerations) == want


def test_from_manifests() -> None:
    node = msgspec.convert(
        {
            "metadata": {"name": "n1"},
            "spec": {"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]},
        },
        Node,
    )
    pod = msgspec.convert(
        {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "tolerations": [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
            },
        },
        Pod,
    )
    assert find_untolerated_taint(node.spec.taints, pod.spec.tolerations, FILTER_EFFECTS) is None
    assert find_untolerated_taint(node.spec.taints, [], FILTER_EFFECTS) == node.spec.taints[0]
