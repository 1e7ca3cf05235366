"""Quantities the int64 columns cannot hold, through `simulate` as users run it.

A bound pod's negative or overflowing request never frees capacity; a node whose allocatable
is beyond int64 is left out with a warning; a pending pod asking beyond int64 is told why.
"""

from __future__ import annotations

from typing import Any

from koordsched.backends.sim.runner import simulate
from tests.builders import node_manifest, pod_manifest, yaml_docs
from tests.scenario.helpers import WriteYaml


def node(name: str, cpu: str = "2", memory: str = "8Gi", pods: str = "110") -> dict[str, Any]:
    return node_manifest(name, cpu, memory, pods, hostname=False, capacity=False)


def pod(name: str, cpu: str, node_name: str = "") -> dict[str, Any]:
    return pod_manifest(name, cpu, None, uid="", node_name=node_name)


def cluster(*docs: dict[str, Any]) -> str:
    return yaml_docs(*docs)


def test_a_bound_pod_with_a_negative_request_frees_nothing(write_yaml: WriteYaml) -> None:
    # Before: the -4 cpu were subtracted from the node's requested cpu, and all six landed on 2 cpus.
    path = write_yaml(cluster(node("n1"), pod("bound", "-4", "n1"), *(pod(f"p{i}", "1") for i in range(6))))
    result = simulate([path])
    placed = [p.name for p in result.pods if p.node == "n1"]
    assert len(placed) == 2
    for p in result.pods:
        if p.node is None:
            # No pod has a lower priority to preempt (DefaultPreemption says so).
            assert p.message == (
                "0/1 nodes are available: 1 Insufficient cpu."
                " preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.."
            )


def test_a_bound_pod_beyond_int64_fills_its_node_and_nothing_crashes(write_yaml: WriteYaml) -> None:
    # Before: OverflowError in Snapshot.add_pod, a traceback out of `simulate`.
    path = write_yaml(cluster(node("n1", cpu="64"), node("n2"), pod("bound", "1e18", "n1"), pod("p", "1")))
    result = simulate([path])
    assert result.pod("default/p").node == "n2"
    requested, allocatable = next(n for n in result.nodes if n.name == "n1").resources["cpu"]
    assert requested >= allocatable


def test_a_pending_pod_beyond_int64_is_told_why(write_yaml: WriteYaml) -> None:
    # Before: "Python int too large to convert to C long".
    path = write_yaml(cluster(node("n1"), pod("huge", "1e18"), pod("fine", "1")))
    result = simulate([path])
    huge = result.pod("default/huge")
    assert huge.node is None
    assert huge.message == (
        "invalid resource quantity: container 'c': resource 'cpu': quantity '1e18' is too large: "
        "1000000000000000000000 milli-units is above the int64 maximum 9223372036854775807"
    )
    assert result.pod("default/fine").node == "n1"


def test_a_pending_pod_with_a_negative_request_is_told_why(write_yaml: WriteYaml) -> None:
    path = write_yaml(cluster(node("n1"), pod("neg", "-1")))
    neg = simulate([path]).pod("default/neg")
    assert neg.node is None
    assert neg.message == (
        "invalid resource quantity: container 'c': resource 'cpu': invalid quantity '-1': "
        "must be greater than or equal to 0"
    )


def test_nodes_whose_allocatable_is_beyond_int64_are_left_out_by_name(write_yaml: WriteYaml) -> None:
    # Before: OverflowError in Snapshot._write_node_row.
    path = write_yaml(
        cluster(
            node("big-memory", memory="8Ei"),
            node("many-pods", pods="99999999999999999999"),
            node("fine"),
            pod("p", "1"),
        )
    )
    result = simulate([path])
    assert result.pod("default/p").node == "fine"
    assert (
        "node big-memory: invalid status.allocatable: resource 'memory': quantity '8Ei' is too large: "
        "9223372036854775808 is above the int64 maximum 9223372036854775807"
    ) in result.warnings
    assert any(
        w.startswith("node many-pods: invalid status.allocatable: resource 'pods'") for w in result.warnings
    )


METRIC = """
apiVersion: slo.koordinator.sh/v1alpha1
kind: NodeMetric
metadata: {{name: {name}}}
status:
  updateTime: "2024-01-01T00:00:00Z"
  nodeMetric:
    nodeUsage:
      resources: {{cpu: "1", memory: 1Gi}}
"""

LIMITED_POD = """
apiVersion: v1
kind: Pod
metadata: {name: bound}
spec:
  nodeName: n1
  schedulerName: koord-scheduler
  containers:
  - name: c
    resources:
      requests: {cpu: "1"}
      limits: {cpu: "1e18"}
"""


def test_a_bound_pods_limit_beyond_int64_stops_no_one(write_yaml: WriteYaml) -> None:
    # Before: LoadAwareScheduling's estimate of the bound pod (from its limit) overflowed its int64
    # rows, and every pod failed with "internal error: Python int too large to convert to C long".
    path = write_yaml(
        cluster(
            node("n1", cpu="8"),
            node("n2", cpu="8"),
            METRIC.format(name="n1"),
            METRIC.format(name="n2"),
            LIMITED_POD,
            pod("p", "1"),
        )
    )
    result = simulate([path])
    assert result.pod("default/p").node == "n2"
