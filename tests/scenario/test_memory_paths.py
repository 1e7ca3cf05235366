"""What the simulator keeps per pod was made smaller (issue 16): the results must not change.

``--output json`` is written pod by pod (``report.write_json``) and must be the very text
``json.dumps(to_json(result), indent=2)`` gives; pods of one template share their spec and
requests, and a bound pod's copy shares its spec and status with its node's neighbours, yet
each pod's result stays its own (annotations, attempts, messages).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from koordsched.backends.sim.report import render_json, to_json, write_json
from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, simulate
from tests.scenario.helpers import WriteYaml

NODES = """
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: "1", memory: 4Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}
status: {allocatable: {cpu: "1", memory: 4Gi, pods: "110"}}
"""


def web(i: int, cpu: str = "300m") -> str:
    return f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: web-{i}, namespace: shop, labels: {{app: web}}}}
spec:
  schedulerName: koord-scheduler
  containers: [{{name: c, resources: {{requests: {{cpu: {cpu}}}}}}}]
"""


def test_json_written_pod_by_pod_is_the_same_text(write_yaml: WriteYaml) -> None:
    path = write_yaml(NODES + "".join(web(i) for i in range(8)) + web(99, cpu="2"))
    for explain in (False, True):
        result = simulate([path], explain=explain)
        expected = json.dumps(to_json(result), indent=2) + "\n"
        out = io.StringIO()
        write_json(result, out)
        assert out.getvalue() == expected
        assert render_json(result) == expected
        assert json.loads(expected)["summary"]["scheduled"] == 6


def test_json_without_pods_is_the_same_text(write_yaml: WriteYaml) -> None:
    result = simulate([write_yaml(NODES)])
    assert not result.pods
    assert render_json(result) == json.dumps(to_json(result), indent=2) + "\n"


def test_pods_sharing_a_template_keep_their_own_results(write_yaml: WriteYaml) -> None:
    result = simulate([write_yaml(NODES + "".join(web(i) for i in range(8)) + web(99, cpu="2"))])
    by_status: dict[str, list[str]] = {}
    for p in result.pods:
        by_status.setdefault(p.status, []).append(p.name)
    # 1 CPU per node, 300m each: three per node fit; the 2-CPU pod fits nowhere.
    assert len(by_status[SCHEDULED]) == 6
    assert sorted(by_status[UNSCHEDULABLE]) == ["web-6", "web-7", "web-99"]
    assert {p.node for p in result.pods if p.status == SCHEDULED} == {"n1", "n2"}
    assert all(p.attempts >= 1 for p in result.pods)
    big = result.pod("shop/web-99")
    assert big.message.startswith("0/2 nodes are available: 2 Insufficient cpu.")
    # The port's bound copies: their own node, one spec per (template, node), the pod's own name.
    port = result.port
    bound = [port.pods[f"shop/{name}"] for name in by_status[SCHEDULED]]
    assert all(b.spec.node_name == result.pod(b.key).node for b in bound)
    on_n1 = [b for b in bound if b.spec.node_name == "n1"]
    assert len(on_n1) == 3 and all(b.spec is on_n1[0].spec for b in on_n1)
    assert all(b.status.conditions[-1].type == "PodScheduled" for b in bound)
    pending = [port.pods[f"shop/{name}"] for name in by_status[UNSCHEDULABLE]]
    assert all(not p.spec.node_name for p in pending)


def test_json_written_node_by_node_is_the_same_text(write_yaml: WriteYaml) -> None:
    """Nodes are written one by one too: with none, with many, and with every later key present."""
    for text in ("".join(web(i) for i in range(3)), NODES + web(1)):
        result = simulate([write_yaml(text)])
        assert render_json(result) == json.dumps(to_json(result), indent=2) + "\n"
    examples = Path(__file__).resolve().parents[2] / "examples"
    for name in ("reservations.yaml", "mixed-workloads.yaml", "local-volumes.yaml", "gpu-cluster.yaml"):
        result = simulate([examples / name])
        assert result.nodes and result.pods
        assert render_json(result) == json.dumps(to_json(result), indent=2) + "\n"
