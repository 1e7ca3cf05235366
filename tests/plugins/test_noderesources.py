"""NodeResourcesFit and NodeResourcesBalancedAllocation: upstream tables, args, reference properties."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Any

import msgspec
import numpy as np
import pytest

from koordsched.api.resources import is_extended_resource_name, is_scalar_resource_name
from koordsched.config.catalog import ArgsError
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import NodeInfo, Snapshot
from koordsched.framework.status import Code
from koordsched.framework.types import ASSIGNED_POD_DELETE, NODE_ADD, NODE_UPDATE, PodInfo
from koordsched.plugins.noderesources import (
    NodeResourcesBalancedAllocation,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFit,
    NodeResourcesFitArgs,
)
from tests.builders import container, make_node, make_pod, pod_info
from tests.fakes import FakeHandle
from tests.plugins.conftest import add_node, all_rows, place, run_filter, statuses

MI = 1024**2


def fit(handle: FakeHandle, **args: Any) -> NodeResourcesFit:
    return NodeResourcesFit(msgspec.convert(args, NodeResourcesFitArgs), handle)


def two_containers(a: dict[str, str], b: dict[str, str]) -> list[dict[str, Any]]:
    return [container("a", a), container("b", b)]


# --- filter ----------------------------------------------------------------------------------------

#: Upstream's makeAllocatableResources(10, 20, 32, 5, 20, 5): cpu in millicores, memory in bytes.
NODE = {
    "cpu": 10,
    "memory": 20,
    "pods": 32,
    "example.com/aaa": 5,
    "ephemeral-storage": 20,
    "hugepages-2Mi": 5,
}


def req(**kw: Any) -> dict[str, str]:
    """Requests written with upstream's small integer units (cpu in millicores)."""
    out = {}
    for k, v in kw.items():
        name = {"eph": "ephemeral-storage", "aaa": "example.com/aaa", "bbb": "example.com/bbb"}.get(k, k)
        out[name.replace("_", "-")] = f"{v}m" if name == "cpu" else str(v)
    return out


FILTER_CASES: list[tuple[str, dict[str, Any], dict[str, str], list[str], dict[str, Any]]] = [
    # (name, new pod spec, existing pod requests, expected reasons, plugin args)
    ("no resources requested always fits", {}, req(cpu=10, memory=20), [], {}),
    (
        "too many resources fails",
        {"requests": req(cpu=1, memory=1)},
        req(cpu=10, memory=20),
        ["Insufficient cpu", "Insufficient memory"],
        {},
    ),
    (
        "too many resources fails due to init container cpu",
        {"requests": req(cpu=1, memory=1), "initContainers": [container("i", req(cpu=3, memory=1))]},
        req(cpu=8, memory=19),
        ["Insufficient cpu"],
        {},
    ),
    ("both resources fit", {"requests": req(cpu=1, memory=1)}, req(cpu=5, memory=5), [], {}),
    (
        "one resource memory fits",
        {"requests": req(cpu=2, memory=1)},
        req(cpu=9, memory=5),
        ["Insufficient cpu"],
        {},
    ),
    (
        "one resource cpu fits",
        {"requests": req(cpu=1, memory=2)},
        req(cpu=5, memory=19),
        ["Insufficient memory"],
        {},
    ),
    ("equal edge case", {"requests": req(cpu=5, memory=1)}, req(cpu=5, memory=19), [], {}),
    ("extended resource fits", {"requests": req(aaa=1)}, req(cpu=0, memory=0), [], {}),
    (
        "extended resource capacity enforced",
        {"requests": req(aaa=10)},
        {},
        ["Insufficient example.com/aaa"],
        {},
    ),
    (
        "extended resource allocatable enforced",
        {"requests": req(aaa=1)},
        req(aaa=5),
        ["Insufficient example.com/aaa"],
        {},
    ),
    ("unknown extended resource", {"requests": req(bbb=1)}, {}, ["Insufficient example.com/bbb"], {}),
    (
        "kubernetes.io resource capacity enforced",
        {"requests": {"kubernetes.io/something": "10"}},
        {},
        ["Insufficient kubernetes.io/something"],
        {},
    ),
    (
        "hugepages capacity enforced",
        {"requests": {"hugepages-2Mi": "10"}},
        {},
        ["Insufficient hugepages-2Mi"],
        {},
    ),
    ("hugepages fits", {"requests": {"hugepages-2Mi": "2"}}, {"hugepages-2Mi": "3"}, [], {}),
    (
        "ignored extended resource",
        {"requests": req(bbb=2)},
        {},
        [],
        {"ignoredResources": ["example.com/bbb"]},
    ),
    ("ignored resource group", {"requests": req(bbb=2)}, {}, [], {"ignoredResourceGroups": ["example.com"]}),
    (
        "ignored group does not cover kubernetes.io names",
        {"requests": {"kubernetes.io/something": "1"}},
        {},
        ["Insufficient kubernetes.io/something"],
        {"ignoredResourceGroups": ["kubernetes.io"], "ignoredResources": ["kubernetes.io/something"]},
    ),
    ("untracked resource name is not checked", {"requests": {"foo": "100"}}, {}, [], {}),
    (
        "resources + pod overhead fits",
        {"requests": req(cpu=1, memory=1), "overhead": req(cpu=3, memory=13)},
        req(cpu=5, memory=5),
        [],
        {},
    ),
    (
        "requests + overhead does not fit for memory",
        {"requests": req(cpu=1, memory=1), "overhead": req(cpu=1, memory=15)},
        req(cpu=5, memory=5),
        ["Insufficient memory"],
        {},
    ),
    ("ephemeral storage", {"requests": req(eph=25)}, {}, ["Insufficient ephemeral-storage"], {}),
    (
        "every shortage reported, in upstream's order",
        {"requests": {**req(eph=25, memory=30, cpu=11), "example.com/aaa": "9", "hugepages-2Mi": "6"}},
        {},
        [
            "Insufficient cpu",
            "Insufficient memory",
            "Insufficient ephemeral-storage",
            "Insufficient example.com/aaa",
            "Insufficient hugepages-2Mi",
        ],
        {},
    ),
]


