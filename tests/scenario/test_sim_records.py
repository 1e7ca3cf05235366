"""The simulator's per-pod records, kept compact for large runs, still say what they said.

Bind records are shared by pods bound to one node without annotations; PodScheduled
conditions of bound pods are answered from the bind records; the attempt records are read
once by the report; an object's origin is kept as its file and position.
"""

from __future__ import annotations

from koordsched.api.core import PodCondition
from koordsched.backends.sim.attempts import AttemptRecorder
from koordsched.backends.sim.loader import kind_specs, load_cluster
from koordsched.backends.sim.port import BindRecord, PodConditions, fail_first_binds
from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, simulate
from koordsched.plugins.registry import in_tree_registry
from tests.scenario.helpers import WriteYaml

NODE = """
---
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}
status: {{allocatable: {{cpu: "{cpu}", memory: 4Gi, pods: "10"}}}}
"""


def _pod(name: str, cpu: str = "1", node_selector: str = "{}") -> str:
    return f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  schedulerName: koord-scheduler
  nodeSelector: {node_selector}
  containers: [{{name: c, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""


def test_plain_binds_share_one_record_per_node(write_yaml: WriteYaml) -> None:
    sel_a = "{kubernetes.io/hostname: a}"
    sel_b = "{kubernetes.io/hostname: b}"
    pods = [_pod(f"p{i}", node_selector=sel_a if i < 2 else sel_b) for i in range(3)]
    nodes = NODE.format(name="a", cpu="4") + NODE.format(name="b", cpu="4")
    result = simulate([write_yaml(nodes + "".join(pods))])
    bound = result.port.bound
    assert [(k, r.node, r.annotations) for k, r in sorted(bound.items())] == [
        ("default/p0", "a", {}),
        ("default/p1", "a", {}),
        ("default/p2", "b", {}),
    ]
    assert bound["default/p0"] is bound["default/p1"]
    assert bound["default/p2"] is not bound["default/p0"]
    assert [r.node for r in result.pods] == ["a", "a", "b"]


def test_conditions_latest_write_wins(write_yaml: WriteYaml) -> None:
    nodes = NODE.format(name="a", cpu="2")
    path = write_yaml(nodes + _pod("web") + _pod("big", cpu="3"))
    result = simulate([path], bind_hook=fail_first_binds(["default/web"], "etcd timeout"))
    conditions = result.port.conditions
    # web failed its first bind (a False condition), then was bound: True wins.
    assert conditions["default/web"].status == "True"
    assert conditions["default/web"].type == "PodScheduled"
    big = conditions["default/big"]
    assert (big.status, big.reason) == ("False", "Unschedulable")
    assert sorted(conditions) == ["default/big", "default/web"]
    assert len(conditions) == 2
    assert "default/none" not in conditions
    assert result.pod("default/web").attempts == 2
    assert result.pod("default/big").status == UNSCHEDULABLE


def test_pod_conditions_mapping() -> None:
    bound: dict[str, BindRecord] = {}
    conditions = PodConditions(bound)
    failed = PodCondition(type="PodScheduled", status="False", reason="Unschedulable", message="no")
    conditions.failed("ns/a", failed)
    assert dict(conditions) == {"ns/a": failed}
    bound["ns/a"] = BindRecord("n1")
    conditions.scheduled("ns/a")
    assert conditions["ns/a"].status == "True"
    # A Reservation's bind is recorded beside the pods' but is no pod's condition.
    bound["Reservation/r"] = BindRecord("n1")
    conditions.stand_in_bound("Reservation/r")
    assert list(conditions) == ["ns/a"]
    # Failed again later (a pod recreated under the same name): the failure is the latest.
    conditions.failed("ns/a", failed)
    assert conditions["ns/a"] is failed
    assert len(conditions) == 1


def test_attempts_drained_in_order(write_yaml: WriteYaml) -> None:
    recorder = AttemptRecorder()
    assert list(recorder.drain()) == []
    result = simulate([write_yaml(NODE.format(name="a", cpu="2") + _pod("x") + _pod("y"))])
    assert [(p.name, p.status, p.attempts) for p in result.pods] == [("x", SCHEDULED, 1), ("y", SCHEDULED, 1)]


def test_recorder_drain_lets_go() -> None:
    from koordsched.backends.sim.attempts import Attempt

    recorder = AttemptRecorder()
    recorder.attempts = [Attempt("ns/a", "u1", "scheduled"), Attempt("ns/b", "u2", "error")]
    drained = recorder.drain()
    first = next(drained)
    assert first.key == "ns/a"
    assert recorder.attempts == []
    assert [a.key for a in drained] == ["ns/b"]


def test_origin_is_put_together_when_asked(write_yaml: WriteYaml) -> None:
    listed = """
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: b}}
- {apiVersion: v1, kind: Node, metadata: {name: c}}
"""
    path = write_yaml("apiVersion: v1\nkind: Node\nmetadata: {name: a}\n" + listed)
    cluster = load_cluster([path], kind_specs(in_tree_registry()))
    nodes = [o for o in cluster.objects if o.kind == "Node"]
    assert [o.origin for o in nodes] == [
        f"{path}: document 1",
        f"{path}: document 2 item 1",
        f"{path}: document 2 item 2",
    ]
    # One path string for every object of the file.
    assert nodes[0].source is nodes[2].source
