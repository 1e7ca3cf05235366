"""Bit masks, hint merging, the three policies (golden reason strings) and Admit with fake providers."""

from __future__ import annotations

import numpy as np
import pytest

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.plugins.topologymanager import bitmask, manager
from koordsched.plugins.topologymanager.interface import (
    AFFINITY_STORE_KEY,
    AffinityStore,
    NUMATopologyHint,
    TopologyHints,
    affinity_store,
)
from koordsched.plugins.topologymanager.merge import (
    NUMA_SHARED,
    NUMA_SINGLE,
    filter_providers_hints,
    merge_filtered_hints,
)
from koordsched.plugins.topologymanager.policy import merge
from tests.plugins.numa.helpers import FakeGPUProvider, make_node, make_pod, pod_info


def H(mask: int | None, preferred: bool, score: int = 0) -> NUMATopologyHint:
    return NUMATopologyHint(mask, preferred, score)


# --- bitmask -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mask", "text"),
    [(1, "01"), (2, "10"), (3, "11"), (4, "100"), (5, "0101"), (15, "1111"), (16, "10000"), (None, "<nil>")],
)
def test_bitmask_string_as_go_prints_it(mask: int | None, text: str) -> None:
    assert bitmask.to_string(mask) == text


def test_bitmask_helpers() -> None:
    assert bitmask.from_bits([0, 2]) == 5
    assert bitmask.bits_of(5) == [0, 2]
    assert list(bitmask.iterate_masks([0, 1, 2])) == [1, 2, 4, 3, 5, 6, 7]
    assert bitmask.is_narrower(1, 3) and bitmask.is_narrower(1, 2) and not bitmask.is_narrower(2, 1)
    with pytest.raises(ValueError):
        bitmask.from_bits([64])


# --- merge ---------------------------------------------------------------------------------------


def test_filter_providers_hints() -> None:
    filtered, reasons, summary = filter_providers_hints(
        [None, {"cpu": None, "memory": [], "gpu": [H(1, True), H(3, False)]}]
    )
    assert filtered[0] == [H(None, True)]
    assert filtered[1] == [H(None, True)]
    assert filtered[2] == [NUMATopologyHint(None, False, unsatisfied=True)]
    assert reasons == ["Unsatisfied NUMA memory"]
    assert summary.lines() == ["gpu prefer [01] among [01 11]"]


MERGE_CASES = [
    ("narrowest preferred wins", [[H(1, True), H(2, True), H(3, False)]], {}, "", H(1, True)),
    ("higher score among equal width", [[H(1, True, 1), H(2, True, 5)]], {}, "", H(2, True, 5)),
    ("preferred beats narrower", [[H(1, False), H(3, True)]], {}, "", H(3, True)),
    ("different affinities are not preferred", [[H(1, True)], [H(3, True)]], {}, "", H(1, False)),
    ("scores of equal hints add up", [[H(1, True, 2)], [H(1, True, 3)]], {}, "", H(1, True, 5)),
    ("no preference keeps all nodes preferred", [[H(None, True)]], {}, "", H(3, True)),
    (
        "Required: a single node shared with multi-NUMA pods is not preferred",
        [[H(1, True), H(2, True)]],
        {0: NUMA_SHARED},
        "Required",
        H(2, True),
    ),
    (
        "Required: a multi-node mask may not include a single-NUMA node",
        [[H(3, True)]],
        {0: NUMA_SINGLE},
        "Required",
        H(3, False),
    ),
    (
        "Preferred: steers to the node that keeps exclusivity",
        [[H(1, True, 5), H(2, True, 0)]],
        {0: NUMA_SHARED},
        "Preferred",
        H(2, True),
    ),
    (
        "Preferred: never rejects when nothing keeps exclusivity",
        [[H(1, True)]],
        {0: NUMA_SHARED},
        "Preferred",
        H(1, True),
    ),
]


@pytest.mark.parametrize(
    ("filtered", "statuses", "exclusive", "expected"),
    [c[1:] for c in MERGE_CASES],
    ids=[c[0] for c in MERGE_CASES],
)
def test_merge_filtered_hints(
    filtered: list[list[NUMATopologyHint]],
    statuses: dict[int, str],
    exclusive: str,
    expected: NUMATopologyHint,
) -> None:
    best = merge_filtered_hints([0, 1], filtered, exclusive, statuses)
    assert (best.affinity, best.preferred, best.score) == (
        expected.affinity,
        expected.preferred,
        expected.score,
    )


