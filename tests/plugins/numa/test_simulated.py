"""NodeNUMAResource inside the real scheduler (the simulator): framework wiring, binding, restart.

The registry and profile are built here (in-tree plugins plus NodeNUMAResource), so the
test does not depend on the default profile enabling the plugin.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from koordsched.api.koordinator import ANNOTATION_RESOURCE_STATUS
from koordsched.backends.sim.runner import SimResult, simulate
from koordsched.framework.registry import Registry
from koordsched.plugins.nodenumaresource.cpuset import parse_cpuset
from koordsched.plugins.registry import in_tree_registry
from tests.builders import container, node_manifest, pod_manifest
from tests.plugins.numa.helpers import cpu_infos

PROFILE = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [
        {
            "schedulerName": "koord-scheduler",
            "plugins": {
                point: {"enabled": [{"name": "NodeNUMAResource"}]}
                for point in ("preFilter", "filter", "reserve", "preBind")
            }
            | {"score": {"enabled": [{"name": "NodeNUMAResource", "weight": 1}]}},
        }
    ],
}


def registry() -> Registry:
    return in_tree_registry()


def node_docs(name: str) -> list[dict[str, Any]]:
    infos = cpu_infos(2, 1, 4, 2)
    return [
        node_manifest(name, "16", "128Gi", capacity=False),
        {
            "apiVersion": "topology.node.k8s.io/v1alpha1",
            "kind": "NodeResourceTopology",
            "metadata": {
                "name": name,
                "annotations": {"node.koordinator.sh/cpu-topology": json.dumps({"detail": infos})},
            },
            "topologyPolicies": ["None"],
            "zones": [
                {
                    "name": f"node-{i}",
                    "type": "Node",
                    "resources": [
                        {"name": "cpu", "capacity": "8", "allocatable": "8"},
                        {"name": "memory", "capacity": "64Gi", "allocatable": "64Gi"},
                    ],
                }
                for i in range(2)
            ],
        },
    ]


def pod_doc(
    name: str, cpu: str, *, qos: str = "", numa: str = "", node: str = "", status: str = ""
) -> dict[str, Any]:
    labels = {"koordinator.sh/qosClass": qos} if qos else {}
    annotations: dict[str, str] = {}
    if numa:
        annotations["scheduling.koordinator.sh/numa-topology-spec"] = json.dumps({"numaTopologyPolicy": numa})
    if status:
        annotations[ANNOTATION_RESOURCE_STATUS] = status
    res = {"cpu": cpu, "memory": "2Gi"}
    return pod_manifest(
        name,
        uid=f"uid-{name}",
        labels=labels,
        annotations=annotations,
        node_name=node,
        containers=[container("c", res, limits=res)],
    )


def run(tmp_path: Path, docs: list[dict[str, Any]]) -> SimResult:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all(docs))
    profile = tmp_path / "profile.yaml"
    profile.write_text(yaml.safe_dump(PROFILE))
    return simulate([str(cluster)], config_path=str(profile), registry=registry())


def test_bound_pods_never_share_cpus_and_numa_pods_stay_aligned(tmp_path: Path) -> None:
    docs = [*node_docs("n1"), *node_docs("n2")]
    # Already running: holds CPUs 0-3 of n1 (learnt from its annotation, as after a restart).
    docs.append(pod_doc("running", "4", qos="LSR", node="n1", status='{"cpuset":"0-3"}'))
    # Queued first, while the nodes are empty: only the NUMA alignment can refuse it.
    docs.append(pod_doc("too-big", "12", numa="SingleNUMANode"))
    docs += [pod_doc(f"lsr-{i}", "2", qos="LSR") for i in range(6)]
    docs += [pod_doc(f"numa-{i}", "3", numa="SingleNUMANode") for i in range(4)]
    result = run(tmp_path, docs)
    held: dict[str, set[int]] = {"n1": {0, 1, 2, 3}, "n2": set()}
    for pod in result.pods:
        if pod.name == "too-big":
            assert pod.node is None
            assert (
                "Unaligned NUMA Hint cause cpu prefer [11] among [11],memory prefer [11] among [11]"
                in pod.message
            )
            continue
        assert pod.node in held, (pod.name, pod.message)
        status = json.loads(pod.annotations[ANNOTATION_RESOURCE_STATUS])
        if pod.name.startswith("lsr"):
            cpus = parse_cpuset(status["cpuset"])
            assert len(cpus) == 2 and not cpus & held[pod.node]
            held[pod.node] |= cpus
        else:
            (numa,) = status["numaNodeResources"]
            assert numa["resources"]["cpu"] == "3"