@pytest.mark.parametrize(
    ("spec", "existing", "reasons", "args"), [c[1:] for c in FILTER_CASES], ids=[c[0] for c in FILTER_CASES]
)
def test_filter(
    snap: Snapshot,
    handle: FakeHandle,
    spec: dict[str, Any],
    existing: dict[str, str],
    reasons: list[str],
    args: dict[str, Any],
) -> None:
    add_node(snap, make_node("n"), NODE)
    place(snap, "n", make_pod("existing", existing))
    spec = dict(spec)
    requests = spec.pop("requests", None)
    pod = pod_info(make_pod("new", requests, **spec))
    status = statuses(fit(handle, **args), pod, snap)["n"]
    if not reasons:
        assert status is None
    else:
        assert status is not None
        assert status.code is Code.UNSCHEDULABLE
        assert list(status.reasons) == reasons


@pytest.mark.parametrize(
    ("existing_pods", "requests", "reasons"),
    [
        (1, req(cpu=1), ["Too many pods"]),
        (1, {}, ["Too many pods"]),
        (0, req(cpu=1), []),
        (1, req(cpu=20, memory=1), ["Too many pods", "Insufficient cpu"]),
    ],
)
def test_too_many_pods(
    snap: Snapshot, handle: FakeHandle, existing_pods: int, requests: dict[str, str], reasons: list[str]
) -> None:
    add_node(snap, make_node("n"), {**NODE, "pods": 1})
    for i in range(existing_pods):
        place(snap, "n", make_pod(f"e{i}", {}))
    status = statuses(fit(handle), pod_info(make_pod("new", requests)), snap)["n"]
    assert (status.reasons if status else ()) == tuple(reasons)


def test_node_without_pods_allocatable_takes_no_pod(snap: Snapshot, handle: FakeHandle) -> None:
    add_node(snap, make_node("n"), {"cpu": 1000})
    status = statuses(fit(handle), pod_info(make_pod("p", {})), snap)["n"]
    assert status is not None and status.reasons == ("Too many pods",)


def test_filter_uses_current_usage(snap: Snapshot, handle: FakeHandle) -> None:
    add_node(snap, make_node("n"), {"cpu": 1000, "memory": 1000, "pods": 10})
    plugin = fit(handle)
    pod = pod_info(make_pod("p", {"cpu": "600m"}))
    assert run_filter(plugin, pod, snap).tolist() == [0]
    other = place(snap, "n", make_pod("other", {"cpu": "500m"}))
    assert run_filter(plugin, pod, snap).tolist() != [0]
    snap.remove_pod(snap.by_name["n"], other)
    assert run_filter(plugin, pod, snap).tolist() == [0]


