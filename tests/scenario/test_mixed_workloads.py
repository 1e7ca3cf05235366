"""Co-located online and batch pods (spec 1.1, 4.6) through the ``simulate`` path users run.

* koord-batch pods ask for ``kubernetes.io/batch-cpu`` (milli-cores) and ``batch-memory``
  (bytes) and fit by those alone: a node without that reclaimed capacity refuses them with
  NodeResourcesFit's standard ``Insufficient <resource>`` reason, a node whose cpu is fully
  requested by prod pods still takes them;
* the deprecated ``koordinator.sh/batch-*`` names are read as ``kubernetes.io/batch-*``;
* LoadAwareScheduling filters a node whose NodeMetric shows usage above the threshold, with
  ``node(s) <resource> usage exceed threshold``.

Every run uses :data:`PROFILE`, which enables LoadAwareScheduling with the Helm chart's args
(spec 5.1), so nothing here depends on the shipped default profile. The expected usages are
worked out by hand from spec 4.6: a pod's estimate is ``max(limit, request) x factor / 100``
(cpu 85, memory 70), with cpu read from ``kubernetes.io/batch-cpu`` for koord-batch pods;
``usage% = round(estimated / allocatable x 100)`` is compared with the threshold (cpu 65,
memory 95) and the node is refused when it is greater.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from koordsched.api.slo import NodeMetric
from koordsched.backends.sim.loader import InputError, kind_specs, load_cluster
from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, SimResult, simulate
from koordsched.cli import main
from koordsched.config.default_profile import default_profile_path
from koordsched.plugins.registry import in_tree_registry
from tests.builders import node_manifest, pod_manifest
from tests.scenario.helpers import WriteYaml, assert_failed_scheduling

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mixed-workloads.yaml"

#: The chart's NodeResourcesFit and LoadAwareScheduling args (spec 5.1); LoadAware at filter,
#: score and reserve, on top of kube-scheduler's default plugins.
PROFILE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
profiles:
  - schedulerName: koord-scheduler
    pluginConfig:
      - name: NodeResourcesFit
        args:
          apiVersion: kubescheduler.config.k8s.io/v1
          kind: NodeResourcesFitArgs
          scoringStrategy:
            type: LeastAllocated
            resources:
              - {name: cpu, weight: 1}
              - {name: memory, weight: 1}
              - {name: kubernetes.io/batch-cpu, weight: 1}
              - {name: kubernetes.io/batch-memory, weight: 1}
      - name: LoadAwareScheduling
        args:
          apiVersion: kubescheduler.config.k8s.io/v1
          kind: LoadAwareSchedulingArgs
          filterExpiredNodeMetrics: false
          nodeMetricExpirationSeconds: 300
          resourceWeights: {cpu: 1, memory: 1}
          usageThresholds: {cpu: 65, memory: 95}
          estimatedScalingFactors: {cpu: 85, memory: 70}
    plugins:
      filter: {enabled: [{name: LoadAwareScheduling}]}
      score: {enabled: [{name: LoadAwareScheduling, weight: 1}]}
      reserve: {enabled: [{name: LoadAwareScheduling}]}
"""

UPDATED = "2025-06-02T08:00:00Z"


@pytest.fixture
def profile(write_yaml: WriteYaml) -> Path:
    return write_yaml(PROFILE, name="loadaware-profile.yaml")


def node(name: str, cpu: str, memory: str, **extra: str) -> str:
    return yaml.safe_dump(node_manifest(name, cpu, memory, capacity=False, **extra))


def node_metric(name: str, cpu: str, memory: str, updated: str = UPDATED) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": name},
            "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
            "status": {
                "updateTime": updated,
                "nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu, "memory": memory}}},
            },
        }
    )


def pod(
    name: str,
    requests: dict[str, str],
    *,
    priority_class: str = "",
    node_name: str = "",
    node_selector: dict[str, str] | None = None,
) -> str:
    """A pod with ``requests`` as its limits too; in the class's band when one is given."""
    spec: dict[str, object] = {}
    if priority_class:
        spec["priorityClassName"] = priority_class
        spec["priority"] = {"koord-prod": 9000, "koord-mid": 7000, "koord-batch": 5000}[priority_class]
    if node_selector:
        spec["nodeSelector"] = node_selector
    manifest = pod_manifest(
        name, None, None, uid="", node_name=node_name, requests=requests, limits=requests, **spec
    )
    return yaml.safe_dump(manifest)


