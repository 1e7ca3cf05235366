"""ElasticQuota through ``simulate``: a quota caps its pods with Koordinator's message, a tree
shares the cluster by weight, non-preemptible pods fit under min, refused quotas refuse only
their own pods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, SimResult, simulate
from tests.builders import node_manifest, pod_manifest, yaml_docs
from tests.scenario.helpers import WriteYaml, assert_failed_scheduling


def _node(name: str, cpu: int = 8) -> dict[str, Any]:
    return node_manifest(name, str(cpu), "64Gi", capacity=False)


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


def _pod(
    name: str, namespace: str = "team-a", cpu: str = "1", labels: str = "{}", priority: int = 0
) -> dict[str, Any]:
    """A pod; ``labels`` is a YAML flow mapping."""
    return pod_manifest(
        name, cpu, None, namespace=namespace, uid="", labels=yaml.safe_load(labels), priority=priority
    )


def _docs(*docs: dict[str, Any] | str) -> str:
    return yaml_docs(*docs)


#: Koordinator's chart profile (restricted to what koordsched implements): ElasticQuota preempts.
CHART = Path(__file__).resolve().parents[2] / "examples" / "profiles" / "koordinator-chart.yaml"


def _run(write_yaml: WriteYaml, *docs: str, config: Path | None = None) -> SimResult:
    return simulate([write_yaml(_docs(*docs))], config_path=config)


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
        assert_failed_scheduling(
            _failed(result, key),
            "0/1 nodes are available: Insufficient quotas, quotaName: team-a, runtime: cpu:2, used: cpu:2, "
            "pod's request: cpu:1, exceedDimensions: [cpu].",
        )


def test_summary_reports_quota_usage_in_json_and_table(write_yaml: WriteYaml) -> None:
    from koordsched.backends.sim.report import render_table, to_json

    result = _run(
        write_yaml,
        _node("n1", cpu=4),
        _quota("team-a", "team-a", '{cpu: "2"}'),
        _quota("team-b", "team-b", '{cpu: "10"}', min_='{cpu: "1"}'),
        *(_pod(f"a{i}") for i in range(3)),
        *(_pod(f"b{i}", "team-b") for i in range(3)),
    )
    quotas = {q["name"]: q for q in to_json(result)["summary"]["quotas"]}
    assert set(quotas) == {"team-a", "team-b"}
    a, b = quotas["team-a"], quotas["team-b"]
    assert (a["namespace"], a["parent"], a["isParent"]) == ("team-a", "koordinator-root-quota", False)
    assert a["max"] == {"cpu": 2} and a["request"] == {"cpu": 3} and b["request"] == {"cpu": 3}
    # 4 cpu shared by weight (default: max). a asks 2 (3 capped at its max), b asks 3 with min 1:
    # b keeps its min, the 3 left go 1:5 (0.5 to a, 2.5 to b); b is capped at its 3 and its 0.5
    # extra goes to a: a 1, b 3.
    assert a["runtime"] == {"cpu": 1} and b["runtime"] == {"cpu": 3}
    assert a["used"] == {"cpu": 1} and b["used"] == {"cpu": 3} and b["min"] == {"cpu": 1}
    assert sum(p.status == SCHEDULED for p in result.pods) == 4
    table = render_table(result)
    block = table[table.index("ELASTIC QUOTA") :].splitlines()
    assert block[0].split() == ["ELASTIC", "QUOTA", "PARENT", "USED", "RUNTIME", "MAX"]
    assert block[1].split() == ["team-a", "-", "cpu:1", "cpu:1", "cpu:2"]
    assert block[2].split() == ["team-b", "-", "cpu:3", "cpu:3", "cpu:10"]


def test_no_quota_objects_no_quota_output(write_yaml: WriteYaml) -> None:
    from koordsched.backends.sim.report import render_table, to_json

    result = _run(write_yaml, _node("n1"), _pod("a", "default"))
    assert to_json(result)["summary"]["quotas"] == []
    assert "ELASTIC QUOTA" not in render_table(result)


def test_parent_quota_shares_with_its_children(write_yaml: WriteYaml) -> None:
    parent_labels = "{quota.scheduling.koordinator.sh/is-parent: 'true'}"
    child_labels = "{quota.scheduling.koordinator.sh/parent: org}"
    result = _run(
        write_yaml,
        _node("n1", cpu=16),
        _quota("org", "org", '{cpu: "3"}', labels=parent_labels),
        _quota("dev", "dev", '{cpu: "3"}', labels=child_labels),
        _quota("ops", "ops", '{cpu: "3"}', labels=child_labels),
        *(_pod(f"d{i}", "dev") for i in range(3)),
        *(_pod(f"o{i}", "ops") for i in range(3)),
    )
    # org may use 3 cpu in all; dev and ops split it by weight (their max): 1.5 each.
    placed = sorted(p.key for p in result.pods if p.status == SCHEDULED)
    assert placed == ["dev/d0", "ops/o0"]
    assert_failed_scheduling(
        _failed(result, "dev/d1"),
        "0/1 nodes are available: Insufficient quotas, quotaName: dev, runtime: cpu:1500m, used: cpu:1, "
        "pod's request: cpu:1, exceedDimensions: [cpu].",
    )
    org = next(q for q in result.quotas if q.name == "org")
    assert org.is_parent and org.used == {"cpu": 2000} and org.runtime == {"cpu": 3000}


def test_refused_quota_warns_and_refuses_only_its_pods(write_yaml: WriteYaml) -> None:
    result = _run(
        write_yaml,
        _node("n1"),
        _quota("orphan", "team-a", '{cpu: "2"}', labels="{quota.scheduling.koordinator.sh/parent: nowhere}"),
        _pod("a", labels="{quota.scheduling.koordinator.sh/name: orphan}"),
        _pod("b", "team-b"),
    )
    reason = 'ElasticQuota "team-a/orphan" is refused: its parent quota nowhere does not exist'
    assert f"{reason}; pods charged to quota orphan are refused" in result.warnings
    assert_failed_scheduling(
        _failed(result, "team-a/a"), f"0/1 nodes are available: quota orphan cannot be used: {reason}."
    )
    assert result.pod("team-b/b").status == SCHEDULED


def test_non_preemptible_pods_fit_under_min(write_yaml: WriteYaml) -> None:
    np = "{quota.scheduling.koordinator.sh/preemptible: 'false'}"
    result = _run(
        write_yaml,
        _node("n1"),
        _quota("team-a", "team-a", '{cpu: "4"}', min_='{cpu: "1"}'),
        _pod("np0", labels=np),
        _pod("np1", labels=np),
        _pod("plain"),
    )
    assert result.pod("team-a/np0").status == SCHEDULED
    assert result.pod("team-a/plain").status == SCHEDULED
    assert_failed_scheduling(
        _failed(result, "team-a/np1"),
        "0/1 nodes are available: Insufficient non-preemptible quotas, quotaName: team-a, min: cpu:1, "
        "nonPreemptibleUsed: cpu:1, pod's request: cpu:1, exceedDimensions: [cpu].",
    )


def test_invalid_quota_in_the_input_warns_and_goes_on(write_yaml: WriteYaml) -> None:
    result = _run(
        write_yaml,
        _node("n1"),
        _quota("team-a", "team-a", '{cpu: "1"}', min_='{cpu: "2"}'),
        _pod("a"),
        _pod("b", "team-b"),
    )
    reason = (
        'ElasticQuota "team-a/team-a" is invalid: spec.min[cpu]: Invalid value: "2": '
        "must be less than or equal to spec.max[cpu]"
    )
    assert any(w.endswith(f"{reason}; ElasticQuota refuses the pods charged to it") for w in result.warnings)
    assert_failed_scheduling(
        _failed(result, "team-a/a"), f"0/1 nodes are available: quota team-a cannot be used: {reason}."
    )
    assert result.pod("team-b/b").status == SCHEDULED


def _bound(name: str, namespace: str, node: str, cpu: str = "1", priority: int = 0) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {namespace}
spec:
  schedulerName: koord-scheduler
  nodeName: {node}
  priority: {priority}
  containers:
  - name: c
    resources: {{requests: {{cpu: "{cpu}"}}}}
"""


