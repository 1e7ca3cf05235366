"""ReservationFirst end to end: ``koordsched deschedule`` and ``koordsched run`` together on a real
apiserver, each with only the grants its deploy/ manifests give it.

A hot node (NodeMetric: 7 of 8 cores, over LowNodeLoad's 75 % for ``consecutiveAbnormalities: 1``
round) and a cold one; four pods of one ReplicaSet run on the hot node, "guard" the busiest, so
LowNodeLoad moves it first:

1. the MigrationController creates a PodMigrationJob (mode ReservationFirst) and a Reservation
   for guard's replacement: guard's template, owned by its ReplicaSet, allocateOnce, the job's
   TTL, and never the node it leaves;
2. the scheduler schedules the Reservation: Available on the cold node;
3. the job notices, evicts guard (Eviction API);
4. the test, playing the ReplicaSet controller, creates the replacement (same owner reference
   and labels, another name); the scheduler binds it to the cold node with
   ``reservation-allocated`` naming the Reservation, which then ends (allocateOnce: Succeeded);
5. the job sees the replacement bound, waits for it to be Ready (BoundPodReady=False,
   WaitForBoundPodReady) and, once it is, succeeds (conditions ReservationCreated,
   ReservationScheduled, Eviction, PodBoundReservation, BoundPodReady), with a Migrated event on
   guard.

Nothing either process asks is refused (403). Its own control plane: the CRDs and RBAC stay out
of the shared one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.apiserver import REPO_ROOT, KubeEnv
from tests.e2e.conftest import RBAC_GROUPS, RBAC_USER
from tests.e2e.fixtures import control_plane
from tests.e2e.helpers import (
    LEASE_NAMESPACE,
    Api,
    Cluster,
    events_for,
    node_of,
    scheduler_in_process,
    wait_for,
    write_profile,
)
from tests.e2e.test_crd_smoke import COLLECTIONS
from tests.e2e.test_descheduler import (
    DESCHED_DIR,
    SA_GROUPS,
    SA_USER,
    bound_pod,
    cond,
    config,
    descheduler,
    hot_and_cold,
    jobs_for,
)
from tests.e2e.test_rbac import LEASE_NAME, apply, manifests

pytestmark = pytest.mark.e2e

ADMIN_USER = "e2e-resfirst"
RESERVATIONS = COLLECTIONS["Reservation"]
RESERVATION_ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
SCHED_RBAC = [REPO_ROOT / "deploy" / "serviceaccount.yaml", REPO_ROOT / "deploy" / "rbac.yaml"]
TIMEOUT = 90.0


kube_env = control_plane({ADMIN_USER: ["system:masters"], SA_USER: SA_GROUPS, RBAC_USER: RBAC_GROUPS})


def reservation_first(path: Path, ns: str) -> Path:
    """test_descheduler's configuration, with ReservationFirst as the jobs' mode."""
    cfg = yaml.safe_load(config(path, ns, "koord-descheduler").read_text())
    for plugin in cfg["profiles"][0]["pluginConfig"]:
        if plugin["name"] == "MigrationController":
            plugin["args"].update(defaultJobMode="ReservationFirst", defaultJobTTL="3m")
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def forbidden(lines: list[str]) -> list[str]:
    return [m for m in lines if " 403" in m or "forbidden" in m.lower()]


async def test_a_hot_nodes_pod_moves_through_a_reservation(
    api: Api, cluster: Cluster, kube_env: KubeEnv, tmp_path: Path
) -> None:
    hot, cold = await hot_and_cold(api, cluster)
    ns = cluster.ns
    objs = [o for path in SCHED_RBAC if path.is_file() for o in manifests(path)]
    applied = await apply(api, objs + manifests(DESCHED_DIR / "rbac.yaml"))
    reservations: list[str] = []
    try:
        guard = await api.pod(ns, "guard")
        cluster.leases += [(LEASE_NAMESPACE, LEASE_NAME), (LEASE_NAMESPACE, "koord-descheduler")]
        profile = write_profile(tmp_path / "profile.yaml", lease_name=LEASE_NAME)
        sched_kubeconfig = tmp_path / "kubeconfig-sched"
        sched_kubeconfig.write_bytes(kube_env.kubeconfig_for(RBAC_USER).read_bytes())
        sched_kubeconfig.chmod(0o600)
        cfg = reservation_first(tmp_path / "d.yaml", ns)
        async with (
            scheduler_in_process(profile, sched_kubeconfig) as sched,
            descheduler(cfg, kube_env.kubeconfig_for(SA_USER)) as (_, log),
        ):
            # 1-2. guard's job and its Reservation, scheduled on the cold node.
            async def reservation_available() -> tuple[dict[str, Any], dict[str, Any]] | None:
                job = (await jobs_for(api, ns)).get("guard")
                created = cond(job, "ReservationCreated") if job else None
                if job is None or created is None:
                    return None
                r = await api.get_or_none(f"{RESERVATIONS}/{created['message']}")
                return (job, r) if r and (r.get("status") or {}).get("phase") == "Available" else None

            job, r = await wait_for(
                reservation_available,
                timeout=TIMEOUT,
                what="guard's Reservation to be Available",
                detail=lambda: log.text() + "\n" + sched.log_text(),
            )
            name = r["metadata"]["name"]
            reservations.append(name)
            assert job["spec"]["mode"] == "ReservationFirst"
            assert job["spec"]["reservationOptions"]["reservationRef"]["name"] == name
            assert r["status"]["nodeName"] == cold
            spec = r["spec"]
            assert spec["allocateOnce"] is True and spec["ttl"] == "3m"
            assert spec["owners"] == [
                {
                    "controller": {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": "web",
                        "uid": "uid-web-rs",
                        "controller": True,
                        "namespace": ns,
                    }
                }
            ]
            template = spec["template"]
            assert template["metadata"]["labels"]["app"] == "guard"
            assert template["spec"]["schedulerName"] == "koord-scheduler"
            assert "nodeName" not in template["spec"]
            terms = template["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"
            ]
            assert terms["nodeSelectorTerms"] == [
                {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": [hot]}]}
            ]

            # 3. Available: guard is evicted.
            async def guard_gone() -> bool:
                return await api.get_or_none(f"/api/v1/namespaces/{ns}/pods/guard") is None

            await wait_for(guard_gone, timeout=TIMEOUT, what="guard to be evicted", detail=log.text)

            # The job's status is written after the round that evicted, so it may lag the pod.
            async def job_after_eviction() -> dict[str, Any] | None:
                job = (await jobs_for(api, ns))["guard"]
                evicted = cond(job, "Eviction")
                return job if evicted and evicted["status"] == "True" else None

            job = await wait_for(
                job_after_eviction,
                timeout=TIMEOUT,
                what="guard's job to record the eviction",
                detail=log.text,
            )
            assert job["status"]["phase"] == "Running"
            assert cond(job, "ReservationScheduled")["status"] == "True"  # type: ignore[index]

            # 4. The ReplicaSet's replacement: the same owner and labels, not bound, another name.
            body = bound_pod(ns, "guard-2", hot, "guard")
            del body["spec"]["nodeName"]
            await api.create_pod(body)
            pods = await cluster.wait_bound(["guard-2"], timeout=TIMEOUT)
            new = pods["guard-2"]
            assert node_of(new) == cold
            allocated = json.loads(new["metadata"]["annotations"][RESERVATION_ALLOCATED])
            assert allocated == {"name": name, "uid": r["metadata"]["uid"]}

            async def ended() -> dict[str, Any] | None:
                got: dict[str, Any] = await api.get(f"{RESERVATIONS}/{name}")
                return got if (got.get("status") or {}).get("phase") == "Succeeded" else None

            done = await wait_for(ended, timeout=TIMEOUT, what="the allocateOnce Reservation to end")
            assert [o["name"] for o in done["status"]["currentOwners"]] == ["guard-2"]

            # 5. The job sees the replacement on the reservation, waits for it to be Ready (as
            # Koordinator's: BoundPodReady), then succeeds once the kubelet (here the test) says so.
            async def waiting_ready() -> dict[str, Any] | None:
                got = (await jobs_for(api, ns))["guard"]
                c = cond(got, "BoundPodReady")
                return got if c and (c["status"], c["reason"]) == ("False", "WaitForBoundPodReady") else None

            job = await wait_for(waiting_ready, timeout=TIMEOUT, what="guard's job to wait for Ready")
            assert job["status"]["phase"] == "Running"
            ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            await api.patch(f"/api/v1/namespaces/{ns}/pods/guard-2/status", {"status": ready})

            async def succeeded() -> dict[str, Any] | None:
                got = (await jobs_for(api, ns))["guard"]
                return got if got["status"].get("phase") == "Succeeded" else None

            job = await wait_for(succeeded, timeout=TIMEOUT, what="guard's job to succeed", detail=log.text)
            message = f'Bind Pod "{ns}/guard-2" in Reservation "{name}"'  # Koordinator's
            assert job["status"]["message"] == message
            assert job["status"]["podRef"]["name"] == "guard-2"
            bound = cond(job, "PodBoundReservation")
            assert bound is not None and (bound["status"], bound["message"]) == ("True", message)

            async def migrated() -> list[dict[str, Any]]:
                return events_for(await cluster.events(), guard, "Migrated")

            (event, *_) = await wait_for(migrated, timeout=TIMEOUT, what="the Migrated event of guard")
            assert event["reportingController"] == "koord-descheduler"

            sched.assert_running()
            assert sched.problems() == [], sched.log_text()
            assert forbidden([r.getMessage() for r in log.records]) == []
            assert forbidden(sched.log_text().splitlines()) == []
    finally:
        for n in reservations:
            await api.delete(f"{RESERVATIONS}/{n}")
        for path in reversed(applied):
            await api.delete(path, grace=None)
