"""Where pods land on small purpose-built clusters, through the same ``simulate`` path users run."""

from __future__ import annotations

from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, simulate
from tests.scenario.helpers import WriteYaml, assert_failed_scheduling

GPU_NODE = """
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{kubernetes.io/hostname: {name}, topology.kubernetes.io/zone: {zone}}}
spec:
  taints: [{{key: nvidia.com/gpu, value: present, effect: NoSchedule}}]
status:
  allocatable: {{cpu: "{cpu}", memory: 64Gi, pods: "110", nvidia.com/gpu: "8"}}
"""

CPU_NODE = """
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{kubernetes.io/hostname: {name}, topology.kubernetes.io/zone: {zone}, tier: {tier}}}
status:
  allocatable: {{cpu: "{cpu}", memory: 16Gi, pods: "110"}}
"""


def _pod(name: str, cpu: str = "1", *, extra: str = "", namespace: str = "default", gpu: int = 0) -> str:
    gpus = f", nvidia.com/gpu: {gpu}" if gpu else ""
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  schedulerName: koord-scheduler
{extra}
  containers:
  - name: c
    image: busybox
    resources: {{requests: {{cpu: "{cpu}", memory: 1Gi{gpus}}}}}
"""


def _docs(*docs: str) -> str:
    return "\n---\n".join(d.strip("\n") for d in docs) + "\n"


def test_taints_and_resources_give_kube_schedulers_message(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        _docs(
            GPU_NODE.format(name="gpu-1", zone="a", cpu=32),
            CPU_NODE.format(name="cpu-1", zone="a", tier="web", cpu=4),
            CPU_NODE.format(name="cpu-2", zone="b", tier="web", cpu=4),
            _pod("big", cpu="8"),
        )
    )
    result = simulate([path])
    big = result.pod("default/big")
    assert big.status == UNSCHEDULABLE
    assert big.node is None
    assert_failed_scheduling(
        big.message,
        "0/3 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}, "
        "2 Insufficient cpu.",
    )
    assert big.attempts >= 1
    # What `kubectl describe pod` would show: a FailedScheduling event and PodScheduled=False.
    events = result.port.events_for("default/big")
    assert events and events[-1].reason == "FailedScheduling" and events[-1].type == "Warning"
    assert events[-1].message == big.message
    condition = result.port.conditions["default/big"]
    assert (condition.type, condition.status, condition.reason) == ("PodScheduled", "False", "Unschedulable")


def test_toleration_lets_a_gpu_pod_onto_the_tainted_node(write_yaml: WriteYaml) -> None:
    toleration = "  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]"
    path = write_yaml(
        _docs(
            GPU_NODE.format(name="gpu-1", zone="a", cpu=32),
            CPU_NODE.format(name="cpu-1", zone="a", tier="web", cpu=64),
            _pod("trainer", cpu="8", gpu=4, extra=toleration),
            _pod("no-toleration", cpu="1", gpu=1),
        )
    )
    result = simulate([path])
    assert result.pod("default/trainer").node == "gpu-1"
    stuck = result.pod("default/no-toleration")
    assert stuck.status == UNSCHEDULABLE
    assert_failed_scheduling(
        stuck.message,
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "1 node(s) had untolerated taint {nvidia.com/gpu: present}.",
    )
    assert (
        result.port.events_for("default/trainer")[-1].message
        == "Successfully assigned default/trainer to gpu-1"
    )


def test_higher_priority_pod_gets_the_last_room(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        _docs(
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000",
            CPU_NODE.format(name="cpu-1", zone="a", tier="web", cpu=2),
            _pod("low", cpu="2"),  # first in the file, but lower priority
            _pod("high", cpu="2", extra="  priorityClassName: high"),
        )
    )
    result = simulate([path])
    assert result.pod("default/high").node == "cpu-1"
    low = result.pod("default/low")
    assert low.status == UNSCHEDULABLE
    assert_failed_scheduling(low.message, "0/1 nodes are available: 1 Insufficient cpu.")


def test_running_pods_use_capacity(write_yaml: WriteYaml) -> None:
    running = """
apiVersion: v1
kind: Pod
metadata: {name: db, namespace: web}
spec:
  nodeName: cpu-1
  containers: [{name: c, resources: {requests: {cpu: "3"}}}]
