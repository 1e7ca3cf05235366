"""The volume plugins against a real kube-apiserver.

A claim whose class waits for the first consumer is bound to a local PV on the node the pod
goes to: the scheduler writes the PV's claimRef, waits for the binding to complete (played by
the test: no PV controller runs here, see tests/e2e/volumes.py) and only then binds the pod. A
claim to provision gets the selected-node annotation for the provisioner; a pod naming a claim
that does not exist stays Pending with upstream's reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import (
    LEASE_NAMESPACE,
    Api,
    Cluster,
    condition_message,
    node_of,
    pod,
    unique,
    write_profile,
)
from tests.e2e.helpers import scheduler_in_process as running
from tests.e2e.volumes import (
    BOUND_BY_CONTROLLER,
    Storage,
    claim,
    complete_binding,
    local_pv,
    provision,
    storage_class,
    wait_claim_ref,
    wait_selected_node,
    with_claim,
)

pytestmark = pytest.mark.e2e


def profile(tmp_path: Path, cluster: Cluster) -> Path:
    lease = unique("koord-scheduler")
    cluster.leases.append((LEASE_NAMESPACE, lease))
    return write_profile(tmp_path / "profile.yaml", lease_name=lease)


@pytest.fixture
async def storage(api: Api) -> Any:
    s = Storage(api)
    try:
        yield s
    finally:
        await s.cleanup()


async def test_wait_for_first_consumer_claim_binds_a_local_pv_on_the_chosen_node(
    api: Api, cluster: Cluster, storage: Storage, scheduler_kubeconfig: Path, tmp_path: Path
) -> None:
    small = await cluster.add_node("small", cpu="1")
    big = await cluster.add_node("big", cpu="4")
    sc = unique("local")
    await storage.add_class(storage_class(sc))
    pv_small, pv_big = unique("pv-small"), unique("pv-big")
    await storage.add_pv(local_pv(pv_small, small, sc))
    await storage.add_pv(local_pv(pv_big, big, sc))
    created = await storage.add_claim(claim(cluster.ns, "data", sc))
    async with running(profile(tmp_path, cluster), scheduler_kubeconfig) as sched:
        # Only the big node has the CPU: the claim must get the PV pinned there.
        await api.create_pod(with_claim(pod(cluster.ns, "db", cpu="2"), "data"))
        pv = await wait_claim_ref(api, pv_big)
        ref = pv["spec"]["claimRef"]
        assert (ref["namespace"], ref["name"], ref["uid"]) == (cluster.ns, "data", created["metadata"]["uid"])
        assert pv["metadata"]["annotations"][BOUND_BY_CONTROLLER] == "yes"
        other = await api.get(f"/api/v1/persistentvolumes/{pv_small}")
        assert not other["spec"].get("claimRef"), other
        # Not bound while the PV controller has not completed the binding.
        assert not node_of(await cluster.get_pod("db"))
        await complete_binding(api, cluster.ns, "data", pv_big)
        pods = await cluster.wait_bound(["db"])
        assert node_of(pods["db"]) == big
        sched.assert_running()
        assert sched.problems() == []


async def test_a_claim_to_provision_gets_the_selected_node(
    api: Api, cluster: Cluster, storage: Storage, scheduler_kubeconfig: Path, tmp_path: Path
) -> None:
    await cluster.add_node("a", cpu="1")
    b = await cluster.add_node("b", cpu="4")
    sc = unique("csi")
    await storage.add_class(storage_class(sc, provisioner="csi.e2e.example.com"))
    await storage.add_claim(claim(cluster.ns, "dyn", sc))
    async with running(profile(tmp_path, cluster), scheduler_kubeconfig) as sched:
        await api.create_pod(with_claim(pod(cluster.ns, "app", cpu="2"), "dyn"))
        pvc = await wait_selected_node(api, cluster.ns, "dyn")
        assert pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == b
        assert not node_of(await cluster.get_pod("app"))
        await provision(api, storage, pvc, sc)
        pods = await cluster.wait_bound(["app"])
        assert node_of(pods["app"]) == b
        sched.assert_running()


async def test_a_missing_claim_keeps_the_pod_pending(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path
) -> None:
    await cluster.add_node("a")
    async with running(profile(tmp_path, cluster), scheduler_kubeconfig) as sched:
        await api.create_pod(with_claim(pod(cluster.ns, "orphan", cpu="100m"), "missing"))
        pending = await cluster.wait_condition("orphan", "False", "Unschedulable")
        assert condition_message(pending).startswith(
            '0/1 nodes are available: persistentvolumeclaim "missing" not found.'
        ), condition_message(pending)
        sched.assert_running()
