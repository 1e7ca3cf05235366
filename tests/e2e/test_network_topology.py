"""Network-topology-aware gangs on a real API server: with --enable-network-topology-manager the
scheduler builds the tree of ClusterNetworkTopology "default" from the node labels, writes its
status.detailStatus through the status subresource (again when a node joins), and places a
MustGather gang inside one block.

This module runs its own control plane with the CRDs installed, so the other tests' schedulers do
not watch ClusterNetworkTopologies.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from koordsched.backends.kube.scheduler_flags import RunFlags
from tests.builders import BLOCK_LABEL, SPINE_LABEL, spine_block_topology
from tests.e2e.conftest import SCHEDULER_USER
from tests.e2e.fixtures import control_plane, own_lease
from tests.e2e.helpers import Api, Cluster, node_of, pod, scheduler_in_process, wait_for, write_profile
from tests.e2e.objects import node
from tests.e2e.test_crd_smoke import install_crds
from tests.e2e.test_preemption import high

pytestmark = pytest.mark.e2e

__all__ = ["high"]  # the PriorityClass fixture, used by name

TOPOLOGIES = "/apis/scheduling.koordinator.sh/v1alpha1/clusternetworktopologies"
PODGROUPS = "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{ns}/podgroups"
SPINE, BLOCK = SPINE_LABEL, BLOCK_LABEL

kube_env = control_plane({SCHEDULER_USER: ["system:masters"]})


@pytest.fixture
def scheduler_kubeconfig(kube_env: Any) -> Path:
    path: Path = kube_env.kubeconfig_for(SCHEDULER_USER)
    return path


def aware_profile(path: Path, lease: str) -> Path:
    profile = write_profile(path, lease_name=lease)
    cfg = yaml.safe_load(profile.read_text())
    cfg["profiles"][0].setdefault("pluginConfig", []).append(
        {
            "name": "Coscheduling",
            "args": {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "CoschedulingArgs",
                "awareNetworkTopology": True,
            },
        }
    )
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


async def add_node(api: Api, cluster: Cluster, short: str, spine: str, block: str) -> str:
    body = node(cluster.node_name(short), cpu="2")
    body["metadata"]["labels"].update({SPINE: spine, BLOCK: block})
    await api.create_node(body)
    cluster.nodes.append(body["metadata"]["name"])
    return str(body["metadata"]["name"])


def summary(status: dict[str, Any]) -> list[tuple[str, str, int, list[str] | None]]:
    return [
        (
            d["topologyInfo"]["topologyLayer"],
            d["topologyInfo"]["topologyName"],
            d["nodeNum"],
            d.get("childTopologyNames"),
        )
        for d in status.get("detailStatus") or []
    ]


async def test_tree_status_is_written_and_a_gang_stays_in_one_block(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path
) -> None:
    await install_crds(api)
    await api.delete(f"{TOPOLOGIES}/default")  # a leftover of a rerun
    await api.post(TOPOLOGIES, spine_block_topology())
    a = await add_node(api, cluster, "a", "s1", "b1")
    b = await add_node(api, cluster, "b", "s1", "b2")
    c = await add_node(api, cluster, "c", "s1", "b2")
    lease = await own_lease(api, cluster)
    profile = aware_profile(tmp_path / "profile.yaml", lease)
    flags = RunFlags(config_given=True, network_topology_manager=True)

    async with scheduler_in_process(profile, scheduler_kubeconfig, flags) as sched:
        expected = [
            ("ClusterTopologyLayer", "", 3, ["s1"]),
            ("SpineLayer", "s1", 3, ["b1", "b2"]),
            ("BlockLayer", "b1", 1, None),
            ("BlockLayer", "b2", 2, None),
        ]

        async def written() -> bool:
            got = await api.get(f"{TOPOLOGIES}/default")
            return summary(got.get("status") or {}) == expected

        await wait_for(written, what="status.detailStatus written", detail=sched.log_text, timeout=60)
        stored = await api.get(f"{TOPOLOGIES}/default")
        assert stored["status"]["detailStatus"][0]["topologyInfo"] == {
            "topologyLayer": "ClusterTopologyLayer",
            "topologyName": "",
        }
        assert "parentTopologyInfo" not in stored["status"]["detailStatus"][0]

        # A gang of two (1.5 cpu each: one per node) MustGather BlockLayer: only b2 holds two.
        path = PODGROUPS.format(ns=cluster.ns)
        spec = '{"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather"}]}'
        await api.post(
            path,
            {
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {
                    "name": "train",
                    "namespace": cluster.ns,
                    "annotations": {"gang.scheduling.koordinator.sh/network-topology-spec": spec},
                },
                "spec": {"minMember": 2, "scheduleTimeoutSeconds": 30},
            },
        )
        for name in ("w0", "w1"):
            body = pod(cluster.ns, name, cpu="1500m")
            body["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] = "train"
            await api.create_pod(body)

        async def bound() -> bool:
            pods = await cluster.pods()
            return all(node_of(pods[n]) for n in ("w0", "w1"))

        await wait_for(bound, what="the gang bound", detail=sched.log_text, timeout=60)
        pods = await cluster.pods()
        assert {node_of(pods["w0"]), node_of(pods["w1"])} == {b, c}

        # A node joining block b1 shows in the status.
        await add_node(api, cluster, "d", "s1", "b1")
        expected = [
            ("ClusterTopologyLayer", "", 4, ["s1"]),
            ("SpineLayer", "s1", 4, ["b1", "b2"]),
            ("BlockLayer", "b1", 2, None),
            ("BlockLayer", "b2", 2, None),
        ]
        await wait_for(written, what="status.detailStatus rewritten", detail=sched.log_text, timeout=60)
    assert a


async def test_a_topology_gang_preempts_and_binds_once_its_victim_is_gone(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path, high: str
) -> None:
    """Job-level preemption for a MustGather BlockLayer gang of two: b2's two nodes hold it once the
    low-priority pod on one of them is gone; the victim's deletion brings the gang back at once."""
    await install_crds(api)
    await api.delete(f"{TOPOLOGIES}/default")  # a leftover of a rerun
    await api.post(TOPOLOGIES, spine_block_topology())
    await add_node(api, cluster, "a", "s1", "b1")
    b = await add_node(api, cluster, "b", "s1", "b2")
    c = await add_node(api, cluster, "c", "s1", "b2")
    low = pod(cluster.ns, "low", cpu="1")
    low["spec"]["nodeName"] = b
    await api.create_pod(low)
    lease = await own_lease(api, cluster)
    profile = aware_profile(tmp_path / "profile.yaml", lease)
    cfg = yaml.safe_load(profile.read_text())
    for entry in cfg["profiles"][0]["pluginConfig"]:
        if entry["name"] == "Coscheduling":
            entry["args"]["enablePreemption"] = True
    profile.write_text(yaml.safe_dump(cfg, sort_keys=False))
    flags = RunFlags(config_given=True, network_topology_manager=True)

    async with scheduler_in_process(profile, scheduler_kubeconfig, flags) as sched:
        spec = '{"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather"}]}'
        await api.post(
            PODGROUPS.format(ns=cluster.ns),
            {
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {
                    "name": "job",
                    "namespace": cluster.ns,
                    "annotations": {"gang.scheduling.koordinator.sh/network-topology-spec": spec},
                },
                "spec": {"minMember": 2, "scheduleTimeoutSeconds": 30},
            },
        )
        for name in ("w0", "w1"):
            body = pod(cluster.ns, name, cpu="1500m")
            body["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] = "job"
            body["spec"]["priorityClassName"] = high
            await api.create_pod(body)

        async def bound() -> bool:
            pods = await cluster.pods()
            return all(node_of(pods[n]) for n in ("w0", "w1"))

        # Well within the 5 minutes after which an unschedulable pod is retried anyway.
        await wait_for(bound, what="the gang bound after its preemption", detail=sched.log_text, timeout=60)
        pods = await cluster.pods()
        assert {node_of(pods["w0"]), node_of(pods["w1"])} == {b, c}
        assert "low" not in pods
        sched.assert_running()