def docs(*parts: str) -> str:
    return "---\n".join(parts)


def outcome(result: SimResult) -> dict[str, tuple[str, str | None, str]]:
    """name -> (status, node, message) of every pending pod."""
    return {p.name: (p.status, p.node, p.message) for p in result.pods}


# --- batch resources -------------------------------------------------------------------------------

GIB = 1024**3
#: 16 cores and 64Gi, 8 cores and 16Gi of them reclaimed for batch pods.
COLO = node(
    "colo", "16", "64Gi", **{"kubernetes.io/batch-cpu": "8000", "kubernetes.io/batch-memory": str(16 * GIB)}
)
#: The same machine without co-location: no batch capacity at all.
PLAIN = node("plain", "16", "64Gi")


def batch(name: str, cpu: str, memory: str, *, legacy: bool = False, **kw: object) -> str:
    prefix = "koordinator.sh" if legacy else "kubernetes.io"
    return pod(
        name,
        {f"{prefix}/batch-cpu": cpu, f"{prefix}/batch-memory": memory},
        priority_class="koord-batch",
        **kw,
    )  # type: ignore[arg-type]


def test_batch_pods_fit_by_batch_resources_only(write_yaml: WriteYaml, profile: Path) -> None:
    # A prod pod already requests every core of colo: batch pods request no cpu, so they still fit.
    cluster = docs(
        COLO,
        PLAIN,
        pod("prod-all-cpu", {"cpu": "16", "memory": "8Gi"}, priority_class="koord-prod", node_name="colo"),
        batch("exec-1", "4000", "4Gi"),
        batch("exec-2", "4000", "4Gi"),
        batch("exec-3", "1", "1Gi"),  # 8000 of 8000 milli-cores taken (8Gi of 16Gi): no room
        batch("on-plain", "1000", "1Gi", node_selector={"kubernetes.io/hostname": "plain"}),
    )
    got = outcome(simulate([write_yaml(cluster)], config_path=profile))
    assert got["exec-1"] == (SCHEDULED, "colo", "")
    assert got["exec-2"] == (SCHEDULED, "colo", "")
    status, where, message = got["exec-3"]
    assert (status, where) == (UNSCHEDULABLE, None)
    # colo: 1 milli-core short; plain: neither resource at all. Reasons sorted as strings.
    assert_failed_scheduling(
        message,
        "0/2 nodes are available: 1 Insufficient kubernetes.io/batch-memory, "
        "2 Insufficient kubernetes.io/batch-cpu.",
    )
    status, where, message = got["on-plain"]
    assert (status, where) == (UNSCHEDULABLE, None)
    assert_failed_scheduling(
        message,
        "0/2 nodes are available: 1 Insufficient kubernetes.io/batch-cpu, "
        "1 Insufficient kubernetes.io/batch-memory, 1 node(s) didn't match Pod's node affinity/selector.",
    )


def test_batch_memory_counts_in_bytes(write_yaml: WriteYaml, profile: Path) -> None:
    """16Gi of batch-memory: 12Gi + 4Gi fit exactly, one byte more does not."""
    cluster = docs(
        COLO,
        batch("twelve", "1000", "12Gi"),
        batch("four", "1000", str(4 * GIB)),
        batch("one-byte", "1000", "1"),
    )
    got = outcome(simulate([write_yaml(cluster)], config_path=profile))
    assert got["twelve"][:2] == (SCHEDULED, "colo")
    assert got["four"][:2] == (SCHEDULED, "colo")
    assert got["one-byte"][:2] == (UNSCHEDULABLE, None)
    assert_failed_scheduling(
        got["one-byte"][2], "0/1 nodes are available: 1 Insufficient kubernetes.io/batch-memory."
    )


