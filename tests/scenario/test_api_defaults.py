"""The API server's defaulting mirrored for manifests, through ``simulate`` as a user runs it.

Objects in a cluster went through the API server's defaulting; manifests given to the
simulator did not. What scheduling depends on is applied by the loader
(:mod:`koordsched.api.defaults`): a ``hostNetwork`` pod's ports become host ports, an empty
port protocol is TCP, every Namespace carries its name label (and one exists for every
namespace the manifests use).
"""

from __future__ import annotations

from typing import Any

import msgspec

from koordsched.api.core import Pod
from koordsched.api.defaults import NAMESPACE_NAME_LABEL, default_namespace, default_pod
from koordsched.api.workloads import Namespace
from koordsched.backends.sim.loader import kind_specs, load_cluster
from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, simulate
from koordsched.plugins.registry import in_tree_registry
from tests.builders import node_manifest, yaml_docs
from tests.scenario.helpers import WriteYaml, assert_failed_scheduling

PORTS_REASON = "node(s) didn't have free ports for the requested pod ports"


def node(name: str) -> dict[str, Any]:
    return node_manifest(name, "8", "16Gi", capacity=False)


def exporter(name: str, *, node_name: str = "", ports: str = "[{containerPort: 9100}]") -> str:
    bound = f"\n  nodeName: {node_name}" if node_name else ""
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: monitoring, labels: {{app: node-exporter}}}}
spec:
  schedulerName: koord-scheduler{bound}
  hostNetwork: true
  containers: [{{name: exporter, image: prom/node-exporter, ports: {ports},
                 resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}}}]
"""


def docs(*parts: dict[str, Any] | str) -> str:
    return yaml_docs(*(p if isinstance(p, dict) else p.strip("\n") for p in parts))


# --- hostNetwork ports ----------------------------------------------------------------------------


def test_two_host_network_node_exporters_never_share_a_node(write_yaml: WriteYaml) -> None:
    path = write_yaml(docs(node("n1"), node("n2"), *(exporter(f"exporter-{i}") for i in range(3))))
    result = simulate([path])
    placed = [p.node for p in result.pods if p.status == SCHEDULED]
    assert sorted(placed) == ["n1", "n2"]  # type: ignore[type-var]
    [pending] = [p for p in result.pods if p.status == UNSCHEDULABLE]
    assert_failed_scheduling(pending.message, f"0/2 nodes are available: 2 {PORTS_REASON}.")


def test_a_running_host_network_pod_holds_its_port(write_yaml: WriteYaml) -> None:
    running = exporter("old", node_name="n1")
    path = write_yaml(docs(node("n1"), node("n2"), running, exporter("new")))
    assert simulate([path]).pod("monitoring/new").node == "n2"


def test_host_network_init_container_ports_are_defaulted_but_not_held(write_yaml: WriteYaml) -> None:
    """The API server defaults init containers' ports too; kube-scheduler v1.28's NodePorts reads
    only the regular containers' ports, so the pod still fits next to an exporter."""
    init = """
apiVersion: v1
kind: Pod
metadata: {name: setup, namespace: monitoring}
spec:
  schedulerName: koord-scheduler
  hostNetwork: true
  initContainers: [{name: probe, image: busybox, ports: [{containerPort: 9100}]}]
  containers: [{name: c, image: busybox}]
"""
    path = write_yaml(docs(node("n1"), exporter("old", node_name="n1"), init))
    cluster = load_cluster([path], kind_specs(in_tree_registry()))
    [setup] = [o.obj for o in cluster.objects if o.key == "monitoring/setup"]
    assert setup.spec.init_containers[0].ports[0].host_port == 9100
    assert simulate([path]).pod("monitoring/setup").node == "n1"


def test_without_host_network_a_container_port_takes_no_host_port(write_yaml: WriteYaml) -> None:
    plain = [e.replace("  hostNetwork: true\n", "") for e in (exporter("a"), exporter("b"))]
    result = simulate([write_yaml(docs(node("n1"), *plain))])
    assert [p.node for p in result.pods] == ["n1", "n1"]


def test_an_empty_protocol_is_tcp(write_yaml: WriteYaml) -> None:
    tcp = exporter("tcp", node_name="n1", ports="[{containerPort: 53, protocol: TCP}]")
    empty = exporter("empty", ports='[{containerPort: 53, protocol: ""}]')
    udp = exporter("udp", ports="[{containerPort: 53, protocol: UDP}]")
    result = simulate([write_yaml(docs(node("n1"), tcp, empty, udp))])
    assert result.pod("monitoring/udp").node == "n1"
    assert_failed_scheduling(
        result.pod("monitoring/empty").message, f"0/1 nodes are available: 1 {PORTS_REASON}."
    )


