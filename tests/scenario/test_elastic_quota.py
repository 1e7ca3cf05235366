"""ElasticQuota through ``simulate``: a quota caps its pods with Koordinator's message, a tree
shares the cluster by weight, non-preemptible pods fit under min, refused quotas refuse only
their own pods."""

from __future__ import annotations

from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, SimResult, simulate
from tests.scenario.helpers import WriteYaml

NODE = """
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{kubernetes.io/hostname: {name}}}
status:
  allocatable: {{cpu: "{cpu}", memory: 64Gi, pods: "110"}}
"""


def _node(name: str, cpu: int = 8) -> str:
    return NODE.format(name=name, cpu=cpu)


def _quota(
    name: str, namespace: str, max_: str, min_: str = "{}", labels: str = "{}", annotations: str = "{}"
) -> str:
    return f"""
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: {name}
  namespace: {namespace}
  labels: {labels}
  annotations: {annotations}
spec:
  min: {min_}
  max: {max_}
"""


def _pod(name: str, namespace: str = "team-a", cpu: str = "1", labels: str = "{}", priority: int = 0) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {namespace}
  labels: {labels}
spec:
  schedulerName: koord-scheduler
  priority: {priority}
  containers:
  - name: c
    resources: {{requests: {{cpu: "{cpu}"}}}}
"""


def _docs(*docs: str) -> str:
    return "\n---\n".join(d.strip("\n") for d in docs) + "\n"


def _run(write_yaml: WriteYaml, *docs: str) -> SimResult:
    return simulate([write_yaml(_docs(*docs))])


def _failed(result: SimResult, key: str) -> str:
    pod = result.pod(key)
    assert pod.status == UNSCHEDULABLE, pod
    return pod.message


def test_quota_max_admits_two_one_cpu_pods_and_keeps_two_pending(write_yaml: WriteYaml) -> None:
    result = _run(
        write_yaml,
        _node("n1"),
        _quota("team-a", "team-a", '{cpu: "2"}'),
        *(_pod(f"p{i}") for i in range(4)),
    )
    placed = [p.key for p in result.pods if p.status == SCHEDULED]
    assert placed == ["team-a/p0", "team-a/p1"]
    for key in ("team-a/p2", "team-a/p3"):
        assert _failed(result, key) == (
            "0/1 nodes are available: Insufficient quotas, quotaName: team-a, runtime: cpu:2, used: cpu:2, "
            "pod's request: cpu:1, exceedDimensions: [cpu]."
        )