"""
    path = write_yaml(
        _docs(
            CPU_NODE.format(name="cpu-1", zone="a", tier="web", cpu=4),
            CPU_NODE.format(name="cpu-2", zone="a", tier="web", cpu=4),
            running,
            _pod("a", cpu="2"),
            _pod("b", cpu="2"),
        )
    )
    result = simulate([path])
    # cpu-1 has 1 cpu left: both pods go to cpu-2; the running pod is not reported.
    assert [p.key for p in result.pods] == ["default/a", "default/b"]
    assert {p.node for p in result.pods} == {"cpu-2"}
    usage = {n.name: n for n in result.nodes}
    assert usage["cpu-1"].resources["cpu"] == (3000, 4000)
    assert usage["cpu-2"].resources["cpu"] == (4000, 4000)
    assert (usage["cpu-1"].pods, usage["cpu-2"].pods) == (1, 2)


def test_required_and_preferred_node_affinity(write_yaml: WriteYaml) -> None:
    zone_b = "  nodeSelector: {topology.kubernetes.io/zone: b}"
    prefer_batch = """  affinity:
    nodeAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        preference: {matchExpressions: [{key: tier, operator: In, values: [batch]}]}"""
    path = write_yaml(
        _docs(
            CPU_NODE.format(name="web-a", zone="a", tier="web", cpu=16),
            CPU_NODE.format(name="batch-a", zone="a", tier="batch", cpu=16),
            CPU_NODE.format(name="web-b", zone="b", tier="web", cpu=16),
            _pod("zonal", extra=zone_b),
            _pod("prefers-batch", extra=prefer_batch),
            _pod("nowhere", extra="  nodeSelector: {topology.kubernetes.io/zone: c}"),
        )
    )
    result = simulate([path])
    assert result.pod("default/zonal").node == "web-b"
    assert result.pod("default/prefers-batch").node == "batch-a"
    assert_failed_scheduling(
        result.pod("default/nowhere").message,
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
    )


def test_pod_asking_more_gpus_than_any_node_has(write_yaml: WriteYaml) -> None:
    toleration = "  tolerations: [{key: nvidia.com/gpu, operator: Exists}]"
    path = write_yaml(
        _docs(
            GPU_NODE.format(name="gpu-1", zone="a", cpu=64),
            GPU_NODE.format(name="gpu-2", zone="a", cpu=64),
            _pod("huge", gpu=16, extra=toleration),
        )
    )
    huge = simulate([path]).pod("default/huge")
    assert huge.status == UNSCHEDULABLE
    assert_failed_scheduling(huge.message, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")


def test_scheduling_gates_keep_a_pod_out_of_the_queue(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        _docs(
            CPU_NODE.format(name="cpu-1", zone="a", tier="web", cpu=4),
            _pod("gated", extra="  schedulingGates: [{name: example.com/quota}]"),
        )
    )
    gated = simulate([path]).pod("default/gated")
    assert gated.status == UNSCHEDULABLE
    assert gated.message == "Scheduling is blocked due to non-empty scheduling gates"
    assert gated.attempts == 0


def test_other_schedulers_pods_are_ignored_and_namespace_defaults(write_yaml: WriteYaml) -> None:
    other = """
apiVersion: v1
kind: Pod
metadata: {name: theirs}
spec:
  schedulerName: default-scheduler
  containers: [{name: c}]
"""
    mine = """
apiVersion: v1
kind: Pod
metadata: {name: mine}
spec:
  schedulerName: koord-scheduler
  containers: [{name: c, resources: {limits: {cpu: "3"}}}]
"""
    path = write_yaml(_docs(CPU_NODE.format(name="cpu-1", zone="a", tier="web", cpu=4), other, mine))
    result = simulate([path])
    assert [p.key for p in result.pods] == ["default/mine"]
    assert result.summary.ignored == 1
    assert result.pod("default/mine").node == "cpu-1"
    # A limits-only container requests its limits, as the API server defaults it.
    assert result.nodes[0].resources["cpu"] == (3000, 4000)


def test_invalid_quantity_is_a_result_on_the_pod_not_an_input_error(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        _docs(
            CPU_NODE.format(name="cpu-1", zone="a", tier="web", cpu=4),
            _pod("typo", cpu="2 cores"),
            _pod("ok"),
        )
    )
    result = simulate([path])
    typo = result.pod("default/typo")
    assert typo.status == UNSCHEDULABLE
    assert "2 cores" in typo.message
    assert result.pod("default/ok").status == SCHEDULED


def test_kind_list_and_several_files(write_yaml: WriteYaml) -> None:
    nodes = write_yaml(
        """
        apiVersion: v1
        kind: List
        items:
        - {kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: "2", memory: 4Gi, pods: "9"}}}
        - {kind: Node, metadata: {name: n2}, status: {capacity: {cpu: "2", memory: 4Gi, pods: "9"}}}
        """,
        name="nodes.yaml",
    )
    pods = write_yaml(_docs(_pod("a", cpu="2"), _pod("b", cpu="2"), _pod("c", cpu="2")), name="pods.yaml")
    result = simulate([nodes, pods])
    assert result.summary.nodes == 2
    assert (result.summary.scheduled, result.summary.unschedulable) == (2, 1)
    # status.capacity stands in for a missing status.allocatable.
    assert {n.name: n.resources["cpu"][1] for n in result.nodes} == {"n1": 2000, "n2": 2000}


def test_seed_only_breaks_ties(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        _docs(*(CPU_NODE.format(name=f"n{i}", zone="a", tier="web", cpu=8) for i in range(4)), _pod("p"))
    )
    assert simulate([path], seed=1).pod("default/p").node == simulate([path], seed=1).pod("default/p").node