def test_more_resources_than_code_bits_is_an_error(snap: Snapshot, handle: FakeHandle) -> None:
    pod = pod_info(make_pod("greedy", {f"example.com/r{i}": "1" for i in range(63)}))
    _, status = fit(handle).pre_filter(CycleState(), pod)
    assert status.code is Code.ERROR
    pod = pod_info(make_pod("ok", {f"example.com/r{i}": "1" for i in range(60)}))
    add_node(snap, make_node("n"), {"pods": 10, **{f"example.com/r{i}": 1 for i in range(60)}})
    assert run_filter(fit(handle), pod, snap).tolist() == [0]


def test_profiles_with_different_ignored_resources(snap: Snapshot, handle: FakeHandle) -> None:
    """A PodInfo carries each plugin instance's parsed request separately."""
    add_node(snap, make_node("n"), {"cpu": 1000, "pods": 10})
    pod = pod_info(make_pod("p", {"example.com/x": "1"}))
    assert run_filter(fit(handle), pod, snap).tolist() == [2]
    assert run_filter(fit(handle, ignoredResources=["example.com/x"]), pod, snap).tolist() == [0]


def test_events(handle: FakeHandle) -> None:
    assert [e.event for e in fit(handle).events_to_register()] == [ASSIGNED_POD_DELETE, NODE_ADD, NODE_UPDATE]


# --- scores ----------------------------------------------------------------------------------------


def fit_scores(plugin: Any, pod: PodInfo, snap: Snapshot, rows: np.ndarray | None = None) -> list[int]:
    state = CycleState()
    rows = all_rows(snap) if rows is None else rows
    assert plugin.pre_score(state, pod, rows).ok
    scores = plugin.score_batch(state, pod, rows)
    assert scores.dtype == np.int64
    return [int(s) for s in scores]


CPU_AND_MEMORY = two_containers({"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"})
CPU_ONLY = two_containers({"cpu": "1000m", "memory": "0"}, {"cpu": "2000m", "memory": "0"})
BIG_CPU_AND_MEMORY = two_containers({"cpu": "2000m", "memory": "4000"}, {"cpu": "3000m", "memory": "5000"})


@pytest.mark.parametrize(
    ("strategy", "nodes", "existing", "containers", "expected"),
    [
        # Upstream least_allocated_test.go.
        ("LeastAllocated", [(4000, 10000), (4000, 10000)], [], [], [100, 100]),
        ("LeastAllocated", [(4000, 10000), (6000, 10000)], [], CPU_AND_MEMORY, [37, 50]),
        # 70 cpu + 100 memory, and 70 cpu + 75 memory.
        ("LeastAllocated", [(10000, 20000), (10000, 20000)], [CPU_ONLY, CPU_AND_MEMORY], [], [85, 72]),
        # Requested more than capacity scores 0 for that resource.
        ("LeastAllocated", [(4000, 10000), (10000, 8000)], [], BIG_CPU_AND_MEMORY, [5, 25]),
        # Upstream most_allocated_test.go.
        ("MostAllocated", [(4000, 10000), (6000, 10000)], [], CPU_AND_MEMORY, [62, 50]),
        ("MostAllocated", [(4000, 10000), (10000, 8000)], [], BIG_CPU_AND_MEMORY, [95, 75]),
        ("MostAllocated", [(4000, 10000), (4000, 10000)], [], [], [0, 0]),
    ],
)
def test_allocated_scores(
    snap: Snapshot,
    handle: FakeHandle,
    strategy: str,
    nodes: list[tuple[int, int]],
    existing: list[list[dict[str, Any]]],
    containers: list[dict[str, Any]],
    expected: list[int],
) -> None:
    for i, (cpu, mem) in enumerate(nodes):
        add_node(snap, make_node(f"n{i}"), {"cpu": cpu, "memory": mem, "pods": 110})
    for i, cs in enumerate(existing):
        place(snap, f"n{i}", make_pod(f"e{i}", containers=cs))
    plugin = fit(
        handle, scoringStrategy={"type": strategy, "resources": [{"name": "cpu"}, {"name": "memory"}]}
    )
    assert fit_scores(plugin, pod_info(make_pod("p", containers=containers)), snap) == expected


def test_least_allocated_counts_request_less_containers_as_non_zero(
    snap: Snapshot, handle: FakeHandle
) -> None:
    """A container without requests counts as 100m cpu and 200Mi memory, on the node and in the pod."""
    add_node(snap, make_node("n"), {"cpu": 1000, "memory": 1024 * MI, "pods": 110})
    place(snap, "n", make_pod("existing", {}))
    plugin = fit(handle)
    # cpu: (1000 - 200) * 100 / 1000 = 80; memory: (1024 - 400) * 100 / 1024 = 60.
    assert fit_scores(plugin, pod_info(make_pod("p", {})), snap) == [70]
    # An explicit zero is kept: cpu 100 used, (1000-100)*100/1000 = 90; memory as above.
    assert fit_scores(plugin, pod_info(make_pod("q", {"cpu": "0"})), snap) == [75]
    # A pod without containers asks for nothing at all: 90 and 80.
    assert fit_scores(plugin, pod_info(make_pod("r")), snap) == [85]