def test_quota_aware_preemption_takes_a_lower_priority_pod_of_the_same_quota(write_yaml: WriteYaml) -> None:
    # team-a's quota is full with its own low-priority pods; the node has room (no node-level
    # pressure): DefaultPreemption could not help, ElasticQuota's preemption frees quota room by
    # evicting one of team-a's own lower-priority pods, never team-b's.
    from koordsched.backends.sim.runner import PREEMPTED

    result = _run(
        write_yaml,
        _node("n1", cpu=8),
        _quota("team-a", "team-a", '{cpu: "2"}'),
        _quota("team-b", "team-b", '{cpu: "4"}'),
        _bound("a-low-1", "team-a", "n1", priority=1),
        _bound("a-low-2", "team-a", "n1", priority=1),
        _bound("b-low", "team-b", "n1", priority=0),
        _pod("urgent", priority=100),
        config=CHART,
    )
    assert result.pod("team-a/urgent").status == SCHEDULED
    preempted = [p.key for p in result.pods if p.status == PREEMPTED]
    assert len(preempted) == 1 and preempted[0].startswith("team-a/a-low-")
    assert "team-b/b-low" not in preempted


def test_no_preemption_across_quotas_or_of_equal_priority(write_yaml: WriteYaml) -> None:
    result = _run(
        write_yaml,
        _node("n1", cpu=8),
        _quota("team-a", "team-a", '{cpu: "2"}'),
        _bound("a-same", "team-a", "n1", cpu="2", priority=100),
        _bound("other", "default", "n1", priority=0),
        _pod("urgent", priority=100),
        config=CHART,
    )
    message = _failed(result, "team-a/urgent")
    assert message.startswith(
        "0/1 nodes are available: Insufficient quotas, quotaName: team-a, runtime: cpu:2, used: cpu:2, "
        "pod's request: cpu:1, exceedDimensions: [cpu]. preemption: "
    ), message
    assert all(p.status != "Preempted" for p in result.pods)


