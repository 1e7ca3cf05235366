"""ElasticQuota on a real apiserver: a quota caps a namespace, and its status is written back.

The ElasticQuota CRD of ``deploy/crds/`` is installed; the namespace gets an ElasticQuota named
after it (the pods are charged to it without a label) with ``max: {cpu: 2}``, on a node with room
for eight 1-cpu pods. The scheduler runs with :data:`PROFILE` (ElasticQuota at preFilter and
reserve, on kube-scheduler's defaults) under ``deploy/rbac.yaml`` alone, as the ServiceAccount it
binds: the status write-back's grants (which tests/e2e/test_rbac.py cannot exercise, its control
plane has no ElasticQuota) are proven sufficient here.

1. Four 1-cpu pods: two bind, two stay Pending with PodScheduled=False and Koordinator's
   ``Insufficient quotas`` message (runtime 2: the quota asks 4, capped at its max 2).
2. The quota's ``status.used`` shows 2 cpu and its runtime annotation 2, written back by the
   scheduler.
3. A bound pod is deleted: the Pod delete requeues a pending one, which binds.

Like ``test_loadaware.py``, this module runs its own control plane.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.apiserver import KubeEnv
from tests.e2e.conftest import RBAC_GROUPS, RBAC_USER, SCHEDULER_USER
from tests.e2e.fixtures import control_plane, own_lease
from tests.e2e.helpers import (
    Api,
    ApiError,
    Cluster,
    condition_message,
    node_of,
    pod,
    scheduler_in_process,
    wait_for,
    write_profile,
)
from tests.e2e.test_crd_smoke import install_crds
from tests.e2e.test_rbac import LEASE_NAME, RBAC_FILE, SA_FILE, apply, manifests

pytestmark = pytest.mark.e2e

QUOTAS = "/apis/scheduling.sigs.k8s.io/v1alpha1"

PROFILE = """
- schedulerName: koord-scheduler
  pluginConfig:
    - name: ElasticQuota
      args:
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: ElasticQuotaArgs
        quotaGroupNamespace: koordinator-system
  plugins:
    preFilter: {enabled: [{name: ElasticQuota}]}
    reserve: {enabled: [{name: ElasticQuota}]}