def test_deprecated_batch_names_are_rewritten(write_yaml: WriteYaml, profile: Path) -> None:
    """No node has koordinator.sh/batch-*: a pod asking for them fits only if they are read as
    kubernetes.io/batch-*, and a refusal names the new resource, never the old one."""
    cluster = docs(
        COLO,
        PLAIN,
        batch("legacy", "6000", "4Gi", legacy=True),
        batch("legacy-too-big", "6000", "4Gi", legacy=True),  # 2000 milli-cores left after legacy
    )
    got = outcome(simulate([write_yaml(cluster)], config_path=profile))
    assert got["legacy"] == (SCHEDULED, "colo", "")
    status, where, message = got["legacy-too-big"]
    assert (status, where) == (UNSCHEDULABLE, None)
    assert_failed_scheduling(
        message,
        "0/2 nodes are available: 1 Insufficient kubernetes.io/batch-memory, "
        "2 Insufficient kubernetes.io/batch-cpu.",
    )
    assert "koordinator.sh/" not in message


def test_deprecated_node_allocatable_is_rewritten_too(write_yaml: WriteYaml, profile: Path) -> None:
    old_node = node(
        "old-koordlet",
        "16",
        "64Gi",
        **{"koordinator.sh/batch-cpu": "8000", "koordinator.sh/batch-memory": "16Gi"},
    )
    got = outcome(simulate([write_yaml(docs(old_node, batch("exec", "8000", "16Gi")))], config_path=profile))
    assert got["exec"] == (SCHEDULED, "old-koordlet", "")


# --- LoadAwareScheduling ------------------------------------------------------------------------------

#: 8 cores, 1 of them in use (12.5%).
COOL = docs(node("cool", "8", "32Gi"), node_metric("cool", "1", "4Gi"))
#: 16 cores, 12 of them in use (75%). Bigger than cool: without LoadAware it would be preferred.
HOT = docs(node("hot", "16", "64Gi"), node_metric("hot", "12", "8Gi"))


def test_the_hot_node_is_avoided(write_yaml: WriteYaml, profile: Path) -> None:
    # web: est cpu = 1000m x 85% = 850m. hot: (12000 + 850) / 16000 = 80.3% -> 80 > 65, refused;
    # cool: (1000 + 850) / 8000 = 23%. pinned-hot may only go to hot.
    cluster = docs(
        COOL,
        HOT,
        pod("web", {"cpu": "1", "memory": "1Gi"}),
        pod("pinned-hot", {"cpu": "1", "memory": "1Gi"}, node_selector={"kubernetes.io/hostname": "hot"}),
    )
    got = outcome(simulate([write_yaml(cluster)], config_path=profile))
    assert got["web"] == (SCHEDULED, "cool", "")
    status, where, message = got["pinned-hot"]
    assert (status, where) == (UNSCHEDULABLE, None)
    assert_failed_scheduling(
        message,
        "0/2 nodes are available: 1 node(s) cpu usage exceed threshold, "
        "1 node(s) didn't match Pod's node affinity/selector.",
    )


def test_without_load_aware_the_bigger_hot_node_wins(write_yaml: WriteYaml) -> None:
    """The control for the test above: the same cluster, the plain profile, the pod goes to hot."""
    cluster = docs(COOL, HOT, pod("web", {"cpu": "1", "memory": "1Gi"}))
    plain = write_yaml(PROFILE.split("      - name: LoadAwareScheduling")[0], name="plain.yaml")
    assert outcome(simulate([write_yaml(cluster)], config_path=plain))["web"][:2] == (SCHEDULED, "hot")


def test_every_node_hot(write_yaml: WriteYaml, profile: Path) -> None:
    # cool at 7 of 8 cores: (7000 + 850) / 8000 = 98% -> refused as well.
    cluster = docs(node("cool", "8", "32Gi"), node_metric("cool", "7", "4Gi"), HOT, pod("web", {"cpu": "1"}))
    status, where, message = outcome(simulate([write_yaml(cluster)], config_path=profile))["web"]
    assert (status, where) == (UNSCHEDULABLE, None)
    assert_failed_scheduling(message, "0/2 nodes are available: 2 node(s) cpu usage exceed threshold.")