def test_default_strategy_is_least_allocated_cpu_memory(snap: Snapshot, handle: FakeHandle) -> None:
    add_node(snap, make_node("n0"), {"cpu": 4000, "memory": 10000, "pods": 110})
    add_node(snap, make_node("n1"), {"cpu": 6000, "memory": 10000, "pods": 110})
    plugin = NodeResourcesFit(None, handle)
    assert fit_scores(plugin, pod_info(make_pod("p", containers=CPU_AND_MEMORY)), snap) == [37, 50]


def test_weights_and_extended_resources(snap: Snapshot, handle: FakeHandle) -> None:
    add_node(snap, make_node("n0"), {"cpu": 4000, "memory": 10000, "example.com/foo": 4, "pods": 110})
    add_node(snap, make_node("n1"), {"cpu": 4000, "memory": 10000, "pods": 110})
    resources = [{"name": "cpu", "weight": 1}, {"name": "example.com/foo", "weight": 3}]
    plugin = fit(handle, scoringStrategy={"type": "LeastAllocated", "resources": resources})
    pod = pod_info(make_pod("p", {"cpu": "1000m", "example.com/foo": "2"}))
    # n0: (75*1 + 50*3) / 4 = 56; n1 has no foo, so cpu alone: 75.
    assert fit_scores(plugin, pod, snap) == [56, 75]
    # A pod that does not ask for foo is scored on cpu only everywhere (cpu: 100m default -> 97).
    assert fit_scores(plugin, pod_info(make_pod("q", {"memory": "1"})), snap) == [97, 97]


def rtcr(
    handle: FakeHandle, shape: list[tuple[int, int]], resources: list[dict[str, Any]]
) -> NodeResourcesFit:
    return fit(
        handle,
        scoringStrategy={
            "type": "RequestedToCapacityRatio",
            "resources": resources,
            "requestedToCapacityRatio": {"shape": [{"utilization": u, "score": s} for u, s in shape]},
        },
    )


CPU_MEM = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]


@pytest.mark.parametrize(
    ("shape", "resources", "nodes", "requests", "expected"),
    [
        # Upstream requested_to_capacity_ratio_test.go: least-requested shape, math.Round(37.5) = 38.
        ([(0, 10), (100, 0)], CPU_MEM, [(4000, 10000), (4000, 10000)], None, [100, 100]),
        (
            [(0, 10), (100, 0)],
            CPU_MEM,
            [(4000, 10000), (6000, 10000)],
            {"cpu": "3000m", "memory": "5000"},
            [38, 50],
        ),
        # Most-requested shape.
        (
            [(0, 0), (100, 10)],
            CPU_MEM,
            [(4000, 10000), (6000, 10000)],
            {"cpu": "3000m", "memory": "5000"},
            [63, 50],
        ),
        # A falling segment truncates toward zero: 30 + (-30*20)/70 = 30 - 8 = 22 (not 21).
        (
            [(0, 10), (30, 3), (100, 0)],
            [{"name": "cpu", "weight": 1}],
            [(4000, 10000)],
            {"cpu": "2000m"},
            [22],
        ),
        # Resources scoring 0 are left out of the weighted mean: memory util 0 scores 0, cpu 50.
        ([(0, 0), (100, 10)], CPU_MEM, [(4000, 10000)], {"cpu": "2000m", "memory": "0"}, [50]),
        # Over capacity counts as full utilization.
        ([(0, 0), (100, 10)], [{"name": "cpu", "weight": 1}], [(1000, 10000)], {"cpu": "2000m"}, [100]),
        # Left of the first point takes its score.
        ([(50, 4), (100, 10)], [{"name": "cpu", "weight": 1}], [(1000, 10000)], {"cpu": "100m"}, [40]),
    ],
)
def test_requested_to_capacity_ratio(
    snap: Snapshot,
    handle: FakeHandle,
    shape: list[tuple[int, int]],
    resources: list[dict[str, Any]],
    nodes: list[tuple[int, int]],
    requests: dict[str, str] | None,
    expected: list[int],
) -> None:
    for i, (cpu, mem) in enumerate(nodes):
        add_node(snap, make_node(f"n{i}"), {"cpu": cpu, "memory": mem, "pods": 110})
    pod = pod_info(make_pod("p", requests))
    assert fit_scores(rtcr(handle, shape, resources), pod, snap) == expected


