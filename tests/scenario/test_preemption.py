"""Preemption through `simulate` with the default profile, as users run it.

A preempted pod is listed with status ``Preempted``, its former node and the preemptor; the
preemptor is nominated, its victims are deleted (the watch tells the scheduler), and it is
scheduled in a later cycle, as kube-scheduler does. Evicting a victim frees what it held for
DeviceShare (GPUs) and NodeNUMAResource (cpusets), not only its cpu and memory.
"""

from __future__ import annotations

import json
from typing import Any

from koordsched.backends.sim.report import render_table, to_json
from koordsched.backends.sim.runner import simulate
from tests.builders import node_manifest, pod_manifest, yaml_docs
from tests.plugins.numa.helpers import cpu_infos
from tests.scenario.helpers import WriteYaml

CLASSES = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 100
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high-never}
value: 1000
preemptionPolicy: Never
"""


def node(name: str, cpu: str = "2") -> dict[str, Any]:
    return node_manifest(name, cpu, "8Gi", hostname=False, capacity=False)


def pod(
    name: str, cpu: str, cls: str, node: str = "", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return pod_manifest(
        name, cpu, None, uid=f"uid-{name}", labels=labels, node_name=node, priorityClassName=cls
    )


def cluster(*docs: dict[str, Any] | str) -> str:
    return yaml_docs(CLASSES, *docs)


def test_a_high_priority_pod_preempts_and_is_scheduled_in_a_later_cycle(write_yaml: WriteYaml) -> None:
    path = write_yaml(cluster(node("n1"), pod("low", "2", "low", "n1"), pod("high", "1", "high")))
    result = simulate([path])
    low, high = result.pod("default/low"), result.pod("default/high")
    assert (low.status, low.node, low.message) == ("Preempted", "n1", "preempted by default/high on node n1")
    assert (high.status, high.node) == ("Scheduled", "n1")
    assert high.attempts == 2  # nominated in the first, bound in the second
    assert result.summary.preempted == 1 and result.summary.scheduled == 1
    events = [(e.reason, e.message) for e in result.port.events_for("default/low")]
    assert events == [("Preempted", "Preempted by pod uid-high on node n1")]
    assert result.port.nominations == {"default/high": "n1"}
    doc = to_json(result)
    assert {"namespace": "default", "name": "low", "node": "n1", "status": "Preempted"}.items() <= doc[
        "pods"
    ][0].items()
    assert doc["summary"]["preempted"] == 1
    assert "1 preempted" in render_table(result)


def test_the_failed_attempt_says_why_in_kube_schedulers_words(write_yaml: WriteYaml) -> None:
    path = write_yaml(cluster(node("n1"), pod("low", "2", "low", "n1"), pod("high", "1", "high")))
    result = simulate([path])
    failed = [e.message for e in result.port.events_for("default/high") if e.reason == "FailedScheduling"]
    assert failed == ["0/1 nodes are available: 1 Insufficient cpu."]


def test_a_pdb_keeps_its_pod_when_another_victim_will_do(write_yaml: WriteYaml) -> None:
    budget = """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: keep-db, namespace: default}
spec: {selector: {matchLabels: {app: db}}, minAvailable: 1}
status: {disruptionsAllowed: 0}
"""
    path = write_yaml(
        cluster(
            node("n1"),
            node("n2"),
            budget,
            pod("db", "2", "low", "n1", labels={"app": "db"}),
            pod("batch", "2", "low", "n2", labels={"app": "batch"}),
            pod("high", "1", "high"),
        )
    )
    result = simulate([path])
    assert result.pod("default/batch").status == "Preempted"
    assert "default/db" not in {p.key for p in result.pods}  # still running, not listed
    assert result.pod("default/high").node == "n2"


def test_a_pdb_is_violated_when_no_other_victim_will_do(write_yaml: WriteYaml) -> None:
    budget = """
apiVersion: policy/v1beta1
kind: PodDisruptionBudget
metadata: {name: keep-db, namespace: default}
spec: {selector: {matchLabels: {app: db}}, maxUnavailable: 0}
status: {disruptionsAllowed: 0}
"""
    path = write_yaml(
        cluster(
            node("n1"), budget, pod("db", "2", "low", "n1", labels={"app": "db"}), pod("high", "1", "high")
        )
    )
    result = simulate([path])
    assert result.pod("default/db").status == "Preempted"
    assert result.pod("default/high").node == "n1"


def test_preemption_policy_never_waits(write_yaml: WriteYaml) -> None:
    path = write_yaml(cluster(node("n1"), pod("low", "2", "low", "n1"), pod("polite", "1", "high-never")))
    result = simulate([path])
    polite = result.pod("default/polite")
    assert polite.status == "Unschedulable"
    assert polite.message == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: not eligible due to preemptionPolicy=Never.."
    )
    assert result.summary.preempted == 0


def test_the_nominee_keeps_its_room_from_lower_priority_pods(write_yaml: WriteYaml) -> None:
    # "mid" is queued behind "high"; once the victim is gone it would fit on n1 first (high waits
    # out its backoff), but n1's room is high's: mid finds nobody of lower priority to preempt.
    path = write_yaml(
        cluster(
            node("n1"),
            pod("victim", "2", "low", "n1"),
            pod("high", "2", "high"),
            """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: mid}
