"""DefaultPreemptionArgs validation and candidate counts, and the PDB split, as upstream."""

from __future__ import annotations

import msgspec
import pytest

from koordsched.config.catalog import ArgsError
from koordsched.framework.types import PodInfo
from koordsched.plugins.defaultpreemption.args import DefaultPreemptionArgs, num_candidates
from koordsched.plugins.defaultpreemption.pdb import split_by_pdb_violation
from tests.plugins.defaultpreemption.helpers import pdb, running


@pytest.mark.parametrize(
    ("pct", "absolute", "error"),
    [
        (10, 100, None),
        (0, 1, None),
        (100, 0, None),
        (-1, 100, "minCandidateNodesPercentage: Invalid value: -1: not in valid range [0, 100]"),
        (101, 100, "minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]"),
        (10, -1, "minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)"),
        (
            0,
            0,
            "[minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as "
            "minCandidateNodesAbsolute, minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the "
            "same time as minCandidateNodesPercentage]",
        ),
    ],
)
def test_args_validation(pct: int, absolute: int, error: str | None) -> None:
    args = DefaultPreemptionArgs(min_candidate_nodes_percentage=pct, min_candidate_nodes_absolute=absolute)
    if error is None:
        args.validate()
    else:
        with pytest.raises(ArgsError) as err:
            args.validate()
        assert str(err.value) == error


def test_args_defaults_and_decoding() -> None:
    assert DefaultPreemptionArgs() == DefaultPreemptionArgs(
        min_candidate_nodes_percentage=10, min_candidate_nodes_absolute=100
    )
    decoded = msgspec.convert(
        {"kind": "DefaultPreemptionArgs", "minCandidateNodesPercentage": 5}, DefaultPreemptionArgs
    )
    assert (decoded.min_candidate_nodes_percentage, decoded.min_candidate_nodes_absolute) == (5, 100)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"minCandidateNodes": 5}, DefaultPreemptionArgs)


@pytest.mark.parametrize(
    ("nodes", "pct", "absolute", "want"),
    [
        (5000, 10, 100, 500),  # 10 % of the nodes
        (500, 10, 100, 100),  # at least the absolute number
        (50, 10, 100, 50),  # at most every node
        (1000, 0, 1, 1),
        (1000, 100, 0, 1000),
        (7, 50, 0, 3),  # integer division, as Go's int32 arithmetic
    ],
)
def test_num_candidates(nodes: int, pct: int, absolute: int, want: int) -> None:
    args = DefaultPreemptionArgs(min_candidate_nodes_percentage=pct, min_candidate_nodes_absolute=absolute)
    assert num_candidates(args, nodes) == want


def info(name: str, labels: dict[str, str], namespace: str = "default") -> PodInfo:
    return PodInfo(running(name, "n1", labels=labels, namespace=namespace), {})


@pytest.mark.parametrize(
    ("pods", "budgets", "violating"),
    [
        # One disruption allowed: the first matching pod spends it, the second violates.
        ([("a", {"app": "x"}), ("b", {"app": "x"})], [pdb("x", {"app": "x"}, 1)], ["b"]),
        ([("a", {"app": "x"})], [pdb("x", {"app": "x"}, 0)], ["a"]),
        # Already disrupted pods spend nothing.
        ([("a", {"app": "x"}), ("b", {"app": "x"})], [pdb("x", {"app": "x"}, 1, disrupted=["a"])], []),
        # No labels, an empty selector, another app: no budget applies.
        ([("a", {})], [pdb("x", {"app": "x"}, 0)], []),
        ([("a", {"app": "x"})], [pdb("empty", {}, 0)], []),
        ([("a", {"app": "y"})], [pdb("x", {"app": "x"}, 0)], []),
        # A pod matched by two budgets violates if either runs out.
        ([("a", {"app": "x", "tier": "t"})], [pdb("x", {"app": "x"}, 1), pdb("t", {"tier": "t"}, 0)], ["a"]),
    ],
)
def test_split_by_pdb_violation(
    pods: list[tuple[str, dict[str, str]]], budgets: list, violating: list[str]
) -> None:
    infos = [info(n, labels) for n, labels in pods]
    bad, fine = split_by_pdb_violation(infos, budgets)
    assert [p.pod.metadata.name for p in bad] == violating
    assert [p.pod.metadata.name for p in fine] == [n for n, _ in pods if n not in violating]


def test_a_budget_in_another_namespace_does_not_apply() -> None:
    bad, _ = split_by_pdb_violation([info("a", {"app": "x"}, namespace="other")], [pdb("x", {"app": "x"}, 0)])
    assert bad == []