def test_unsatisfied_when_merge_loses_nodes() -> None:
    # cpu only fits on both nodes, gpu prefers node 0: the merged mask drops a node cpu needs.
    best = merge_filtered_hints([0, 1], [[H(3, True)], [H(1, True)]], "", {})
    assert best.affinity == 1 and best.unsatisfied and not best.preferred


# --- policies ------------------------------------------------------------------------------------

NUMA_ONLY_BOTH: TopologyHints = {"cpu": [H(3, True)], "memory": [H(3, True)]}
GPU_EITHER: TopologyHints = {"koordinator.sh/gpu": [H(1, True), H(2, True), H(3, False)]}


def test_restricted_unaligned_reason() -> None:
    result = merge("Restricted", [0, 1], [NUMA_ONLY_BOTH, GPU_EITHER], "", {})
    assert not result.admit
    assert result.reasons == (
        "Unaligned NUMA Hint cause cpu prefer [11] among [11] & koordinator.sh/gpu prefer [01 10] among "
        "[01 10 11] & memory prefer [11] among [11]",
    )


def test_single_numa_node_unaligned_reason() -> None:
    result = merge("SingleNUMANode", [0, 1], [NUMA_ONLY_BOTH, GPU_EITHER], "", {})
    assert not result.admit and result.hint.affinity is None
    assert result.reasons == (
        "Unaligned NUMA Hint cause cpu prefer [11] among [11],koordinator.sh/gpu prefer [01 10] among "
        "[01 10 11],memory prefer [11] among [11]",
    )


def test_unsatisfied_resource_reason() -> None:
    for policy in ("Restricted", "SingleNUMANode"):
        result = merge(policy, [0, 1], [{"cpu": []}], "", {})
        assert not result.admit and result.reasons == ("Unsatisfied NUMA cpu",)


def test_best_effort_always_admits_and_unsatisfied_means_all_nodes() -> None:
    result = merge("BestEffort", [0, 1], [NUMA_ONLY_BOTH, {"gpu": [H(1, True)]}], "", {})
    assert result.admit and result.hint.affinity == 3
    result = merge("BestEffort", [0, 1], [{"cpu": [H(2, True)]}], "", {})
    assert result.admit and result.hint == H(2, True)


def test_restricted_admits_aligned() -> None:
    aligned: TopologyHints = {"cpu": [H(1, True), H(2, True), H(3, True)]}
    result = merge("Restricted", [0, 1], [aligned, GPU_EITHER], "", {})
    assert result.admit and result.hint.affinity == 1 and result.hint.preferred


def test_single_numa_node_on_one_node_machine_has_no_affinity() -> None:
    result = merge("SingleNUMANode", [0], [{"cpu": [H(1, True)]}], "", {})
    assert result.admit and result.hint.affinity is None


def test_unknown_policy() -> None:
    with pytest.raises(ValueError):
        merge("Foo", [0, 1], [], "", {})


# --- Admit ---------------------------------------------------------------------------------------


class StaticProvider:
    def __init__(self, name: str, hints: TopologyHints | None, status: Status = SUCCESS) -> None:
        self.name = name
        self.hints = hints
        self.status = status
        self.hint_calls = 0
        self.allocations: list[NUMATopologyHint] = []
        self.allocate_status = SUCCESS

    def get_pod_topology_hints(self, state, pod, node):  # type: ignore[no-untyped-def]
        self.hint_calls += 1
        return self.hints, self.status

    def allocate(self, state, pod, node, affinity):  # type: ignore[no-untyped-def]
        self.allocations.append(affinity)
        return self.allocate_status


def _node():  # type: ignore[no-untyped-def]
    snap = Snapshot()
    return snap.add_node(make_node("n1"), {"cpu": 1000})


