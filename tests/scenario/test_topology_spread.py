"""PodTopologySpread through ``simulate``: replicas spread over zones, minDomains, default
constraints from a ReplicaSet owner, nodeTaintsPolicy, and what ``--explain`` shows."""

from __future__ import annotations

from collections import Counter

from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, SimResult, simulate
from tests.scenario.helpers import WriteYaml, assert_failed_scheduling

NODE = """
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{kubernetes.io/hostname: {name}, topology.kubernetes.io/zone: {zone}}}
spec:
  taints: {taints}
status:
  allocatable: {{cpu: "8", memory: 16Gi, pods: "110"}}
"""

TAINT = "[{key: dedicated, value: infra, effect: NoSchedule}]"


def _node(name: str, zone: str, taints: str = "[]") -> str:
    return NODE.format(name=name, zone=zone, taints=taints)


def _replica(name: str, spread: str = "", owner: str = "") -> str:
    ref = f"{{apiVersion: apps/v1, kind: ReplicaSet, name: {owner}, uid: rs-uid, controller: true}}"
    owned = f"\n  ownerReferences: [{ref}]" if owner else ""
    return f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels: {{app: web}}{owned}
spec:
  schedulerName: koord-scheduler
{spread}
  containers:
  - name: c
    resources: {{requests: {{cpu: "1", memory: 1Gi}}}}
"""


def _zone_spread(max_skew: int = 1, extra: str = "") -> str:
    return f"""  topologySpreadConstraints:
  - maxSkew: {max_skew}
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
    labelSelector: {{matchLabels: {{app: web}}}}{extra}"""


def _docs(*docs: str) -> str:
    return "\n---\n".join(d.strip("\n") for d in docs) + "\n"


def _zones(result: SimResult, zone_of: dict[str, str]) -> Counter[str]:
    return Counter(zone_of[p.node] for p in result.pods if p.node is not None)


ZONE_OF = {"a1": "a", "a2": "a", "b1": "b", "b2": "b", "c1": "c", "c2": "c"}


def _three_zones(taint_c: bool = False) -> list[str]:
    return [_node(n, z, TAINT if taint_c and z == "c" else "[]") for n, z in ZONE_OF.items()]


def _big(doc: str) -> str:
    """A node with eight times the CPU: resource scoring alone would send every replica there."""
    return doc.replace('cpu: "8"', 'cpu: "64"')


def test_four_replicas_spread_two_one_one_over_three_zones(write_yaml: WriteYaml) -> None:
    pods = [_replica(f"web-{i}", _zone_spread()) for i in range(4)]
    nodes = [_big(n) if "zone: a" in n else n for n in _three_zones()]
    result = simulate([write_yaml(_docs(*nodes, *pods))])
    assert all(p.status == SCHEDULED for p in result.pods)
    assert sorted(_zones(result, ZONE_OF).values()) == [1, 1, 2]


def test_running_replicas_count(write_yaml: WriteYaml) -> None:
    """Two replicas already run in zone a: the next two must go to zone b, then either may."""
    nodes = [_big(_node("a1", "a")), _node("b1", "b")]
    bound = """
apiVersion: v1
kind: Pod
metadata: {name: old-0, namespace: default, labels: {app: web}}
spec:
  nodeName: a1
  containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"""
    extra = bound.replace("old-0", "old-1")
    pods = [_replica(f"web-{i}", _zone_spread()) for i in range(3)]
    result = simulate([write_yaml(_docs(*nodes, bound, extra, *pods))])
    assert [result.pod(f"default/web-{i}").node for i in range(2)] == ["b1", "b1"]
    assert result.pod("default/web-2").status == SCHEDULED


def test_min_domains_holds_replicas_back_until_enough_zones_exist(write_yaml: WriteYaml) -> None:
    """minDomains 3 over two zones: the global minimum counts as 0, so each zone takes one replica."""
    nodes = [_node("a1", "a"), _node("a2", "a"), _node("b1", "b"), _node("b2", "b")]
    pods = [_replica(f"web-{i}", _zone_spread(extra="\n    minDomains: 3")) for i in range(3)]
    result = simulate([write_yaml(_docs(*nodes, *pods))])
    statuses = Counter(p.status for p in result.pods)
    assert statuses == {SCHEDULED: 2, UNSCHEDULABLE: 1}
    assert sorted(_zones(result, ZONE_OF).values()) == [1, 1]
    (waiting,) = [p for p in result.pods if p.status == UNSCHEDULABLE]
    assert_failed_scheduling(
        waiting.message, "0/4 nodes are available: 4 node(s) didn't match pod topology spread constraints."
    )


def test_node_taints_policy_decides_whether_a_tainted_zone_counts(write_yaml: WriteYaml) -> None:
    """Zone c's nodes are tainted and the replicas do not tolerate it. With the default Ignore it
    still counts as an empty domain, so after one replica each in a and b none may go further;
    with Honor it is no domain, and four replicas spread 2/2 over a and b."""
    pods = [_replica(f"web-{i}", _zone_spread()) for i in range(4)]
    ignore = simulate([write_yaml(_docs(*_three_zones(taint_c=True), *pods), name="ignore.yaml")])
    assert Counter(p.status for p in ignore.pods) == {SCHEDULED: 2, UNSCHEDULABLE: 2}
    assert _zones(ignore, ZONE_OF) == {"a": 1, "b": 1}
    stuck = next(p for p in ignore.pods if p.status == UNSCHEDULABLE)
    assert_failed_scheduling(
        stuck.message,
        "0/6 nodes are available: 2 node(s) had untolerated taint {dedicated: infra}, "
        "4 node(s) didn't match pod topology spread constraints.",
    )
    honor_pods = [_replica(f"web-{i}", _zone_spread(extra="\n    nodeTaintsPolicy: Honor")) for i in range(4)]
    honor = simulate([write_yaml(_docs(*_three_zones(taint_c=True), *honor_pods), name="honor.yaml")])
    assert all(p.status == SCHEDULED for p in honor.pods)
    assert _zones(honor, ZONE_OF) == {"a": 2, "b": 2}


LIST_DEFAULTS = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: koord-scheduler
    pluginConfig:
      - name: PodTopologySpread
        args:
          defaultingType: List
          defaultConstraints:
            - maxSkew: 1
              topologyKey: topology.kubernetes.io/zone
              whenUnsatisfiable: DoNotSchedule
"""