@pytest.mark.parametrize(
    ("usage", "schedulable"),
    [
        ("5649m", True),  # (5649 + 850) / 10000 = 64.99% -> 65, not above 65
        ("5650m", True),  # exactly 65%
        ("5700m", False),  # 65.5% -> 66
        ("5749m", False),  # 65.99% -> 66
    ],
)
def test_cpu_threshold_boundary(write_yaml: WriteYaml, profile: Path, usage: str, schedulable: bool) -> None:
    cluster = docs(node("n", "10", "64Gi"), node_metric("n", usage, "1Gi"), pod("p", {"cpu": "1"}))
    status, where, message = outcome(simulate([write_yaml(cluster)], config_path=profile))["p"]
    if schedulable:
        assert (status, where, message) == (SCHEDULED, "n", "")
    else:
        assert (status, where) == (UNSCHEDULABLE, None)
        assert_failed_scheduling(message, "0/1 nodes are available: 1 node(s) cpu usage exceed threshold.")


def test_memory_threshold(write_yaml: WriteYaml, profile: Path) -> None:
    # est memory = 1Gi x 70% = 0.7Gi. 60Gi + 0.7Gi of 64Gi = 94.8% -> 95, not above 95;
    # 60.5Gi + 0.7Gi = 95.6% -> 96, refused.
    cluster = docs(
        node("ok", "32", "64Gi"),
        node_metric("ok", "1", "60Gi"),
        node("full", "32", "64Gi"),
        node_metric("full", "1", "61952Mi"),  # 60.5Gi
        pod("p", {"cpu": "1", "memory": "1Gi"}, node_selector={"kubernetes.io/hostname": "full"}),
        pod("q", {"cpu": "1", "memory": "1Gi"}, node_selector={"kubernetes.io/hostname": "ok"}),
    )
    got = outcome(simulate([write_yaml(cluster)], config_path=profile))
    assert got["q"] == (SCHEDULED, "ok", "")
    assert got["p"][:2] == (UNSCHEDULABLE, None)
    assert_failed_scheduling(
        got["p"][2],
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) memory usage exceed threshold.",
    )


def test_batch_pods_are_estimated_from_batch_cpu(write_yaml: WriteYaml, profile: Path) -> None:
    """A koord-batch pod's cpu estimate is its batch-cpu (spec 1.1's translation): 4000 x 85% = 3400m.

    colo at 6000m of 16000m: (6000 + 3400) / 16000 = 58.75% -> 59, fits; the second executor
    adds another 3400m: (6000 + 6800) / 16000 = 80% -> refused. Without the translation the
    pod's cpu (none) would count as the 250m default and both would fit.
    """
    cluster = docs(
        COLO, node_metric("colo", "6", "8Gi"), batch("exec-1", "4000", "4Gi"), batch("exec-2", "4000", "4Gi")
    )
    got = outcome(simulate([write_yaml(cluster)], config_path=profile))
    assert got["exec-1"] == (SCHEDULED, "colo", "")
    assert got["exec-2"][:2] == (UNSCHEDULABLE, None)
    assert_failed_scheduling(
        got["exec-2"][2], "0/1 nodes are available: 1 node(s) cpu usage exceed threshold."
    )


# --- the example ---------------------------------------------------------------------------------------


def test_example_loads(profile: Path) -> None:
    cluster = load_cluster([EXAMPLE], kind_specs(in_tree_registry()))
    assert cluster.warnings == []
    kinds = [o.kind for o in cluster.objects]
    assert kinds.count("PriorityClass") == 4
    nodes = {o.key for o in cluster.objects if o.kind == "Node"}
    metrics = {o.key: o.obj for o in cluster.objects if o.kind == "NodeMetric"}
    assert set(metrics) == nodes == {"colo-a", "colo-b", "colo-c", "prod-a"}
    assert all(isinstance(m, NodeMetric) and m.status.node_metric is not None for m in metrics.values())
    # Exactly one node is above the 65% cpu threshold by its own report.
    allocatable = {o.key: o.obj.status.allocatable for o in cluster.objects if o.kind == "Node"}
    hot = [
        n
        for n, m in metrics.items()
        if m.status.node_metric is not None
        and _cores(m.status.node_metric.node_usage.resources["cpu"]) / _cores(allocatable[n]["cpu"]) > 0.65
    ]
    assert hot == ["colo-b"]


def _cores(q: object) -> float:
    s = str(q)
    return int(s[:-1]) / 1000 if s.endswith("m") else float(s)


