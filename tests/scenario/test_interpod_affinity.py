"""Inter-pod affinity through ``simulate`` with the bundled profile, as a user runs it."""

from __future__ import annotations

from collections import Counter
from typing import Any

import yaml

from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, SimResult, simulate
from tests.builders import ZONE, node_manifest, pod_manifest, yaml_docs
from tests.scenario.helpers import WriteYaml, assert_failed_scheduling

ANTI_REASON = "node(s) didn't match pod anti-affinity rules"
EXISTING_REASON = "node(s) didn't satisfy existing pods anti-affinity rules"
AFFINITY_REASON = "node(s) didn't match pod affinity rules"


def node(name: str, zone: str = "", cpu: str = "4") -> dict[str, Any]:
    return node_manifest(name, cpu, "16Gi", labels={ZONE: zone} if zone else None, capacity=False)


def pod(
    name: str, labels: str, affinity: str = "", *, namespace: str = "default", node_name: str = ""
) -> dict[str, Any]:
    """A pod; ``labels`` and ``affinity`` are the insides of YAML flow mappings."""
    return pod_manifest(
        name,
        namespace=namespace,
        uid="",
        labels=yaml.safe_load("{" + labels + "}"),
        node_name=node_name,
        image="busybox",
        affinity=yaml.safe_load("{" + affinity + "}"),
    )


def required(kind: str, selector: str, key: str = "kubernetes.io/hostname", extra: str = "") -> str:
    return (
        f"{kind}: {{requiredDuringSchedulingIgnoredDuringExecution: "
        f"[{{labelSelector: {{matchLabels: {{{selector}}}}}, topologyKey: {key}{extra}}}]}}"
    )


def preferred(kind: str, selector: str, weight: int = 100, key: str = "kubernetes.io/hostname") -> str:
    return (
        f"{kind}: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: {weight}, "
        f"podAffinityTerm: {{labelSelector: {{matchLabels: {{{selector}}}}}, topologyKey: {key}}}}}]}}"
    )


def docs(*parts: dict[str, Any] | str) -> str:
    return yaml_docs(*(p if isinstance(p, dict) else p.strip("\n") for p in parts))


def placements(result: SimResult) -> dict[str, str | None]:
    return {p.name: p.node for p in result.pods}


def test_replicas_with_hostname_anti_affinity_get_a_node_each(write_yaml: WriteYaml) -> None:
    anti = required("podAntiAffinity", "app: web")
    path = write_yaml(docs(node("n1"), node("n2"), *(pod(f"web-{i}", "app: web", anti) for i in range(3))))
    result = simulate([path])
    nodes = [p.node for p in result.pods if p.status == SCHEDULED]
    assert sorted(nodes) == ["n1", "n2"]
    [pending] = [p for p in result.pods if p.status == UNSCHEDULABLE]
    assert_failed_scheduling(pending.message, f"0/2 nodes are available: 2 {ANTI_REASON}.")


def test_a_running_pods_anti_affinity_is_honoured(write_yaml: WriteYaml) -> None:
    guard = pod("guard", "app: guard", required("podAntiAffinity", "app: web"), node_name="n1")
    path = write_yaml(docs(node("n1"), node("n2"), guard, pod("web-0", "app: web"), pod("web-1", "app: web")))
    result = simulate([path])
    assert placements(result) == {"web-0": "n2", "web-1": "n2"}
    # With n2 gone, nowhere is left.
    path = write_yaml(docs(node("n1"), guard, pod("web-0", "app: web")), "one-node.yaml")
    result = simulate([path])
    assert_failed_scheduling(
        result.pod("default/web-0").message, f"0/1 nodes are available: 1 {EXISTING_REASON}."
    )


def test_zone_affinity_follows_the_pod_it_names(write_yaml: WriteYaml) -> None:
    db = pod("db", "app: db", node_name="b1")
    web = required("podAffinity", "app: db", "topology.kubernetes.io/zone")
    path = write_yaml(
        docs(
            node("a1", "a"),
            node("a2", "a"),
            node("b1", "b"),
            node("b2", "b"),
            node("x1"),
            db,
            *(pod(f"web-{i}", "app: web", web) for i in range(6)),
        )
    )
    result = simulate([path])
    assert {p.node for p in result.pods} == {"b1", "b2"}
    # Without a db anywhere, nothing can be placed: affinity is UnschedulableAndUnresolvable.
    path = write_yaml(docs(node("a1", "a"), node("x1"), pod("web", "app: web", web)), "no-db.yaml")
    result = simulate([path])
    assert result.pod("default/web").status == UNSCHEDULABLE
    assert_failed_scheduling(
        result.pod("default/web").message, f"0/2 nodes are available: 2 {AFFINITY_REASON}."
    )


