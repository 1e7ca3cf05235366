"""kube-scheduler's per-pod V(2) lines, from a scheduling run through the simulator."""

from __future__ import annotations

import json

import pytest

from koordsched.backends.sim.runner import simulate
from koordsched.observability import logs
from tests.scenario.helpers import WriteYaml
from tests.unit.test_logs import lines, parse_klog, restore_logging

__all__ = ["restore_logging"]  # the fixture, used by name

CLUSTER = """
apiVersion: v1
kind: Node
metadata: {name: big, labels: {kubernetes.io/hostname: big}}
status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: small, labels: {kubernetes.io/hostname: small}}
status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  schedulerName: koord-scheduler
  containers: [{name: c, resources: {requests: {cpu: "8"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: huge, namespace: shop}
spec:
  schedulerName: koord-scheduler
  containers: [{name: c, resources: {requests: {cpu: "64"}}}]
"""

BOUND = "Successfully bound pod to node"
NO_FIT = "Unable to schedule pod; no fit; waiting"


def test_v2_logs_each_bind_and_each_unschedulable_pod(
    restore_logging: None, write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure(verbosity=2, flush_frequency=0)
    result = simulate([write_yaml(CLUSTER)])
    parsed = [parse_klog(ln) for ln in lines(capsys)]
    per_pod = [p for p in parsed if p["msg"] in (BOUND, NO_FIT)]
    (huge,) = [r for r in result.pods if r.key == "shop/huge"]
    assert huge.message.startswith("0/2 nodes are available: 2 Insufficient cpu.")
    assert [(p["sev"], p["file"], p["msg"], p["kv"]) for p in per_pod] == [
        (
            "I",
            "binding_cycle.py",
            BOUND,
            {"pod": "shop/web", "node": "big", "evaluatedNodes": "2", "feasibleNodes": "1"},
        ),
        ("I", "schedule_one.py", NO_FIT, {"pod": "shop/huge", "err": huge.message}),
    ]
    assert all(p["quoted"] for p in per_pod)


def test_the_same_lines_in_json(
    restore_logging: None, write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure(fmt="json", verbosity=2, flush_frequency=0)
    simulate([write_yaml(CLUSTER)])
    out = [json.loads(ln) for ln in lines(capsys)]
    bound = [o for o in out if o["msg"] == BOUND]
    assert [{k: v for k, v in o.items() if k not in ("ts", "caller")} for o in bound] == [
        {
            "msg": BOUND,
            "v": 2,
            "pod": {"name": "web", "namespace": "shop"},
            "node": "big",
            "evaluatedNodes": 2,
            "feasibleNodes": 1,
        }
    ]
    (no_fit,) = [o for o in out if o["msg"] == NO_FIT]
    assert list(no_fit) == ["ts", "caller", "msg", "v", "pod", "err"]
    assert no_fit["caller"].startswith("scheduler/schedule_one.py:")


@pytest.mark.parametrize("verbosity", [0, 1])
def test_below_v2_there_are_no_per_pod_lines(
    restore_logging: None, write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str], verbosity: int
) -> None:
    logs.configure(verbosity=verbosity, flush_frequency=0)
    simulate([write_yaml(CLUSTER)])
    assert not [ln for ln in lines(capsys) if BOUND in ln or NO_FIT in ln]