def check_example_outcome(result: SimResult) -> None:
    got = outcome(result)
    assert not any(where == "colo-b" for _, where, _ in got.values()), got
    status, where, message = got["ssd-cache"]
    assert (status, where) == (UNSCHEDULABLE, None)
    assert_failed_scheduling(
        message,
        "0/4 nodes are available: 1 node(s) cpu usage exceed threshold, "
        "3 node(s) didn't match Pod's node affinity/selector.",
    )
    for name in ("web-2", "web-3", "web-4"):
        assert got[name][0] == SCHEDULED and got[name][1] in ("colo-a", "colo-c", "prod-a"), got[name]
    # Batch and mid pods only where koordlet published reclaimed capacity (not prod-a).
    for name in ("spark-exec-1", "spark-exec-2", "spark-exec-3", "legacy-etl", "report"):
        assert got[name][0] == SCHEDULED and got[name][1] in ("colo-a", "colo-c"), got[name]
    assert result.summary.scheduled == 8 and result.summary.unschedulable == 1


def test_example_with_load_aware(profile: Path) -> None:
    check_example_outcome(simulate([EXAMPLE], config_path=profile))


def test_example_runs_with_the_default_profile(capsys: pytest.CaptureFixture[str]) -> None:
    """``scripts/simulate examples/mixed-workloads.yaml``; once the default profile enables
    LoadAwareScheduling, with the same outcome as the explicit profile."""
    assert main(["simulate", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "online/ssd-cache" in out
    profile = yaml.safe_load(default_profile_path().read_text())
    filters = [
        p["name"]
        for prof in profile["profiles"]
        for p in prof.get("plugins", {}).get("filter", {}).get("enabled", [])
    ]
    if "LoadAwareScheduling" in filters:
        check_example_outcome(simulate([EXAMPLE]))


# --- malformed input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"updateTime": "yesterday"}, "invalid RFC 3339 time 'yesterday'"),
        (
            {"nodeMetric": {"nodeUsage": {"resources": {"cpu": "lots"}}}},
            "status.nodeMetric.nodeUsage.resources.cpu",
        ),
        ({"nodeMetric": {"nodeUsage": {"resources": ["cpu"]}}}, "Expected `object`, got `array`"),
        ({"podsMetric": {"name": "x"}}, "Expected `array`, got `object`"),
        (
            {"nodeMetric": {"aggregatedNodeUsages": [{"duration": "soon", "usage": {}}]}},
            "status.nodeMetric.aggregatedNodeUsages[0].duration",
        ),
        (
            {"podsMetric": [{"name": "a", "podUsage": {"resources": {"memory": "1Qi"}}}]},
            "status.podsMetric[0].podUsage.resources.memory",
        ),
    ],
)
def test_malformed_node_metric_is_an_input_error_naming_it(
    write_yaml: WriteYaml, status: dict[str, object], expected: str
) -> None:
    bad = yaml.safe_dump(
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": "hot"},
            "status": status,
        }
    )
    path = write_yaml(docs(node("hot", "8", "32Gi"), bad))
    with pytest.raises(InputError) as err:
        load_cluster([path], kind_specs(in_tree_registry()))
    message = str(err.value)
    assert message.startswith(f"{path}: document 2 (NodeMetric hot): "), message
    assert expected in message, message


def test_malformed_node_metric_exits_2(write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]) -> None:
    bad = docs(node("n", "8", "32Gi"), node_metric("n", "8 cores", "1Gi"))
    assert main(["simulate", str(write_yaml(bad))]) == 2
    assert "(NodeMetric n): status.nodeMetric.nodeUsage.resources.cpu" in capsys.readouterr().err


def test_node_metric_round_trips_through_the_loader(write_yaml: WriteYaml) -> None:
    """What the loader keeps is what the file said (quantities untouched, for the plugin to parse)."""
    cluster = load_cluster([write_yaml(node_metric("n", "7500m", "12Gi"))], kind_specs(in_tree_registry()))
    (loaded,) = cluster.objects
    assert (loaded.kind, loaded.key, loaded.role) == ("NodeMetric", "n", "object")
    nm = loaded.obj
    assert isinstance(nm, NodeMetric)
    assert nm.status.update_time == UPDATED
    assert nm.status.node_metric is not None
    assert nm.status.node_metric.node_usage.resources == {"cpu": "7500m", "memory": "12Gi"}
    assert nm.spec.metric_collect_policy is not None
    assert nm.spec.metric_collect_policy.report_interval_seconds == 60