def test_rtcr_single_extended_resource(snap: Snapshot, handle: FakeHandle) -> None:
    """Upstream TestResourceBinPackingSingleExtended: util 50 -> 50 and 25 -> 25; no request -> 0."""
    add_node(snap, make_node("n0"), {"cpu": 4000, "memory": 10000, "intel.com/foo": 4, "pods": 110})
    add_node(snap, make_node("n1"), {"cpu": 4000, "memory": 10000, "intel.com/foo": 8, "pods": 110})
    plugin = rtcr(handle, [(0, 0), (100, 10)], [{"name": "intel.com/foo", "weight": 1}])
    assert fit_scores(plugin, pod_info(make_pod("p", {"intel.com/foo": "2"})), snap) == [50, 25]
    assert fit_scores(plugin, pod_info(make_pod("q", {"cpu": "1"})), snap) == [0, 0]


# --- balanced allocation ---------------------------------------------------------------------------


def balanced(handle: FakeHandle, resources: list[str] | None = None) -> NodeResourcesBalancedAllocation:
    args = {} if resources is None else {"resources": [{"name": r} for r in resources]}
    return NodeResourcesBalancedAllocation(msgspec.convert(args, NodeResourcesBalancedAllocationArgs), handle)


def test_balanced_two_resources(snap: Snapshot, handle: FakeHandle) -> None:
    """Upstream: fractions 0.75/0.5 -> std 0.125 -> 87; 0.5/0.5 -> 100."""
    add_node(snap, make_node("n0"), {"cpu": 4000, "memory": 10000, "pods": 110})
    add_node(snap, make_node("n1"), {"cpu": 6000, "memory": 10000, "pods": 110})
    assert fit_scores(balanced(handle), pod_info(make_pod("p", containers=CPU_AND_MEMORY)), snap) == [87, 100]


def test_balanced_three_resources(snap: Snapshot, handle: FakeHandle) -> None:
    """Upstream's scalar-resource case: std 0.2989 -> 70 and 0.3451 -> 65."""
    for name in ("n0", "n1"):
        add_node(snap, make_node(name), {"cpu": 3500, "memory": 40000, "nvidia.com/gpu": 8, "pods": 110})
    place(snap, "n0", make_pod("gpu-user", {"nvidia.com/gpu": "3"}))
    plugin = balanced(handle, ["cpu", "memory", "nvidia.com/gpu"])
    pod = pod_info(make_pod("p", {"cpu": "3000m", "memory": "5000", "nvidia.com/gpu": "1"}))
    assert fit_scores(plugin, pod, snap) == [70, 65]
    # Without a gpu request the gpu is left out: cpu 3000/3500, memory 5000/40000.
    expected = int((1 - abs((3000 / 3500 - 5000 / 40000) / 2)) * 100)
    assert (
        fit_scores(plugin, pod_info(make_pod("q", {"cpu": "3000m", "memory": "5000"})), snap)
        == [expected] * 2
    )


def test_balanced_uses_plain_requests_and_caps_fractions(snap: Snapshot, handle: FakeHandle) -> None:
    add_node(snap, make_node("n0"), {"cpu": 1000, "memory": 1000, "pods": 110})
    add_node(snap, make_node("n1"), {"cpu": 1000, "pods": 110})
    place(snap, "n0", make_pod("no-requests", {}))
    plugin = balanced(handle)
    # Request-less pods count as nothing here (useRequested): both fractions 0.
    assert fit_scores(plugin, pod_info(make_pod("p", {})), snap)[0] == 100
    # cpu 3000/1000 is capped at 1; memory 0 -> std 0.5 -> 50. n1 has no memory: one fraction -> 100.
    assert fit_scores(plugin, pod_info(make_pod("q", {"cpu": "3"})), snap) == [50, 100]


# --- args ------------------------------------------------------------------------------------------


