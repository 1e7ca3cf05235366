"""ElasticQuota's overuse revoke controller through ``simulate`` (``monitorAllQuotas: true``).

A quota that borrowed the cluster while the others were idle keeps its pods when its runtime
shrinks; once its used has stayed above its runtime for longer than ``delayEvictTime`` (virtual
time, no sleeping), its least important bound pods are revoked until used is within the runtime,
and the pods waiting for their own quota's share are scheduled in the room left. Off by default,
as in Koordinator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from koordsched.backends.sim.report import render_table, to_json
from koordsched.backends.sim.runner import REVOKED, SCHEDULED, UNSCHEDULABLE, SimResult, simulate
from koordsched.config.default_profile import default_profile_path
from tests.builders import node_manifest, pod_manifest, yaml_docs
from tests.scenario.helpers import WriteYaml


def node(name: str) -> dict[str, Any]:
    return node_manifest(name, "2", "8Gi", hostname=False, capacity=False)


def quota(name: str, labels: str = "{}") -> str:
    return f"""
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata: {{name: {name}, namespace: {name}, labels: {labels}}}
spec: {{min: {{cpu: "2"}}, max: {{cpu: "4"}}}}
"""


def pod(
    name: str,
    namespace: str,
    node_name: str = "",
    priority: int = 0,
    started: str = "",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    status = {"phase": "Running", "startTime": started} if started else None
    return pod_manifest(
        name,
        "1",
        None,
        namespace=namespace,
        uid=f"uid-{name}",
        labels=labels,
        node_name=node_name,
        priority=priority,
        status=status,
    )


def profile(write_yaml: WriteYaml, args: str) -> Path:
    text = default_profile_path().read_text()
    anchor = "          quotaGroupNamespace: koordinator-system\n"
    assert anchor in text
    return write_yaml(text.replace(anchor, anchor + args), name="profile.yaml")


def cluster(*extra: dict[str, Any] | str, a_labels: dict[str, str] | None = None) -> str:
    # team-a borrowed the whole cluster (4 cpu) while team-b was idle; team-b now asks for its min.
    docs = [
        node("n1"),
        node("n2"),
        quota("team-a"),
        quota("team-b"),
        pod("a-old-high", "team-a", "n1", priority=10, started="2026-01-01T00:00:00Z"),
        pod("a-old-low", "team-a", "n1", priority=1, started="2026-01-01T00:00:00Z"),
        pod("a-new-low", "team-a", "n2", priority=1, started="2026-02-01T00:00:00Z", labels=a_labels),
        pod("a-high", "team-a", "n2", priority=10, started="2026-02-01T00:00:00Z"),
        pod("b0", "team-b"),
        pod("b1", "team-b"),
        *extra,
    ]
    return yaml_docs(*docs)


def run(write_yaml: WriteYaml, config: Path | None, text: str) -> SimResult:
    return simulate([write_yaml(text)], config_path=config)


def test_an_overused_quota_is_revoked_after_the_delay_and_the_waiting_quota_gets_its_share(
    write_yaml: WriteYaml,
) -> None:
    config = profile(write_yaml, "          monitorAllQuotas: true\n")
    result = run(write_yaml, config, cluster())
    # team-a's runtime fell to its min (2): the two least important pods go, the newest first
    # among equals (the reverse of kube-scheduler's MoreImportantPod).
    revoked = {p.key: p for p in result.pods if p.status == REVOKED}
    assert set(revoked) == {"team-a/a-old-low", "team-a/a-new-low"}
    message = revoked["team-a/a-new-low"].message
    assert message == ("revoked: quota team-a used cpu:4 more than its runtime cpu:2 for longer than 120s")
    assert {result.pod(f"team-b/b{i}").status for i in (0, 1)} == {SCHEDULED}
    assert result.summary.revoked == 2
    assert to_json(result)["summary"]["revoked"] == 2
    assert "2 revoked" in render_table(result)
    quotas = {q.name: q for q in result.quotas}
    assert quotas["team-a"].used == {"cpu": 2000} and quotas["team-b"].used == {"cpu": 2000}


def test_off_by_default_the_overused_quota_keeps_its_pods(write_yaml: WriteYaml) -> None:
    result = run(write_yaml, None, cluster())
    assert result.summary.revoked == 0
    assert {result.pod(f"team-b/b{i}").status for i in (0, 1)} == {UNSCHEDULABLE}


def test_a_delay_longer_than_the_run_has_reasons_for_still_revokes_on_virtual_time(
    write_yaml: WriteYaml,
) -> None:
    config = profile(write_yaml, "          monitorAllQuotas: true\n          delayEvictTime: 1h\n")
    result = run(write_yaml, config, cluster())
    assert result.summary.revoked == 2
    assert "for longer than 3600s" in next(p.message for p in result.pods if p.status == REVOKED)


def test_non_preemptible_pods_are_never_revoked(write_yaml: WriteYaml) -> None:
    config = profile(write_yaml, "          monitorAllQuotas: true\n")
    np = {"quota.scheduling.koordinator.sh/preemptible": "false"}
    result = run(write_yaml, config, cluster(a_labels=np))
    revoked = sorted(p.key for p in result.pods if p.status == REVOKED)
    # a-new-low is held against team-a's min: the next least important goes instead.
    assert revoked == ["team-a/a-high", "team-a/a-old-low"]
