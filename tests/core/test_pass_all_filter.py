"""A Filter plugin that passes every node for a pod (PassAllFilterPlugin: LoadAwareScheduling without
any NodeMetric) is left out of the search; placements are those of a run that calls it."""

from __future__ import annotations

import asyncio
from typing import Any

from koordsched.backends.sim.runner import simulate_cluster
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import load_config
from koordsched.plugins.loadaware.plugin import LoadAwareScheduling
from koordsched.plugins.registry import in_tree_registry
from tests.core.test_constant_score import _cluster


def _placements() -> list[tuple[str, str | None, dict[str, str]]]:
    registry = in_tree_registry()
    config = load_config(default_profile_path(), registry)
    result = asyncio.run(simulate_cluster(_cluster(3), config, registry))
    return [(p.key, p.node, dict(p.annotations)) for p in result.pods]


def test_left_out_without_node_metrics_and_placements_unchanged(monkeypatch: Any) -> None:
    calls = {"filter": 0}
    real = LoadAwareScheduling.filter_batch

    def counting(self: LoadAwareScheduling, *args: Any) -> Any:
        calls["filter"] += 1
        return real(self, *args)

    monkeypatch.setattr(LoadAwareScheduling, "filter_batch", counting)
    left_out = _placements()
    assert calls["filter"] == 0
    assert all(node for _, node, _ in left_out)
    monkeypatch.setattr(LoadAwareScheduling, "passes_all", lambda self, state, pod: False)
    called = _placements()
    assert calls["filter"] > 0
    assert left_out == called
