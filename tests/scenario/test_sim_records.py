"""The simulator's per-pod records, kept compact for large runs, still say what they said.

Bind records are shared by pods bound to one node without annotations; PodScheduled
conditions of bound pods are answered from the bind records; attempts are counted per pod
rather than recorded one by one; an object's origin is kept as its file and position.
"""

from __future__ import annotations

import msgspec
import yaml

from koordsched.api.core import Pod, PodCondition
from koordsched.backends.sim.attempts import AttemptRecorder, Explanation
from koordsched.backends.sim.loader import kind_specs, load_cluster
from koordsched.backends.sim.port import BindRecord, PodConditions, fail_first_binds
from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, simulate
from koordsched.framework.types import PodInfo
from koordsched.plugins.registry import in_tree_registry
from tests.builders import pod_manifest, yaml_doc
from tests.scenario.helpers import WriteYaml

NODE = """
---
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}
status: {{allocatable: {{cpu: "{cpu}", memory: 4Gi, pods: "10"}}}}
"""


def _pod(name: str, cpu: str = "1", node_selector: str = "{}") -> str:
    """A pod document; ``node_selector`` is a YAML flow mapping."""
    return yaml_doc(pod_manifest(name, cpu, None, uid="", nodeSelector=yaml.safe_load(node_selector)))


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


def test_attempts_counted_per_pod(write_yaml: WriteYaml) -> None:
    nodes = NODE.format(name="a", cpu="3")
    path = write_yaml(nodes + _pod("x") + _pod("y") + _pod("web"))
    result = simulate([path], bind_hook=fail_first_binds(["default/web"], "etcd timeout"))
    got = [(p.name, p.status, p.attempts) for p in result.pods]
    assert got == [("x", SCHEDULED, 1), ("y", SCHEDULED, 1), ("web", SCHEDULED, 2)]


def _info(name: str) -> PodInfo:
    return PodInfo(
        msgspec.convert({"metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"}}, Pod), {}
    )


def test_recorder_keeps_counts_latest_explanation_and_last() -> None:
    recorder = AttemptRecorder(explain=True)
    a, b = _info("a"), _info("b")
    first = Explanation([{"node": "n1"}])
    recorder.attempted(a, "unschedulable", None, "no fit", first)
    recorder.attempted(b, "scheduled", "n2", "", None)
    recorder.attempted(a, "scheduled", "n1", "", Explanation([{"node": "n3"}]))
    assert recorder.counts == {"ns/a": 2, "ns/b": 1}
    assert recorder.explanations == {"ns/a": [{"node": "n3"}], "ns/b": []}
    last = recorder.last
    assert last is not None and (last.key, last.result, last.node) == ("ns/a", "scheduled", "n1")
    # Another pod's binding leaves the latest attempt alone; its own binding updates it.
    recorder.binding_ended(b, "error", "bind failed")
    assert (last.result, last.node) == ("scheduled", "n1")
    recorder.binding_ended(a, "error", "bind failed")
    assert (last.result, last.node, last.message) == ("error", None, "bind failed")
    # Without explain nothing but the counts is kept per pod.
    plain = AttemptRecorder()
    plain.attempted(a, "scheduled", "n1", "", first)
    assert (plain.counts, plain.explanations) == ({"ns/a": 1}, {})


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