"""


kube_env = control_plane({SCHEDULER_USER: ["system:masters"], RBAC_USER: RBAC_GROUPS})


def quota_profile(path: Path, lease: str, profile: str = PROFILE) -> Path:
    cfg = yaml.safe_load(write_profile(path, lease_name=lease).read_text())
    cfg["profiles"] = yaml.safe_load(profile)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


async def rbac_kubeconfig(api: Api, kube_env: KubeEnv, tmp_path: Path) -> Path:
    """deploy/rbac.yaml (and the ServiceAccount) applied; a kubeconfig of the identity it binds."""
    await apply(api, manifests(SA_FILE) + manifests(RBAC_FILE))
    async with Api(kube_env, token=kube_env.token(RBAC_USER)) as limited:

        async def granted() -> bool:
            try:
                await limited.get(f"{QUOTAS}/elasticquotas")
                return True
            except ApiError as err:
                if err.status in (403, 404):
                    return False
                raise

        await wait_for(granted, timeout=30, what="the RBAC rules to take effect")
    # A plain file name: kubernetes_asyncio splits a kubeconfig path at ':'.
    path = tmp_path / "kubeconfig-rbac"
    path.write_bytes(kube_env.kubeconfig_for(RBAC_USER).read_bytes())
    path.chmod(0o600)
    return path


async def test_a_quota_caps_a_namespace(
    api: Api, cluster: Cluster, kube_env: KubeEnv, tmp_path: Path
) -> None:
    await install_crds(api)
    await own_lease(api, cluster, LEASE_NAME)
    profile = quota_profile(tmp_path / "profile.yaml", LEASE_NAME)
    kubeconfig = await rbac_kubeconfig(api, kube_env, tmp_path)
    ns = cluster.ns
    collection = f"{QUOTAS}/namespaces/{ns}/elasticquotas"

    async def served() -> bool:
        try:
            await api.get(collection)
        except ApiError as err:
            if err.status == 404:
                return False
            raise
        return True

    await wait_for(served, what="the ElasticQuota collection to be served")
    await api.post(
        collection,
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": ns, "namespace": ns},
            "spec": {"max": {"cpu": "2"}},
        },
    )
    await cluster.add_node("big", cpu="8", memory="32Gi")
    names = [f"p{i}" for i in range(4)]
    expected = (
        f"0/1 nodes are available: Insufficient quotas, quotaName: {ns}, runtime: cpu:2, "
        "used: cpu:2,memory:2Gi, pod's request: cpu:1, exceedDimensions: [cpu]."
    )
    async with scheduler_in_process(profile, kubeconfig) as sched:
        # 1. Two of four bind; the others wait with Koordinator's message.
        for name in names:
            await cluster.add_pod(name, cpu="1", memory="1Gi")

        async def settled() -> tuple[list[str], list[str]] | None:
            pods = await cluster.pods()
            bound = sorted(n for n in names if node_of(pods[n]))
            waiting = sorted(
                n
                for n in names
                if not node_of(pods[n])
                and any(
                    c.get("reason") == "Unschedulable"
                    for c in (pods[n].get("status") or {}).get("conditions") or ()
                )
            )
            return (bound, waiting) if len(bound) == 2 and len(waiting) == 2 else None

        bound, waiting = await wait_for(
            settled, what="two pods bound and two Unschedulable", detail=sched.log_text
        )
        for name in waiting:
            # DefaultPreemption (a kube-scheduler default) adds what its dry run found.
            message = condition_message(await cluster.get_pod(name))
            assert message == expected or message.startswith(expected + " preemption: "), message

        # 2. The quota shows what its pods use, written back by the scheduler.
        async def written() -> dict[str, Any] | None:
            eq: dict[str, Any] = await api.get(f"{collection}/{ns}")
            used = (eq.get("status") or {}).get("used") or {}
            return eq if used.get("cpu") == "2" else None

        eq = await wait_for(written, what="status.used written back", detail=sched.log_text)
        annotations = eq["metadata"]["annotations"]
        assert json.loads(annotations["quota.scheduling.koordinator.sh/runtime"]) == {"cpu": "2"}
        assert json.loads(annotations["quota.scheduling.koordinator.sh/request"])["cpu"] == "4"

        # 3. A bound pod goes: one of the waiting ones takes its place.
        await cluster.delete_pod(bound[0])

        async def replaced() -> list[str] | None:
            pods = await cluster.pods()
            now = sorted(n for n in waiting if n in pods and node_of(pods[n]))
            return now if len(now) == 1 else None

        await wait_for(replaced, what="a waiting pod to bind after the deletion", detail=sched.log_text)
        sched.assert_running()
        assert sched.problems() == [], sched.log_text()


#: The overuse revoke controller on, with a short delay (Koordinator's default is 120s).
REVOKE_PROFILE = PROFILE.replace(
    "quotaGroupNamespace: koordinator-system",
    "quotaGroupNamespace: koordinator-system\n        monitorAllQuotas: true\n"
    "        delayEvictTime: 2s\n        revokePodInterval: 1s",
)


async def test_an_overused_quota_is_revoked_through_the_eviction_api(
    api: Api, cluster: Cluster, kube_env: KubeEnv, tmp_path: Path
) -> None:
    """Quota qa borrowed the whole 4-cpu node while qb was idle; qb's pods then ask for qb's min,
    qa's runtime falls to its min (2), and after delayEvictTime the controller evicts qa's two
    least important pods through the Eviction API (as deploy/rbac.yaml allows): qb's pods bind."""
    await install_crds(api)
    await own_lease(api, cluster, LEASE_NAME)
    profile = quota_profile(tmp_path / "profile.yaml", LEASE_NAME, REVOKE_PROFILE)
    kubeconfig = await rbac_kubeconfig(api, kube_env, tmp_path)
    ns = cluster.ns
    collection = f"{QUOTAS}/namespaces/{ns}/elasticquotas"
    for name in ("qa", "qb"):
        await api.post(
            collection,
            {
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "ElasticQuota",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"min": {"cpu": "2"}, "max": {"cpu": "4"}},
            },
        )
    await cluster.add_node("small", cpu="4", memory="32Gi")

    async def add(name: str, quota: str) -> None:
        body = pod(ns, name)
        body["metadata"]["labels"]["quota.scheduling.koordinator.sh/name"] = quota
        await api.create_pod(body)

    async with scheduler_in_process(profile, kubeconfig) as sched:
        for i in range(4):
            await add(f"a{i}", "qa")
        await cluster.wait_bound([f"a{i}" for i in range(4)])
        for i in range(2):
            await add(f"b{i}", "qb")
        # Two of qa's pods (all alike: any two) are evicted; qb's pods bind where they ran.
        pods = await cluster.wait_bound(["b0", "b1"], timeout=60)
        left = [n for n in pods if n.startswith("a")]
        assert len(left) == 2 and all(node_of(pods[n]) for n in left), left
        assert (
            "evicted: revoked: quota qa used cpu:4,memory:4Gi more than its runtime cpu:2" in sched.log_text()
        )
        sched.assert_running()
        assert sched.problems() == [], sched.log_text()
