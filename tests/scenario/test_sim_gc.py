"""The simulator changes the cyclic collector's thresholds for its loop only."""

from __future__ import annotations

import gc

from koordsched.api.core import Pod
from koordsched.backends.sim.runner import SCHEDULED, simulate
from tests.scenario.helpers import WriteYaml

CLUSTER = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status:
  allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  schedulerName: koord-scheduler
  containers:
  - name: c
    resources: {requests: {cpu: "1"}}
"""


def test_gc_thresholds_are_restored(write_yaml: WriteYaml) -> None:
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []

    def bind_hook(pod: Pod, node: str) -> str | None:
        seen.append(gc.get_threshold())
        return None

    result = simulate([write_yaml(CLUSTER)], bind_hook=bind_hook)
    assert result.pod("default/p").status == SCHEDULED
    assert seen and seen[0] != before  # raised while the loop ran
    assert gc.get_threshold() == before
    assert not gc.get_freeze_count()