def test_a_host_port_other_than_the_container_port_is_refused(write_yaml: WriteYaml) -> None:
    bad = exporter("bad", ports="[{containerPort: 9100, hostPort: 9200}]")
    result = simulate([write_yaml(docs(node("n1"), bad))])
    assert result.pod("monitoring/bad").node is None
    [warning] = [w for w in result.warnings if "Pod monitoring/bad" in w]
    assert (
        "spec.containers[0].ports[0].hostPort: Invalid value: 9200: "
        "must match `containerPort` when `hostNetwork` is true" in warning
    )


def test_default_pod_leaves_a_defaulted_pod_alone() -> None:
    p = msgspec.convert(
        {
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "protocol": "UDP"}]}]},
        },
        Pod,
    )
    assert default_pod(p) is p
    host = msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, host_network=True))
    (port,) = default_pod(host).spec.containers[0].ports
    assert (port.host_port, port.protocol) == (80, "UDP")
    defaulted = default_pod(host)
    assert default_pod(defaulted) is defaulted


# --- Namespaces ---------------------------------------------------------------------------------


def test_namespaces_get_their_name_label() -> None:
    ns = msgspec.convert({"metadata": {"name": "team-a", "labels": {"env": "prod"}}}, Namespace)
    labels = default_namespace(ns).metadata.labels
    assert labels == {"env": "prod", NAMESPACE_NAME_LABEL: "team-a"}
    # The API server overwrites a wrong value.
    lying = msgspec.convert({"metadata": {"name": "b", "labels": {NAMESPACE_NAME_LABEL: "a"}}}, Namespace)
    assert default_namespace(lying).metadata.labels == {NAMESPACE_NAME_LABEL: "b"}


def test_the_loader_implies_the_namespaces_pods_use(write_yaml: WriteYaml) -> None:
    given = "apiVersion: v1\nkind: Namespace\nmetadata: {name: monitoring, labels: {team: obs}}\n"
    path = write_yaml(docs(node("n1"), given, exporter("e"), exporter("f").replace("monitoring", "other")))
    cluster = load_cluster([path], kind_specs(in_tree_registry()))
    namespaces = {o.key: o.obj.metadata.labels for o in cluster.objects if o.kind == "Namespace"}
    assert namespaces == {
        "monitoring": {"team": "obs", NAMESPACE_NAME_LABEL: "monitoring"},
        "other": {NAMESPACE_NAME_LABEL: "other"},
    }
    assert not cluster.warnings


def test_a_namespace_selector_by_name_label_matches(write_yaml: WriteYaml) -> None:
    """A term selecting namespaces by ``kubernetes.io/metadata.name`` (how one names namespaces in
    a selector) works with the Namespace given without labels, or not given at all."""
    db = """
apiVersion: v1
kind: Pod
metadata: {name: db, namespace: data, labels: {app: db}}
spec: {nodeName: n2, containers: [{name: c, image: db}]}
"""
    web = """
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  schedulerName: koord-scheduler
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - labelSelector: {matchLabels: {app: db}}
          namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: data}}
          topologyKey: kubernetes.io/hostname
  containers: [{name: c, image: web}]
"""
    unlabelled = "apiVersion: v1\nkind: Namespace\nmetadata: {name: data}\n"
    for extra in ([unlabelled], []):
        result = simulate([write_yaml(docs(node("n1"), node("n2"), *extra, db, web))])
        assert result.pod("default/web").node == "n2", extra


def test_the_workload_kinds_load(write_yaml: WriteYaml) -> None:
    """Namespace, Service, ReplicaSet, StatefulSet and ReplicationController are read, not skipped."""
    objects = """
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {selector: {app: web}}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-5d8, namespace: shop}
spec: {selector: {matchLabels: {app: web}}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: shop}
spec: {selector: {matchLabels: {app: db}}}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: legacy, namespace: shop}
spec: {selector: {app: legacy}}
"""
    cluster = load_cluster([write_yaml(docs(node("n1"), objects))], kind_specs(in_tree_registry()))
    assert not cluster.warnings
    kinds = sorted(o.kind for o in cluster.objects if o.kind != "Node")
    assert kinds == ["Namespace", "ReplicaSet", "ReplicationController", "Service", "StatefulSet"]