def test_first_pod_of_a_self_affine_group_goes_anywhere_then_the_rest_follow(write_yaml: WriteYaml) -> None:
    together = required("podAffinity", "app: cache", "topology.kubernetes.io/zone")
    path = write_yaml(
        docs(
            node("a1", "a"),
            node("a2", "a"),
            node("b1", "b"),
            node("x1"),
            *(pod(f"cache-{i}", "app: cache", together) for i in range(5)),
        )
    )
    result = simulate([path])
    zones = {n: n[0] for n in ("a1", "a2", "b1")}
    assert all(p.status == SCHEDULED for p in result.pods)
    assert len({zones[p.node or ""] for p in result.pods}) == 1  # one zone, never the zoneless x1


def test_namespace_selector_reads_namespace_labels(write_yaml: WriteYaml) -> None:
    namespaces = """
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {team: a}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b, labels: {team: b}}
"""
    anti = required("podAntiAffinity", "app: web", extra=", namespaceSelector: {matchLabels: {team: a}}")
    path = write_yaml(
        docs(
            namespaces,
            node("n1"),
            node("n2"),
            node("n3"),
            pod("web-a", "app: web", namespace="team-a", node_name="n1"),
            pod("web-b", "app: web", namespace="team-b", node_name="n2"),
            *(pod(f"new-{i}", "app: web", anti, namespace="team-a") for i in range(3)),
        )
    )
    result = simulate([path])
    # Only team-a's web pods count (web-a on n1, and each other): web-b on n2 is in a namespace
    # the selector leaves out.
    assert sorted(p.node or "-" for p in result.pods) == ["-", "n2", "n3"]
    [pending] = [p for p in result.pods if p.node is None]
    assert_failed_scheduling(pending.message, f"0/3 nodes are available: 3 {ANTI_REASON}.")


def test_preferred_anti_affinity_spreads_replicas(write_yaml: WriteYaml) -> None:
    # n0 is far bigger: resource scoring alone would put every replica there.
    spread = preferred("podAntiAffinity", "app: web")
    nodes = [node("n0", cpu="64"), *(node(f"n{i}", cpu="1") for i in range(1, 4))]
    path = write_yaml(docs(*nodes, *(pod(f"web-{i}", "app: web", spread) for i in range(4))))
    result = simulate([path])
    assert Counter(p.node for p in result.pods) == {f"n{i}": 1 for i in range(4)}


def test_preferred_affinity_packs_replicas(write_yaml: WriteYaml) -> None:
    pack = preferred("podAffinity", "app: web")
    path = write_yaml(
        docs(*(node(f"n{i}") for i in range(4)), *(pod(f"web-{i}", "app: web", pack) for i in range(6)))
    )
    result = simulate([path])
    assert len({p.node for p in result.pods}) == 1


def test_explain_shows_the_verdicts_and_scores(write_yaml: WriteYaml) -> None:
    both = (
        "podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: "
        "{matchLabels: {app: web}}, topologyKey: kubernetes.io/hostname}], "
        "preferredDuringSchedulingIgnoredDuringExecution: [{weight: 50, podAffinityTerm: "
        "{labelSelector: {matchLabels: {app: db}}, topologyKey: kubernetes.io/hostname}}]}"
    )
    path = write_yaml(
        docs(
            node("n1"),
            node("n2"),
            node("n3"),
            pod("web-0", "app: web", node_name="n1"),
            pod("db-0", "app: db", node_name="n2"),
            pod("web-1", "app: web", both),
        )
    )
    result = simulate([path], explain=True)
    assert result.pod("default/web-1").node == "n3"
    explain = {e["node"]: e for e in result.pod("default/web-1").explain or []}
    assert set(explain) == {"n2", "n3"}  # the feasible nodes, best first
    assert explain["n3"]["filters"]["InterPodAffinity"] == {"code": "Success"}
    assert explain["n3"]["scores"]["InterPodAffinity"] == {
        "raw": 0,
        "normalized": 100,
        "weight": 2,
        "weighted": 200,
    }
    assert explain["n2"]["scores"]["InterPodAffinity"] == {
        "raw": -50,
        "normalized": 0,
        "weight": 2,
        "weighted": 0,
    }
    # An unschedulable pod's attempt lists every node's verdict.
    path = write_yaml(
        docs(node("n1"), pod("web-0", "app: web", node_name="n1"), pod("web-1", "app: web", both)), "b.yaml"
    )
    result = simulate([path], explain=True)
    [entry] = result.pod("default/web-1").explain or []
    assert entry["filters"]["InterPodAffinity"] == {"code": "Unschedulable", "reasons": [ANTI_REASON]}