def test_fit_args_defaults() -> None:
    args = NodeResourcesFitArgs()
    assert args.strategy.type == "LeastAllocated"
    assert [(r.name, r.weight) for r in args.strategy.resources] == [("cpu", 1), ("memory", 1)]
    decoded = msgspec.convert(
        {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu"}]}}, NodeResourcesFitArgs
    )
    assert [(r.name, r.weight) for r in decoded.strategy.resources] == [("cpu", 1)]
    decoded = msgspec.convert({"scoringStrategy": {"type": "MostAllocated"}}, NodeResourcesFitArgs)
    assert [r.name for r in decoded.strategy.resources] == ["cpu", "memory"]
    args.validate()


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ({"ignoredResources": ["example.com/foo"], "ignoredResourceGroups": ["example.com"]}, None),
        (
            {"ignoredResourceGroups": ["example.com/aaa"]},
            r"ignoredResourceGroups\[0\]: Invalid value: \"example.com/aaa\": "
            r"resource group name can't contain '/'",
        ),
        ({"ignoredResources": ["bad name"]}, r"ignoredResources\[0\]: Invalid value: \"bad name\""),
        (
            {"scoringStrategy": {"type": "Foo"}},
            r'scoringStrategy.type: Unsupported value: "Foo": '
            r'supported values: "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"',
        ),
        (
            {"scoringStrategy": {"resources": [{"name": "cpu"}]}},
            r'scoringStrategy.type: Unsupported value: ""',
        ),
        (
            {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 101}]}},
            r"scoringStrategy.resources\[0\].weight: Invalid value: 101: "
            r"resource weight of cpu not in valid range \(0, 100\]",
        ),
        (
            {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": -1}]}},
            r"scoringStrategy.resources\[0\].weight: Invalid value: -1",
        ),
        (
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": []},
                }
            },
            r"scoringStrategy.shape: Required value: at least one point must be specified",
        ),
        (
            {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
            r"scoringStrategy.requestedToCapacityRatio: Required value",
        ),
        (
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {
                        "shape": [{"utilization": 10, "score": 1}, {"utilization": 10, "score": 2}]
                    },
                }
            },
            r"scoringStrategy.shape\[1\].utilization: Invalid value: 10: "
            r"values must be sorted in increasing order",
        ),
        (
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": [{"utilization": 101, "score": 1}]},
                }
            },
            r"scoringStrategy.shape\[0\].utilization: Invalid value: 101: not in valid range \[0, 100\]",
        ),
        (
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 11}]},
                }
            },
            r"scoringStrategy.shape\[0\].score: Invalid value: 11: not in valid range \[0, 10\]",
        ),
        (
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {
                        "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
                    },
                }
            },
            None,
        ),
        # Several problems are reported together, as Go's aggregate does.
        (
            {"ignoredResourceGroups": ["a/b"], "scoringStrategy": {"type": "X"}},
            r"^\[ignoredResourceGroups\[0\].*, scoringStrategy.type: Unsupported value",
        ),
    ],
)
def test_fit_args_validation(handle: FakeHandle, raw: dict[str, Any], error: str | None) -> None:
    args = msgspec.convert(raw, NodeResourcesFitArgs)
    if error is None:
        args.validate()
        NodeResourcesFit(args, handle)
        return
    with pytest.raises(ArgsError, match=error):
        args.validate()
    with pytest.raises(ArgsError):
        NodeResourcesFit(args, handle)


def test_fit_args_reject_unknown_fields() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"scoringStrategy": {"type": "LeastAllocated", "typo": 1}}, NodeResourcesFitArgs)


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ({}, None),
        ({"resources": [{"name": "cpu"}, {"name": "nvidia.com/gpu", "weight": 1}]}, None),
        (
            {"resources": [{"name": "cpu", "weight": 2}]},
            r"resources\[0\].weight: Invalid value: 2: must be 1",
        ),
        ({"resources": [{"name": "cpu"}, {"name": "cpu"}]}, r'resources\[1\].name: Duplicate value: "cpu"'),
    ],
)
def test_balanced_args(handle: FakeHandle, raw: dict[str, Any], error: str | None) -> None:
    args = msgspec.convert(raw, NodeResourcesBalancedAllocationArgs)
    if error is None:
        args.validate()
        NodeResourcesBalancedAllocation(args, handle)
    else:
        with pytest.raises(ArgsError, match=error):
            args.validate()
    if not raw:
        assert [(r.name, r.weight) for r in args.resources] == [("cpu", 1), ("memory", 1)]


# --- properties: the kernels against a straightforward per-node evaluation -----------------------

SCALARS = ["example.com/gpu", "hugepages-2Mi", "kubernetes.io/batch-cpu"]


