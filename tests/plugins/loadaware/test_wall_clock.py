"""Wall time: the clocks, and the simulator starting its wall clock at the newest NodeMetric."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from koordsched.backends.sim.runner import simulate
from koordsched.scheduler.clock import MonotonicClock, VirtualClock
from tests.builders import node_manifest

PROFILE = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [
        {
            "schedulerName": "koord-scheduler",
            "plugins": {
                "filter": {"enabled": [{"name": "LoadAwareScheduling"}]},
                "score": {"enabled": [{"name": "LoadAwareScheduling", "weight": 1}]},
                "reserve": {"enabled": [{"name": "LoadAwareScheduling"}]},
            },
        }
    ],
}


def test_virtual_clock_wall_moves_with_virtual_time() -> None:
    clock = VirtualClock(start=5.0, wall_start=1_000.0)
    assert clock.wall() == 1_000.0
    clock.advance(2.5)
    assert clock.now() == 7.5 and clock.wall() == 1_002.5
    clock.advance_to(100.0)
    assert clock.wall() == 1_095.0


def test_clocks_default_to_the_current_time() -> None:
    before = time.time()
    virtual = VirtualClock()
    assert before <= virtual.wall() <= time.time()
    assert before <= MonotonicClock().wall() <= time.time()


def metric(name: str, update: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": name},
        "status": {
            "updateTime": update,
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu, "memory": "1Gi"}}},
        },
    }


def pending(name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
        },
    }


def test_simulated_metrics_are_fresh_at_the_start(tmp_path: Path) -> None:
    """Metrics from 2024 are judged against a wall clock starting at the newest of them: the
    stale node (10 minutes older, past the 180 s expiry) is filtered, the fresh ones are not."""
    docs = [
        node_manifest("busy", "10", "10Gi", hostname=False, capacity=False),
        node_manifest("idle", "10", "10Gi", hostname=False, capacity=False),
        node_manifest("stale", "10", "10Gi", hostname=False, capacity=False),
        metric("busy", "2024-01-01T00:10:00Z", "9"),
        metric("idle", "2024-01-01T00:10:00Z", "1"),
        metric("stale", "2024-01-01T00:00:00Z", "0"),
        pending("small", "1"),
        # 8 cpu: 6800 + 1000 of 10000 is 78 % on the idle node; 99 % on the busy one.
        pending("huge", "8"),
    ]
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all(docs))
    profile = tmp_path / "profile.yaml"
    profile.write_text(yaml.safe_dump(PROFILE))
    result = simulate([str(cluster)], config_path=str(profile))
    small = result.pod("default/small")
    assert small.node == "idle", small.message
    huge = result.pod("default/huge")
    assert huge.node is None
    assert "1 node(s) nodeMetric expired" in huge.message
    assert "2 node(s) cpu usage exceed threshold" in huge.message