value: 500
""",
            pod("mid", "1", "mid"),
        )
    )
    result = simulate([path])
    assert result.pod("default/high").node == "n1"
    mid = result.pod("default/mid")
    assert mid.status == "Unschedulable"
    assert [p.key for p in result.pods if p.status == "Preempted"] == ["default/victim"]


GPU_RESOURCES = (
    '{koordinator.sh/gpu-core: "100", koordinator.sh/gpu-memory-ratio: "100", '
    "koordinator.sh/gpu-memory: 80Gi}"
)


def test_a_victims_gpu_goes_to_the_preemptor(write_yaml: WriteYaml) -> None:
    device = f"""
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Device
metadata: {{name: g1}}
spec:
  devices:
  - {{type: gpu, minor: 0, health: true, resources: {GPU_RESOURCES}}}
"""
    gpu_node = """
apiVersion: v1
kind: Node
metadata: {name: g1}
status: {allocatable: {cpu: "32", memory: 64Gi, pods: "110", nvidia.com/gpu: "1"}}
"""
    held = json.dumps(
        {
            "gpu": [
                {
                    "minor": 0,
                    "resources": {
                        "koordinator.sh/gpu-core": "100",
                        "koordinator.sh/gpu-memory-ratio": "100",
                        "koordinator.sh/gpu-memory": "80Gi",
                    },
                }
            ]
        }
    )

    def gpu_pod(name: str, cls: str, node: str = "", annotations: str = "{}") -> str:
        bound = f"nodeName: {node}" if node else ""
        return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, uid: uid-{name}, annotations: {annotations}}}
spec:
  schedulerName: koord-scheduler
  priorityClassName: {cls}
  {bound}
  containers:
  - name: c
    resources: {{requests: {{cpu: "1", nvidia.com/gpu: "1"}}, limits: {{nvidia.com/gpu: "1"}}}}
"""

    annotations = json.dumps({"scheduling.koordinator.sh/device-allocated": held})
    path = write_yaml(
        cluster(gpu_node, device, gpu_pod("trainer", "low", "g1", annotations), gpu_pod("serving", "high"))
    )
    result = simulate([path])
    assert result.pod("default/trainer").status == "Preempted"
    serving = result.pod("default/serving")
    assert serving.node == "g1"
    allocated = json.loads(serving.annotations["scheduling.koordinator.sh/device-allocated"])
    assert [g["minor"] for g in allocated["gpu"]] == [0]


def test_a_victims_cpuset_goes_to_the_preemptor(write_yaml: WriteYaml) -> None:
    nrt = {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {
            "name": "c1",
            "annotations": {
                "node.koordinator.sh/cpu-topology": json.dumps({"detail": cpu_infos(1, 1, 4, 2)})
            },
        },
        "topologyPolicies": ["None"],
        "zones": [
            {
                "name": "node-0",
                "type": "Node",
                "resources": [
                    {"name": "cpu", "capacity": "8", "allocatable": "8"},
                    {"name": "memory", "capacity": "64Gi", "allocatable": "64Gi"},
                ],
            }
        ],
    }
    # The node has 16 cpus for the scheduler's accounting but only 8 to bind: the bound LSR pod
    # holds all 8, so unless the dry run frees its cpuset the preemptor's Filter fails there.
    docs: list[dict[str, object]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "c1"},
            "status": {"allocatable": {"cpu": "16", "memory": "128Gi", "pods": "110"}},
        },
        nrt,
    ]

    def lsr(name: str, cls: str, node: str = "", cpuset: str = "") -> dict[str, object]:
        res = {"cpu": "8", "memory": "2Gi"}
        spec: dict[str, object] = {
            "schedulerName": "koord-scheduler",
            "priorityClassName": cls,
            "containers": [{"name": "c", "resources": {"requests": res, "limits": res}}],
        }
        annotations = {}
        if node:
            spec["nodeName"] = node
            annotations["scheduling.koordinator.sh/resource-status"] = json.dumps({"cpuset": cpuset})
        else:
            # A required bind policy: the Filter allocates CPUs for real (without one, Koordinator
            # checks CPUs only at Reserve, where no preemption follows a failure).
            spec_annotation = {"requiredCPUBindPolicy": "FullPCPUs"}
            annotations["scheduling.koordinator.sh/resource-spec"] = json.dumps(spec_annotation)
        meta = {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "labels": {"koordinator.sh/qosClass": "LSR"},
            "annotations": annotations,
        }
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}

    docs += [lsr("old", "low", "c1", "0-7"), lsr("new", "high")]
    path = write_yaml(cluster(*(json.dumps(d) for d in docs)))
    result = simulate([path])
    assert result.pod("default/old").status == "Preempted"
    new = result.pod("default/new")
    assert new.node == "c1", new.message
    status = json.loads(new.annotations["scheduling.koordinator.sh/resource-status"])
    assert status["cpuset"] == "0-7"