def _random_containers(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for i in range(rng.randrange(0, 3)):
        r: dict[str, str] = {}
        if rng.random() < 0.8:
            r["cpu"] = f"{rng.randrange(0, 3000)}m"
        if rng.random() < 0.8:
            r["memory"] = str(rng.randrange(0, 4 * 1024) * MI)
        if rng.random() < 0.3:
            r["ephemeral-storage"] = str(rng.randrange(0, 10) * 1024 * MI)
        for s in SCALARS:
            if rng.random() < 0.2:
                r[s] = str(rng.randrange(0, 4))
        if rng.random() < 0.1:
            r["untracked"] = "5"
        out.append(container(f"c{i}", r))
    return out


def _random_cluster(snap: Snapshot, rng: random.Random, n: int) -> None:
    # Columns exist up front: Snapshot.add_pod cannot yet take a pod that is the first to name a
    # resource (it indexes the ``used`` array it read before ``ensure_resource`` replaced it).
    for name in ["ephemeral-storage", *SCALARS, "untracked"]:
        snap.ensure_resource(name)
    for i in range(n):
        alloc = {
            "cpu": rng.choice([0, 2000, 4000, 8000, 16000]),
            "memory": rng.choice([0, 4, 8, 16]) * 1024 * MI,
            "ephemeral-storage": rng.choice([0, 50]) * 1024 * MI,
            "pods": rng.choice([0, 3, 10, 110]),
        }
        for s in SCALARS:
            if rng.random() < 0.4:
                alloc[s] = rng.randrange(0, 8)
        add_node(snap, make_node(f"n{i}"), alloc)
    placed: list[tuple[str, PodInfo]] = []
    for j in range(n * 3):
        name = f"n{rng.randrange(n)}"
        placed.append((name, place(snap, name, make_pod(f"e{j}", containers=_random_containers(rng)))))
    # Shuffle rows around and free some capacity, as a live cluster does.
    for name, p in rng.sample(placed, len(placed) // 5):
        info = snap.by_name.get(name)
        if info is not None:
            snap.remove_pod(info, p)
    for i in rng.sample(range(n), n // 10):
        snap.remove_node(f"n{i}")


def _ref_fit(info: NodeInfo, pod: PodInfo, ignored: set[str]) -> list[str]:
    reasons = []
    if len(info.pods) + 1 > info.allowed_pods:
        reasons.append("Too many pods")
    names = ["cpu", "memory", "ephemeral-storage"] + [
        n
        for n in pod.requests
        if n not in ("cpu", "memory", "ephemeral-storage") and is_scalar_resource_name(n)
    ]
    for name in names:
        amount = pod.requests.get(name, 0)
        if amount <= 0 or (is_extended_resource_name(name) and name in ignored):
            continue
        if amount > info.allocatable(name) - info.requested(name):
            reasons.append(f"Insufficient {name}")
    return reasons


def test_fit_filter_matches_reference(snap: Snapshot, handle: FakeHandle, rng: random.Random) -> None:
    _random_cluster(snap, rng, 80)
    plugin = fit(handle, ignoredResources=["example.com/gpu"])
    rejected = 0
    for k in range(80):
        pod = pod_info(make_pod(f"p{k}", containers=_random_containers(rng)))
        state = CycleState()
        assert plugin.pre_filter(state, pod)[1].ok
        rows = np.asarray(rng.sample(range(snap.n), 40), dtype=np.int64)
        codes = plugin.filter_batch(state, pod, rows)
        for row, code in zip(rows.tolist(), codes.tolist(), strict=True):
            want = _ref_fit(snap.infos[row], pod, {"example.com/gpu"})
            got = list(plugin.explain(state, pod, code).reasons) if code else []
            assert got == want, (snap.infos[row], pod.requests)
            rejected += bool(want)
    assert rejected > 100


def _ref_nonzero_pod(pod: PodInfo) -> tuple[int, int]:
    """Regular containers only (the random pods have no init containers or overhead)."""
    cpu = mem = 0
    for c in pod.pod.spec.containers:
        reqs = c.resources.requests
        cpu += int(str(reqs["cpu"]).removesuffix("m")) if "cpu" in reqs else 100
        mem += int(str(reqs["memory"])) if "memory" in reqs else 200 * MI
    return cpu, mem


def _go_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _ref_shape(p: int, shape: list[tuple[int, int]]) -> int:
    for i, (u, s) in enumerate(shape):
        if p <= u:
            if i == 0:
                return s
            pu, ps = shape[i - 1]
            return ps + _go_div((s - ps) * (p - pu), u - pu)
    return shape[-1][1]


def _ref_fit_score(
    info: NodeInfo,
    pod: PodInfo,
    strategy: str,
    resources: list[tuple[str, int]],
    shape: list[tuple[int, int]],
) -> int:
    node_cpu = sum(_ref_nonzero_pod(p)[0] for p in info.pods.values())
    node_mem = sum(_ref_nonzero_pod(p)[1] for p in info.pods.values())
    pod_cpu, pod_mem = _ref_nonzero_pod(pod)
    total = weights = 0
    for name, weight in resources:
        if name == "cpu":
            alloc, requested = info.allocatable("cpu"), node_cpu + pod_cpu
        elif name == "memory":
            alloc, requested = info.allocatable("memory"), node_mem + pod_mem
        elif name == "ephemeral-storage":
            alloc, requested = info.allocatable(name), info.requested(name) + pod.requests.get(name, 0)
        elif is_scalar_resource_name(name) and pod.requests.get(name, 0):
            alloc, requested = info.allocatable(name), info.requested(name) + pod.requests[name]
        else:
            continue
        if alloc == 0:
            continue
        if strategy == "LeastAllocated":
            score = 0 if requested > alloc else (alloc - requested) * 100 // alloc
        elif strategy == "MostAllocated":
            score = min(requested, alloc) * 100 // alloc
        else:
            util = 100 if requested > alloc else requested * 100 // alloc
            score = _ref_shape(util, [(u, s * 10) for u, s in shape])
            if score <= 0:
                continue
        total += score * weight
        weights += weight
    if weights == 0:
        return 0
    if strategy == "RequestedToCapacityRatio":
        return math.floor(Fraction(total, weights) + Fraction(1, 2))
    return total // weights


@pytest.mark.parametrize(
    ("strategy", "shape"),
    [
        ("LeastAllocated", []),
        ("MostAllocated", []),
        ("RequestedToCapacityRatio", [(0, 10), (100, 0)]),
        ("RequestedToCapacityRatio", [(10, 2), (40, 9), (70, 1), (90, 6)]),
    ],
)
def test_fit_score_matches_reference(
    snap: Snapshot, handle: FakeHandle, rng: random.Random, strategy: str, shape: list[tuple[int, int]]
) -> None:
    _random_cluster(snap, rng, 60)
    resources = [
        ("cpu", 3),
        ("memory", 1),
        ("example.com/gpu", 5),
        ("ephemeral-storage", 2),
        ("hugepages-2Mi", 1),
        ("untracked", 7),
    ]
    strategy_args: dict[str, Any] = {
        "type": strategy,
        "resources": [{"name": n, "weight": w} for n, w in resources],
    }
    if shape:
        strategy_args["requestedToCapacityRatio"] = {
            "shape": [{"utilization": u, "score": s} for u, s in shape]
        }
    plugin = fit(handle, scoringStrategy=strategy_args)
    seen: set[int] = set()
    for k in range(60):
        pod = pod_info(make_pod(f"p{k}", containers=_random_containers(rng)))
        rows = np.asarray(rng.sample(range(snap.n), 30), dtype=np.int64)
        got = fit_scores(plugin, pod, snap, rows)
        want = [_ref_fit_score(snap.infos[r], pod, strategy, resources, shape) for r in rows.tolist()]
        assert got == want
        assert all(0 <= s <= 100 for s in got)
        seen.update(got)
    assert len(seen) > 10


def _ref_balanced(info: NodeInfo, pod: PodInfo, resources: list[str]) -> int:
    fractions = []
    for name in resources:
        if is_scalar_resource_name(name) and not pod.requests.get(name, 0):
            continue
        if name not in ("cpu", "memory", "ephemeral-storage") and not is_scalar_resource_name(name):
            continue
        alloc = info.allocatable(name)
        if alloc == 0:
            continue
        fractions.append(min(1.0, (info.requested(name) + pod.requests.get(name, 0)) / alloc))
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / len(fractions))
    else:
        std = 0.0
    return int((1 - std) * 100)


def test_balanced_matches_reference(snap: Snapshot, handle: FakeHandle, rng: random.Random) -> None:
    _random_cluster(snap, rng, 60)
    resources = ["cpu", "memory", "example.com/gpu", "hugepages-2Mi", "untracked"]
    plugin = balanced(handle, resources)
    seen: set[int] = set()
    for k in range(60):
        pod = pod_info(make_pod(f"p{k}", containers=_random_containers(rng)))
        rows = np.asarray(rng.sample(range(snap.n), 30), dtype=np.int64)
        got = fit_scores(plugin, pod, snap, rows)
        assert got == [_ref_balanced(snap.infos[r], pod, resources) for r in rows.tolist()]
        seen.update(got)
    assert len(seen) > 10
