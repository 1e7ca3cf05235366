"""Skipping a plugin's Reserve, Unreserve, Permit, PreBind and PostBind for a pod it said at
PreFilter it has nothing to do for (``CycleState.skip_binding``: DeviceShare and NodeNUMAResource
for pods they skip, Coscheduling for pods in no gang, Reservation with no reservation in the
cluster) changes no decision: every example, and a cluster mixing gang, GPU, cpuset and plain
pods, schedules the same pods to the same nodes with the same annotations, messages and attempts
through ``simulate`` with the skips honoured and with every plugin called."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from koordsched.backends.sim.runner import SimResult, simulate
from koordsched.framework import cycle_state
from tests.scenario.helpers import WriteYaml

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


class _Counting(set[str]):
    """A skip set that records what was added (so the test knows the skips were taken)."""

    added: list[str] = []

    def add(self, name: str) -> None:
        _Counting.added.append(name)
        super().add(name)


class _Ignoring(set[str]):
    """A skip set that keeps nothing: every plugin is called at every binding-side point."""

    def add(self, name: str) -> None:
        return None


def _outcome(result: SimResult) -> dict[str, tuple[Any, ...]]:
    return {p.key: (p.status, p.node, p.message, p.annotations, p.attempts) for p in result.pods}


def _run(monkeypatch: pytest.MonkeyPatch, paths: list[Path], skip_set: type[set[str]]) -> SimResult:
    original = cycle_state.CycleState.__init__

    def init(self: cycle_state.CycleState) -> None:
        original(self)
        self.skip_binding = skip_set()

    with monkeypatch.context() as m:
        m.setattr(cycle_state.CycleState, "__init__", init)
        return simulate(paths)


MIXED = """
apiVersion: v1
kind: Node
metadata: {name: n0, labels: {kubernetes.io/hostname: n0}}
status:
  allocatable: {cpu: "8", memory: 16Gi, pods: "110"}
---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status:
  allocatable: {cpu: "8", memory: 16Gi, pods: "110"}
---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata: {name: g, namespace: default}
spec: {minMember: 2}
""" + "".join(
    f"""
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels: {labels}
spec:
  schedulerName: koord-scheduler
  containers:
    - name: c
      resources: {{requests: {{cpu: "{cpu}", memory: 1Gi}}}}
"""
    for name, labels, cpu in [
        ("plain-a", "{}", "1"),
        ("gang-a", "{pod-group.scheduling.sigs.k8s.io: g}", "2"),
        ("plain-b", "{}", "500m"),
        ("gang-b", "{pod-group.scheduling.sigs.k8s.io: g}", "2"),
        ("big", "{}", "7"),
        ("too-big", "{}", "9"),
    ]
)


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples_place_the_same(monkeypatch: pytest.MonkeyPatch, example: Path) -> None:
    # (Some examples name a profile without the plugins that skip; the mixed cluster below
    # checks the skips are taken.)
    skipping = _outcome(_run(monkeypatch, [example], _Counting))
    calling = _outcome(_run(monkeypatch, [example], _Ignoring))
    assert skipping == calling


def test_gang_and_plain_pods_place_the_same(monkeypatch: pytest.MonkeyPatch, write_yaml: WriteYaml) -> None:
    path = write_yaml(MIXED)
    _Counting.added = []
    skipping = _outcome(_run(monkeypatch, [path], _Counting))
    calling = _outcome(_run(monkeypatch, [path], _Ignoring))
    assert skipping == calling
    # The gang's members still go through Coscheduling's Permit: both are placed together.
    assert skipping["default/gang-a"][0] == skipping["default/gang-b"][0] == "Scheduled"
    assert skipping["default/too-big"][0] == "Unschedulable"
    # Coscheduling skipped for the four pods in no gang (each attempt), never for a gang member.
    assert _Counting.added.count("Coscheduling") >= 4