def test_admit_stores_and_reuses_the_affinity() -> None:
    node, pod, state = _node(), pod_info(make_pod()), CycleState()
    cpu = StaticProvider("NodeNUMAResource", {"cpu": [H(1, True), H(2, True), H(3, True)]})
    gpu = FakeGPUProvider({0: 1, 1: 4}, want=2)
    status = manager.admit(state, pod, node, [0, 1], "Restricted", "", {}, [cpu, gpu])
    assert status.ok
    assert affinity_store(state).by_node["n1"].affinity == 2  # the GPUs only fit on node 1
    assert cpu.allocations[-1].affinity == 2 and gpu.allocated[-1] == ("n1", 2)
    status = manager.admit(state, pod, node, [0, 1], "Restricted", "", {}, [cpu, gpu])
    assert status.ok and cpu.hint_calls == 1 and len(cpu.allocations) == 2
    assert isinstance(state.get(AFFINITY_STORE_KEY).by_node["n1"], NUMATopologyHint)


def test_admit_provider_error_is_a_reason() -> None:
    node, pod, state = _node(), pod_info(make_pod()), CycleState()
    bad = StaticProvider("DeviceShare", None, Status.unschedulable("Insufficient NUMA Scoped Devices"))
    status = manager.admit(state, pod, node, [0, 1], "BestEffort", "", {}, [bad])
    assert status.code is Code.UNSCHEDULABLE and status.reasons == ("Insufficient NUMA Scoped Devices",)
    assert "n1" not in affinity_store(state).by_node


def test_admit_allocation_failure_stores_nothing() -> None:
    node, pod, state = _node(), pod_info(make_pod()), CycleState()
    cpu = StaticProvider("NodeNUMAResource", {"cpu": [H(1, True)]})
    cpu.allocate_status = Status.unschedulable("Insufficient NUMA cpu")
    status = manager.admit(state, pod, node, [0, 1], "Restricted", "", {}, [cpu])
    assert status.reasons == ("Insufficient NUMA cpu",)
    assert "n1" not in affinity_store(state).by_node


def test_admit_recompute() -> None:
    node, pod, state = _node(), pod_info(make_pod()), CycleState()
    cpu = StaticProvider("NodeNUMAResource", {"cpu": [H(1, True)]})
    assert manager.admit(state, pod, node, [0, 1], "Restricted", "", {}, [cpu]).ok
    cpu.hints = {"cpu": [H(2, True)]}
    assert manager.admit(state, pod, node, [0, 1], "Restricted", "", {}, [cpu], recompute=True).ok
    assert affinity_store(state).by_node["n1"].affinity == 2


def test_admit_provider_exception_does_not_escape() -> None:
    node, pod, state = _node(), pod_info(make_pod()), CycleState()

    class Broken(StaticProvider):
        def get_pod_topology_hints(self, state, pod, node):  # type: ignore[no-untyped-def]
            raise RuntimeError("boom")

    status = manager.admit(state, pod, node, [0, 1], "Restricted", "", {}, [Broken("X", None)])
    assert status.code is Code.UNSCHEDULABLE and status.reasons == ("boom",)


# --- the affinity store's rows -------------------------------------------------------------------


class _Layout:
    def __init__(self) -> None:
        self.layout_version = 0


def test_store_rows_and_names_agree() -> None:
    snap = Snapshot()
    for i in range(4):
        snap.add_node(make_node(f"n{i}"), {"cpu": 1000})
    layout = _Layout()
    table = [H(1, True), H(2, True)]
    store = AffinityStore()
    assert store.empty
    store.set_rows(
        snap, layout, np.asarray([1, 3], dtype=np.int64), np.asarray([0, 1], dtype=np.int64), table
    )
    store.set("n0", H(3, False))
    assert not store.empty
    assert [store.get(f"n{i}") for i in range(4)] == [H(3, False), H(1, True), None, H(2, True)]
    rows = np.asarray([3, 2, 1, 0], dtype=np.int64)
    assert store.admitted(snap, rows).tolist() == [True, False, True, True]
    clone = store.clone()
    # A node removed: rows move (n3 now sits in row 1); the entries keep their nodes.
    snap.remove_node("n1")
    layout.layout_version += 1
    assert store.get("n3") == H(2, True) and store.get("n1") == H(1, True)
    assert store.admitted(snap, np.arange(snap.n, dtype=np.int64)).tolist() == [True, True, False]
    assert clone.by_node == {"n0": H(3, False), "n1": H(1, True), "n3": H(2, True)}
    assert clone.signature is None


def test_reading_by_node_forgets_the_signature() -> None:
    store = AffinityStore()
    store.signature = ("pod", "providers")
    store.by_node["n1"] = H(1, True)
    assert store.signature is None and store.get("n1") == H(1, True)