def test_elastic_quota_keeps_default_preemption_on_its_batched_dry_run() -> None:
    # ElasticQuota's AddPod/RemovePod state is read by its own PostFilter only, not by a filter:
    # it does not make DefaultPreemption walk node by node.
    from koordsched.backends.sim.port import SimPort
    from koordsched.config.default_profile import default_profile_path
    from koordsched.config.load import load_config
    from koordsched.framework.cycle_state import CycleState
    from koordsched.plugins.registry import in_tree_registry
    from koordsched.scheduler.clock import VirtualClock
    from koordsched.scheduler.podinfo import PriorityClasses, new_pod_info
    from koordsched.scheduler.scheduler import Scheduler
    from tests.plugins.elasticquota.helpers import qpod

    registry = in_tree_registry()
    sched = Scheduler(load_config(default_profile_path(), registry), registry, SimPort(), VirtualClock())
    (fw,) = sched.frameworks.values()
    pod = new_pod_info(qpod("p", "team-a").pod, PriorityClasses())
    state = CycleState()
    _, status = fw.run_pre_filter(state, pod)
    assert status.ok, status
    assert state.get("PostFilterElasticQuota") is not None
    assert not fw.pre_filter_extensions_active(state)


def test_a_quota_of_another_tree_refuses_its_pods_with_the_reason(write_yaml: WriteYaml) -> None:
    result = _run(
        write_yaml,
        _node("n1"),
        _quota("team-a", "team-a", '{cpu: "2"}', labels='{"quota.scheduling.koordinator.sh/tree-id": "gpu"}'),
        _pod("p0"),
    )
    reason = (
        'ElasticQuota "team-a/team-a" is refused: label quota.scheduling.koordinator.sh/tree-id=gpu asks '
        "for a quota tree of its own, which needs the MultiQuotaTree feature gate (off by default, as in "
        "Koordinator; koordsched does not support multiple quota trees)"
    )
    assert f"quota team-a cannot be used: {reason}" in _failed(result, "team-a/p0")
    assert f"{reason}; pods charged to quota team-a are refused" in result.warnings


PARENT = "{quota.scheduling.koordinator.sh/is-parent: 'true'}"
CHILD = "{quota.scheduling.koordinator.sh/parent: parent}"
CHARGED = "{quota.scheduling.koordinator.sh/name: child}"


@pytest.mark.parametrize(
    ("child_spec", "names"),
    [("null", "[]"), ("{}", "[]"), ("{max: {cpu: 4, memory: 1Gi}}", "[cpu memory]")],
)
def test_child_whose_max_keys_are_not_its_parents_is_refused(
    write_yaml: WriteYaml, child_spec: str, names: str
) -> None:
    """Issue 24, item 4: a child quota that names no max (``spec: null``) let its pods push the
    parent's used to 4 of max 2. Refused (Koordinator's webhook would), its pods Pending."""
    child = f"""
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata: {{name: child, namespace: team-a, labels: {CHILD}}}
spec: {child_spec}
"""
    pods = [_pod(f"p{i}", labels=CHARGED) for i in range(4)]
    result = _run(
        write_yaml, _node("n1"), _quota("parent", "default", '{cpu: "2"}', labels=PARENT), child, *pods
    )
    reason = (
        f'ElasticQuota "team-a/child" is refused: spec.max names {names}, its parent quota parent\'s '
        "spec.max names [cpu]: a child quota's max must name the same resources as its parent's "
        "(checkSubAndParentGroupQuotaKey)"
    )
    assert f"{reason}; pods charged to quota child are refused" in result.warnings
    for i in range(4):
        assert_failed_scheduling(
            _failed(result, f"team-a/p{i}"), f"0/1 nodes are available: quota child cannot be used: {reason}."
        )
    quotas = {q.name: q for q in result.quotas}
    assert quotas["child"].refusal == reason
    assert quotas["parent"].used.get("cpu", 0) <= quotas["parent"].max["cpu"]
