"""Reservation preemption on a real apiserver, with exactly deploy/rbac.yaml's permissions.

The profile enables ReservationArgs ``enablePreemption``. A node is full with two low-priority
pods, one labelled ``scheduling.koordinator.sh/disable-preemptible: "true"``. A Reservation pinned
to the node (its reserve pod has priority MaxInt32) preempts the other one only, and becomes
Available there once the victim is gone. The reserve pod stands for no Pod object: its
nomination is not written anywhere and nothing the scheduler writes is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.apiserver import REPO_ROOT, KubeEnv
from tests.e2e.conftest import RBAC_GROUPS, RBAC_USER, SCHEDULER_USER
from tests.e2e.fixtures import audited_control_plane
from tests.e2e.helpers import (
    LEASE_NAMESPACE,
    Api,
    AuditLog,
    Cluster,
    events_for,
    pod,
    scheduler_in_process,
    unique,
    wait_for,
    write_profile,
)
from tests.e2e.test_crd_smoke import COLLECTIONS, install_crds
from tests.e2e.test_rbac import LEASE_NAME, apply, manifests

pytestmark = pytest.mark.e2e

RESERVATIONS = COLLECTIONS["Reservation"]
RBAC_FILE = REPO_ROOT / "deploy" / "rbac.yaml"
SA_FILE = REPO_ROOT / "deploy" / "serviceaccount.yaml"
TIMEOUT = 60.0


module_dir, audit_log, kube_env = audited_control_plane(
    "e2e-reservation-preemption",
    {SCHEDULER_USER: ["system:masters"], RBAC_USER: RBAC_GROUPS},
    lease_namespace=True,
)


def bound(cluster: Cluster, name: str, node: str, **labels: str) -> dict[str, Any]:
    body = pod(cluster.ns, name, cpu="2", memory="64Mi")
    body["metadata"]["labels"].update(labels)
    body["spec"]["nodeName"] = node
    return body


def reservation(name: str, ns: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name, "labels": {"koordsched.io/e2e": "true"}},
        "spec": {
            "template": {
                "metadata": {"namespace": ns},
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "nodeName": node,
                    "containers": [{"name": "reserve", "resources": {"requests": {"cpu": "2"}}}],
                },
            },
            "owners": [{"labelSelector": {"matchLabels": {"app": "later"}}}],
            "ttl": "1h",
        },
    }


def profile_with_preemption(path: Path) -> Path:
    write_profile(path, lease_name=LEASE_NAME)
    cfg = yaml.safe_load(path.read_text())
    (prof,) = cfg["profiles"]
    prof.setdefault("pluginConfig", []).append(
        {
            "name": "Reservation",
            "args": {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "ReservationArgs",
                "enablePreemption": True,
            },
        }
    )
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


async def test_a_reservation_preempts_all_but_the_protected_pod(
    api: Api, cluster: Cluster, kube_env: KubeEnv, tmp_path: Path, audit_log: AuditLog
) -> None:
    await install_crds(api)
    objs = manifests(SA_FILE) + manifests(RBAC_FILE) if SA_FILE.is_file() else manifests(RBAC_FILE)
    applied = await apply(api, objs)
    created: list[str] = []
    try:
        node = await cluster.add_node("full", cpu="4")
        # 'evictable' first: were 'keep' a potential victim, it would be the one not reprieved.
        await api.create_pod(bound(cluster, "evictable", node))
        await api.create_pod(
            bound(cluster, "keep", node, **{"scheduling.koordinator.sh/disable-preemptible": "true"})
        )
        name = unique("hold")
        kubeconfig = tmp_path / "kubeconfig-rbac"
        kubeconfig.write_bytes(kube_env.kubeconfig_for(RBAC_USER).read_bytes())
        kubeconfig.chmod(0o600)
        cluster.leases.append((LEASE_NAMESPACE, LEASE_NAME))
        await api.delete(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}")
        profile = profile_with_preemption(tmp_path / "profile.yaml")
        mark = audit_log.mark()
        async with scheduler_in_process(profile, kubeconfig) as sched:
            victim = await cluster.get_pod("evictable")
            await api.post(RESERVATIONS, reservation(name, cluster.ns, node))
            created.append(f"{RESERVATIONS}/{name}")

            async def available() -> dict[str, Any] | None:
                r = await api.get(f"{RESERVATIONS}/{name}")
                return r if (r.get("status") or {}).get("phase") == "Available" else None

            r = await wait_for(available, timeout=TIMEOUT, what="the Reservation to preempt and be Available")
            assert r["status"]["nodeName"] == node
            pods = await cluster.pods()
            assert "keep" in pods and "evictable" not in pods

            async def preempted_event() -> dict[str, Any] | None:
                evs = events_for(await cluster.events(), victim, "Preempted")
                return evs[0] if evs else None

            ev = await wait_for(preempted_event, what="a Preempted event on the victim")
            assert ev["note"] == f"Preempted by pod {r['metadata']['uid']} on node {node}"
            sched.assert_running()
            assert sched.problems() == [], sched.log_text()
        mine = [e for e in audit_log.events(mark) if e.user == RBAC_USER]
        assert [(e.verb, e.uri, e.code) for e in mine if e.code == 403] == []
        deletes = [(e.name, e.code) for e in mine if e.verb == "delete" and e.resource == "pods"]
        assert deletes == [("evictable", 200)], deletes
    finally:
        for path in created:
            await api.delete(path)
        for path in reversed(applied):
            await api.delete(path, grace=None)
