"""Kernel arithmetic (Go's division and rounding), score normalization, and the in-tree registry."""

from __future__ import annotations

import numpy as np
import pytest

from koordsched.config.catalog import PluginArgs
from koordsched.framework.interface import implemented_points
from koordsched.kernels import resources as kernels
from koordsched.plugins.helper import default_normalize_score
from koordsched.plugins.registry import in_tree_registry
from tests.fakes import FakeHandle


@pytest.mark.parametrize(
    ("a", "b", "q"),
    [(7, 2, 3), (-7, 2, -3), (7, -2, -3), (-7, -2, 3), (0, 5, 0), (-600, 70, -8), (600, 70, 8)],
)
def test_go_div_truncates_toward_zero(a: int, b: int, q: int) -> None:
    assert kernels.go_div(a, b) == q


@pytest.mark.parametrize(
    ("x", "r"),
    [(2.5, 3), (2.4999999, 2), (37.5, 38), (0.0, 0), (-2.5, -3), (-2.4, -2), (99.5, 100), (3.0, 3)],
)
def test_go_round_halves_away_from_zero(x: float, r: int) -> None:
    assert kernels.go_round(x) == r


def test_broken_linear() -> None:
    xs = np.array([10, 40, 70, 90], dtype=np.int64)
    ys = np.array([20, 90, 10, 60], dtype=np.int64)
    expected = {0: 20, 10: 20, 25: 55, 40: 90, 50: 64, 70: 10, 80: 35, 90: 60, 100: 60}
    for p, want in expected.items():
        assert kernels.broken_linear(p, xs, ys) == want, p


def test_kernels_refuse_wrong_dtype_and_layout() -> None:
    """Eager signatures: a wrong array is an error, never a silent recompile."""
    alloc = np.ones((2, 3), dtype=np.int64)
    used = np.zeros((2, 3), dtype=np.int64)
    counts = np.zeros(2, dtype=np.int64)
    rows = np.arange(2, dtype=np.int64)
    cols = np.array([0], dtype=np.int64)
    amounts = np.array([1], dtype=np.int64)
    ok = kernels.fit_filter(alloc, used, counts, counts + 5, rows, cols, amounts)
    assert ok.tolist() == [0, 0]
    with pytest.raises(TypeError):
        kernels.fit_filter(alloc, used, counts, counts + 5, rows.astype(np.int32), cols, amounts)
    with pytest.raises(TypeError):
        kernels.fit_filter(
            np.asfortranarray(np.ones((2, 3), dtype=np.int64)), used, counts, counts, rows, cols, amounts
        )
    assert len(kernels.fit_filter.signatures) == 1


def test_warm_up_is_repeatable() -> None:
    # The registry's warm-up runs the shared kernels and the plugins' own (DeviceShare's).
    in_tree_registry().warm_up()
    in_tree_registry().warm_up()


@pytest.mark.parametrize(
    ("raw", "reverse", "expected"),
    [
        ([], False, []),
        ([0, 0, 0], False, [0, 0, 0]),
        ([0, 0, 0], True, [100, 100, 100]),
        ([1, 2, 3], False, [33, 66, 100]),
        ([1, 2, 3], True, [67, 34, 0]),
        ([2, 4, 11], False, [18, 36, 100]),
        ([5], True, [0]),
    ],
)
def test_default_normalize_score(raw: list[int], reverse: bool, expected: list[int]) -> None:
    scores = np.asarray(raw, dtype=np.int64)
    default_normalize_score(scores, reverse)
    assert scores.tolist() == expected


EXPECTED_POINTS = {
    "SchedulingGates": {"preEnqueue"},
    "PrioritySort": {"queueSort"},
    "NodeUnschedulable": {"filter"},
    "NodeName": {"filter"},
    "TaintToleration": {"filter", "preScore", "score"},
    "NodeAffinity": {"preFilter", "filter", "preScore", "score"},
    "NodePorts": {"preFilter", "filter"},
    "NodeResourcesFit": {"preFilter", "filter", "preScore", "score"},
    "NodeResourcesBalancedAllocation": {"preScore", "score"},
    "PodTopologySpread": {"preFilter", "filter", "preScore", "score"},
    "InterPodAffinity": {"preFilter", "filter", "preScore", "score"},
    "ImageLocality": {"preScore", "score"},
    "DefaultBinder": {"bind"},
    "NodeNUMAResource": {"preFilter", "filter", "preScore", "score", "reserve", "preBind"},
    "DeviceShare": {"preFilter", "filter", "preScore", "score", "reserve", "preBind"},
    "DefaultPreBind": {"preBind"},
    "DefaultPreemption": {"postFilter"},
    "NodeResourcesFitPlus": {"preScore", "score"},
    "ScarceResourceAvoidance": {"preScore", "score"},
    "LoadAwareScheduling": {"filter", "score", "reserve"},
    "Reservation": {"preFilter", "filter", "postFilter", "preScore", "score", "reserve", "preBind", "bind"},
    "VolumeRestrictions": {"preFilter", "filter"},
    "NodeVolumeLimits": {"preFilter", "filter"},
    "VolumeBinding": {"preFilter", "filter", "preScore", "score", "reserve", "preBind"},
    "VolumeZone": {"preFilter", "filter"},
    "Coscheduling": {
        "preEnqueue",
        "queueSort",
        "preFilter",
        "postFilter",
        "preScore",
        "score",
        "reserve",
        "permit",
        "postBind",
    },
    "ElasticQuota": {"preFilter", "postFilter", "reserve"},
    "GPUFragmentation": {"preScore", "score"},
}


def test_registry_lists_every_in_tree_plugin() -> None:
    registry = in_tree_registry()
    assert set(registry.names()) == set(EXPECTED_POINTS)
    for spec in registry:
        assert spec.points == EXPECTED_POINTS[spec.name], spec.name
        assert isinstance(spec.factory, type)
        assert implemented_points(spec.factory) == spec.points


def test_registry_args_and_construction() -> None:
    registry = in_tree_registry()
    with_args = {s.name for s in registry if s.args_type is not None}
    assert with_args == {
        "NodeAffinity",
        "NodeResourcesFit",
        "NodeResourcesBalancedAllocation",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeNUMAResource",
        "DeviceShare",
        "NodeResourcesFitPlus",
        "ScarceResourceAvoidance",
        "LoadAwareScheduling",
        "ElasticQuota",
        "DefaultPreemption",
        "Reservation",
        "VolumeBinding",
        "Coscheduling",
        "GPUFragmentation",
    }
    handle = FakeHandle()
    for spec in registry:
        args = spec.default_args()
        if args is not None:
            assert isinstance(args, PluginArgs)
            assert type(args).__name__ == f"{spec.name}Args"
            args.validate()
        plugin = spec.factory(args, handle)
        assert plugin.name == spec.name
        # Plugins built without args (None) behave as with defaults.
        assert spec.factory(None, handle).name == spec.name


def test_registries_are_independent() -> None:
    assert in_tree_registry() is not in_tree_registry()
