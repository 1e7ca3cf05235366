"""Score plugins that score every node alike (ConstantScorePlugin) are not called unless the scores
are shown: the totals then differ by the same amount on every feasible node, so the chosen node and
the ties are the same, and so is every placement."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from koordsched.backends.sim.loader import Cluster, LoadedObject
from koordsched.backends.sim.runner import simulate_cluster
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import load_config
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Rows
from koordsched.framework.runtime import Framework
from koordsched.framework.steps import ScoreResult
from koordsched.framework.types import PodInfo
from koordsched.plugins.registry import in_tree_registry
from koordsched.plugins.scarceresourceavoidance.plugin import ScarceResourceAvoidance
from tests.builders import node, pod

GPU = "nvidia.com/gpu"


def _cluster(gpu_node_at: int | None) -> Cluster:
    """20 CPU nodes of three sizes and 120 pods; with ``gpu_node_at``, a GPU node is among them from
    the start (ScarceResourceAvoidance then scores CPU pods differently per node)."""
    cluster = Cluster()
    for i in range(20):
        extra: dict[str, Any] = {GPU: "8"} if i == gpu_node_at else {}
        n = node(f"n{i}", cpu=str([8, 16, 32][i % 3]), memory="64Gi", **extra)
        cluster.objects.append(LoadedObject("Node", n.metadata.name, n, "node", "test"))
    for i in range(120):
        cpu, mem = [("100m", "200Mi"), ("500m", "1Gi"), ("2", "4Gi")][i % 3]
        p = pod(f"p{i}", cpu=cpu, memory=mem)
        cluster.objects.append(LoadedObject("Pod", f"default/p{i}", p, "pod", "test"))
    return cluster


def _run(cluster: Cluster, monkeypatch: Any) -> tuple[dict[str, int], list[str], dict[str, str | None]]:
    counts = {"cycles": 0, "sra_calls": 0}
    wrong: list[str] = []
    real_score = Framework.run_score
    real_sra = ScarceResourceAvoidance.score_batch

    def checking(
        self: Framework, state: CycleState, pod: PodInfo, rows: Rows, *, explain: bool = False
    ) -> ScoreResult:
        got = real_score(self, state, pod, rows, explain=explain)
        if not explain:
            shown = real_score(self, state, pod, rows, explain=True)
            diff = shown.total - got.total
            # Recorded, not asserted: the cycle would catch an AssertionError as a plugin bug.
            if len(diff) and not np.all(diff == diff[0]):
                wrong.append(pod.key)
            counts["cycles"] += 1
        return got

    def counting(self: ScarceResourceAvoidance, *args: Any) -> Any:
        counts["sra_calls"] += 1
        return real_sra(self, *args)

    monkeypatch.setattr(Framework, "run_score", checking)
    monkeypatch.setattr(ScarceResourceAvoidance, "score_batch", counting)
    registry = in_tree_registry()
    config = load_config(default_profile_path(), registry)
    result = asyncio.run(simulate_cluster(cluster, config, registry))
    return counts, wrong, {p.key: p.node for p in result.pods}


def test_constant_scores_shift_every_total_alike(monkeypatch: Any) -> None:
    counts, wrong, placed = _run(_cluster(None), monkeypatch)
    assert wrong == []
    assert counts["cycles"] > 100
    # Called only by the checking wrapper's explain=True pass: once per cycle, never by the plain one.
    assert counts["sra_calls"] == counts["cycles"]
    assert all(placed.values())


def test_a_scarce_node_makes_the_score_count(monkeypatch: Any) -> None:
    counts, wrong, _ = _run(_cluster(5), monkeypatch)
    assert wrong == []
    # Both passes call it: CPU pods score 0 on the GPU node, 100 elsewhere.
    assert counts["sra_calls"] >= 2 * counts["cycles"] - 5


def test_placements_identical_to_every_plugin_called(monkeypatch: Any) -> None:
    """The same run with constant scores added (the plugin claiming none) places every pod alike."""
    registry = in_tree_registry()
    config = load_config(default_profile_path(), registry)
    skipped = asyncio.run(simulate_cluster(_cluster(None), config, registry))
    monkeypatch.setattr(ScarceResourceAvoidance, "constant_score", lambda self, state, pod: None)
    registry = in_tree_registry()
    config = load_config(default_profile_path(), registry)
    called = asyncio.run(simulate_cluster(_cluster(None), config, registry))
    assert [(p.key, p.node) for p in skipped.pods] == [(p.key, p.node) for p in called.pods]