REPLICA_SET = """
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-6d4b, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
"""


def test_default_constraints_spread_a_replica_sets_pods(write_yaml: WriteYaml) -> None:
    """With List defaults, pods without constraints of their own are spread with a selector taken
    from their ReplicaSet; the same pods without an owner are not constrained."""
    config = write_yaml(LIST_DEFAULTS, name="profile.yaml")
    # Zone a has far more room: left alone, resource scoring would put most replicas there.
    nodes = [
        _big(_node("a1", "a")),
        _big(_node("a2", "a")),
        _node("b1", "b"),
        _node("c1", "c"),
    ]
    owned = [_replica(f"web-{i}", owner="web-6d4b") for i in range(6)]
    result = simulate([write_yaml(_docs(*nodes, REPLICA_SET, *owned))], config_path=config)
    assert all(p.status == SCHEDULED for p in result.pods)
    zone_of = {"a1": "a", "a2": "a", "b1": "b", "c1": "c"}
    assert _zones(result, zone_of) == {"a": 2, "b": 2, "c": 2}
    # Without the ReplicaSet (no Service either) the default constraints do not apply.
    free = simulate([write_yaml(_docs(*nodes, *owned), name="no-rs.yaml")], config_path=config)
    assert all(p.status == SCHEDULED for p in free.pods)
    assert _zones(free, zone_of)["a"] > 2


def test_explain_shows_the_spread_verdicts(write_yaml: WriteYaml) -> None:
    """A replica that fits nowhere: zone a already holds one more than empty zone b, whose only node
    is full, and x1 has no zone label."""
    nodes = [
        _node("a1", "a"),
        _node("b1", "b").replace('cpu: "8"', 'cpu: "500m"'),
        _node("x1", "a").replace("topology.kubernetes.io/zone: a", "rack: r1"),
    ]
    bound = """
apiVersion: v1
kind: Pod
metadata: {name: old-0, namespace: default, labels: {app: web}}
spec:
  nodeName: a1
  containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"""
    result = simulate([write_yaml(_docs(*nodes, bound, _replica("web-0", _zone_spread())))], explain=True)
    pod = result.pod("default/web-0")
    assert pod.status == UNSCHEDULABLE and pod.explain is not None
    verdicts = {e["node"]: e["filters"] for e in pod.explain}
    assert verdicts["a1"] == {
        "PodTopologySpread": {
            "code": "Unschedulable",
            "reasons": ["node(s) didn't match pod topology spread constraints"],
        }
    }
    assert verdicts["x1"] == {
        "PodTopologySpread": {
            "code": "UnschedulableAndUnresolvable",
            "reasons": ["node(s) didn't match pod topology spread constraints (missing required label)"],
        }
    }
    assert list(verdicts["b1"]) == ["NodeResourcesFit"]  # rejected before PodTopologySpread runs
    assert_failed_scheduling(
        pod.message,
        "0/3 nodes are available: 1 Insufficient cpu, "
        "1 node(s) didn't match pod topology spread constraints, "
        "1 node(s) didn't match pod topology spread constraints (missing required label).",
    )
    # A replica that fits shows the plugin's Success among its filters and its score.
    fits = simulate(
        [
            write_yaml(
                _docs(_node("a1", "a"), _node("b1", "b"), _replica("web-1", _zone_spread())), name="fits.yaml"
            )
        ],
        explain=True,
    )
    placed = fits.pod("default/web-1")
    assert placed.explain is not None
    assert all(e["filters"]["PodTopologySpread"] == {"code": "Success"} for e in placed.explain)
