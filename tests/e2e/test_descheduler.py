"""koord-descheduler on a real apiserver (``koordsched deschedule --kubeconfig``).

One hot node (NodeMetric: 7 of 8 cores used, over LowNodeLoad's 75 % threshold for more than
``consecutiveAbnormalities: 1`` rounds) and one cold node. Four pods of one workload run on the
hot node; "guard" uses the most cpu, so LowNodeLoad picks it first, and a PodDisruptionBudget
(policy/v1beta1, all kube-apiserver 1.20 serves) covers it:

1. the MigrationController creates a PodMigrationJob for guard; the Eviction API refuses it
   (429, the budget), so the job stays Running with condition Eviction=False/Evicting;
2. the next round asks for a second pod of the same node; ``maxMigratingPerNode: 1`` holds its
   job Pending (not passed arbitration) while guard's is in flight;
3. the budget is deleted: guard is evicted, its job Succeeded, with an Evicted event on the pod;
   then the second job runs and its pod is evicted too.

Then the same with the descheduler running as the ServiceAccount of deploy/descheduler/, with
exactly the grants of deploy/descheduler/rbac.yaml: the Lease koord-descheduler, the job and the
eviction all go through, and nothing is refused.

EvictDirectly here; ReservationFirst, with the scheduler running beside the descheduler, is
tests/e2e/test_reservation_first.py.
This module runs its own control plane (the PodMigrationJob CRD and RBAC stay out of the
shared one).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordsched.backends.kube.timefmt import rfc3339
from tests.e2e.apiserver import KubeEnv, free_ports
from tests.e2e.fixtures import control_plane
from tests.e2e.helpers import (
    LEASE_NAMESPACE,
    Api,
    ApiError,
    Cluster,
    events_for,
    forbidden_lines,
    http_status,
    metric,
    scrape,
    unique,
    wait_for,
)
from tests.e2e.test_crd_smoke import CRD_PATH, install_crds
from tests.e2e.test_rbac import apply, manifests

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DESCHED_DIR = ROOT / "deploy" / "descheduler"
PMJ_CRD = DESCHED_DIR / "scheduling.koordinator.sh_podmigrationjobs.yaml"
PMJS = "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs"
NODE_METRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
ADMIN_USER = "e2e-desched"
SA_USER = "system:serviceaccount:koordinator-system:koord-descheduler"
SA_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:koordinator-system"]


kube_env = control_plane({ADMIN_USER: ["system:masters"], SA_USER: SA_GROUPS})


async def install_pmj_crd(api: Api) -> None:
    crd = yaml.safe_load(PMJ_CRD.read_text())
    with contextlib.suppress(ApiError):
        await api.post(CRD_PATH, crd)

    async def served() -> bool:
        try:
            await api.get(PMJS)
            return True
        except ApiError as err:
            if err.status == 404:
                return False
            raise

    await wait_for(served, what="the PodMigrationJob collection to be served")


def config(path: Path, ns: str, lease: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "descheduler/v1alpha2",
                "kind": "DeschedulerConfiguration",
                "deschedulingInterval": "1s",
                "leaderElection": {"resourceName": lease, "resourceNamespace": LEASE_NAMESPACE},
                "profiles": [
                    {
                        "name": "koord-descheduler",
                        "plugins": {"balance": {"enabled": [{"name": "LowNodeLoad"}]}},
                        "pluginConfig": [
                            {
                                "name": "MigrationController",
                                "args": {
                                    "defaultJobMode": "EvictDirectly",
                                    "maxMigratingPerNode": 1,
                                    "maxMigratingPerWorkload": 2,
                                    "maxUnavailablePerWorkload": 2,
                                    "objectLimiters": {"workload": {"duration": "0s"}},
                                    "defaultDeleteOptions": {"gracePeriodSeconds": 0},
                                    "evictQPS": "100",
                                    "evictBurst": 10,
                                    "namespaces": {"include": [ns]},
                                },
                            },
                            {
                                "name": "LowNodeLoad",
                                "args": {
                                    "lowThresholds": {"cpu": 45, "memory": 55},
                                    "highThresholds": {"cpu": 75, "memory": 80},
                                    "anomalyCondition": {"consecutiveAbnormalities": 1},
                                    "evictableNamespaces": {"include": [ns]},
                                },
                            },
                        ],
                    }
                ],
            },
            sort_keys=False,
        )
    )
    return path


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def text(self) -> str:
        return "\n".join(f"{r.levelname} {r.name}: {r.getMessage()}" for r in self.records)


@contextlib.asynccontextmanager
async def descheduler(cfg: Path, kubeconfig: Path) -> AsyncIterator[tuple[Any, _Collect]]:
    """The descheduler in a task of this loop; stopped (exit status 0 asserted) on the way out."""
    from koordsched.backends.kube.deschedule import DeschedulerRunner
    from koordsched.backends.kube.serving.options import ServingOptions
    from koordsched.config.default_profile import default_profile_path
    from koordsched.config.load import load_config
    from koordsched.descheduler.config.load import load_descheduler_config
    from koordsched.descheduler.registry import in_tree_catalog
    from koordsched.plugins.registry import in_tree_registry

    registry = in_tree_registry()
    runner = DeschedulerRunner(
        load_descheduler_config(cfg, in_tree_catalog()),
        load_config(default_profile_path(), registry),
        registry,
        kubeconfig=str(kubeconfig),
        serving=ServingOptions(bind_address="127.0.0.1", secure_port=free_ports(1)[0]),
    )
    log = _Collect()
    logger = logging.getLogger("koordsched")
    logger.addHandler(log)
    old = logger.level
    logger.setLevel(logging.DEBUG)
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    try:
        await wait_for(lambda: _synced(runner, task), what="the descheduler's caches", detail=log.text)
        yield runner, log
        stop.set()
        rc = await asyncio.wait_for(task, 30)
        assert rc == 0, log.text()
    finally:
        stop.set()
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        logger.removeHandler(log)
        logger.setLevel(old)


async def _synced(runner: Any, task: asyncio.Task[int]) -> bool:
    if task.done():
        raise AssertionError(
            f"the descheduler stopped: {task.result() if not task.exception() else task.exception()}"
        )
    return bool(runner.synced.is_set())


def bound_pod(ns: str, name: str, node: str, app: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"app": app, "koordsched.io/e2e": "true"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web",
                    "uid": "uid-web-rs",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "schedulerName": "koord-scheduler",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.2",
                    "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
                }
            ],
        },
    }


async def create_running(api: Api, body: dict[str, Any]) -> None:
    """Create a bound pod and report it as a kubelet would: running and ready
    (maxUnavailablePerWorkload counts the others)."""
    await api.create_pod(body)
    meta = body["metadata"]
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    await api.patch(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status", {"status": status})


async def report(api: Api, node: str, cpu: str, pods: list[tuple[str, str, str]]) -> None:
    """koordlet's report through the status subresource (pods: namespace, name, cpu)."""
    try:
        await api.post(
            NODE_METRICS,
            {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": node}},
        )
    except ApiError as err:
        assert err.status == 409, err
    status = {
        "updateTime": rfc3339(),
        "nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu, "memory": "4Gi"}}},
        "podsMetric": [
            {"namespace": ns, "name": n, "podUsage": {"resources": {"cpu": c, "memory": "256Mi"}}}
            for ns, n, c in pods
        ],
    }
    await api.patch(f"{NODE_METRICS}/{node}/status", {"status": status})


async def jobs_for(api: Api, ns: str) -> dict[str, dict[str, Any]]:
    items = (await api.get(PMJS))["items"]
    return {j["spec"]["podRef"]["name"]: j for j in items if j["spec"]["podRef"]["namespace"] == ns}


def cond(job: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (job.get("status") or {}).get("conditions") or () if c["type"] == type_), None)


async def hot_and_cold(api: Api, cluster: Cluster) -> tuple[str, str]:
    await install_crds(api)
    await install_pmj_crd(api)
    await api.ensure_namespace(LEASE_NAMESPACE)
    hot = await cluster.add_node("hot", cpu="8", memory="32Gi")
    cold = await cluster.add_node("cold", cpu="8", memory="32Gi")
    ns = cluster.ns
    for name, app in (("guard", "guard"), ("a", "web"), ("b", "web"), ("c", "web")):
        await create_running(api, bound_pod(ns, name, hot, app))
    await report(api, hot, "7", [(ns, "guard", "1"), (ns, "a", "400m"), (ns, "b", "400m"), (ns, "c", "400m")])
    await report(api, cold, "1", [])
    return hot, cold


async def test_hot_node_limits_and_a_pdb(
    api: Api, cluster: Cluster, kube_env: KubeEnv, tmp_path: Path
) -> None:
    hot, _ = await hot_and_cold(api, cluster)
    ns = cluster.ns
    pdb = {
        "apiVersion": "policy/v1beta1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard", "namespace": ns},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guard"}}},
    }
    await api.post(f"/apis/policy/v1beta1/namespaces/{ns}/poddisruptionbudgets", pdb)
    lease = unique("koord-descheduler")
    cluster.leases.append((LEASE_NAMESPACE, lease))
    cfg = config(tmp_path / "d.yaml", ns, lease)
    async with descheduler(cfg, kube_env.kubeconfig_for(ADMIN_USER)) as (runner, log):
        # 1. guard's job: the budget blocks its eviction.
        async def guard_blocked() -> dict[str, Any] | None:
            job = (await jobs_for(api, ns)).get("guard")
            c = cond(job, "Eviction") if job else None
            return job if c and c["status"] == "False" and c["reason"] == "Evicting" else None

        job = await wait_for(guard_blocked, what="guard's job blocked by the PDB", detail=log.text)
        assert job["status"]["phase"] == "Running" and job["spec"]["mode"] == "EvictDirectly"
        assert "disruption budget" in cond(job, "Eviction")["message"]  # type: ignore[index]
        assert job["metadata"]["annotations"]["koordinator.sh/evict-trigger"] == "LowNodeLoad"
        assert job["metadata"]["annotations"]["koordinator.sh/evict-reason"] == (
            "node is overutilized, node cpu usage(87.50%)>threshold(75.00%)"
        )
        assert job["metadata"]["annotations"]["descheduler.koordinator.sh/passed-arbitration"] == "true"
        assert await api.get_or_none(f"/api/v1/namespaces/{ns}/pods/guard") is not None

        # 2. a second pod of the same node: held Pending by maxMigratingPerNode while guard's runs.
        async def second_pending() -> dict[str, Any] | None:
            jobs = await jobs_for(api, ns)
            # The job is created first and its status written after: wait for the arbitration's word.
            return next(
                (j for n, j in jobs.items() if n != "guard" and j.get("status", {}).get("message")), None
            )

        second = await wait_for(second_pending, what="a second job on the hot node", detail=log.text)
        assert second["status"]["phase"] == "Pending"
        assert "descheduler.koordinator.sh/passed-arbitration" not in second["metadata"].get(
            "annotations", {}
        )
        assert f"maxMigratingPerNode=1 reached on node {hot}" in second["status"]["message"]
        held = second["spec"]["podRef"]["name"]
        await asyncio.sleep(2)  # a few more rounds: still held
        assert (await jobs_for(api, ns))[held]["status"]["phase"] == "Pending"
        assert await api.get_or_none(f"/api/v1/namespaces/{ns}/pods/{held}") is not None

        # 3. The budget goes: guard is evicted, then one more pod of the node. (Its workload is
        # then down to 2 replicas = maxMigratingPerWorkload: the remaining jobs fail
        # ForbiddenMigratePod, Koordinator's expected-replicas rule.)
        guard = await api.pod(ns, "guard")
        await api.delete(f"/apis/policy/v1beta1/namespaces/{ns}/poddisruptionbudgets/guard")
        seen: list[Any] = []

        async def two_done() -> list[str] | None:
            jobs = await jobs_for(api, ns)
            seen[:] = [{n: j["status"] for n, j in jobs.items()}]
            done = sorted(n for n, j in jobs.items() if j["status"].get("phase") == "Succeeded")
            settled = all(j["status"].get("phase") in ("Succeeded", "Failed") for j in jobs.values())
            return done if settled and len(done) >= 2 else None

        done = await wait_for(two_done, what="guard's and one more job to succeed", detail=lambda: repr(seen))
        assert "guard" in done, done
        assert len(done) == 2, done
        others = {n: j for n, j in (await jobs_for(api, ns)).items() if n not in done}
        assert all(j["status"]["reason"] == "ForbiddenMigratePod" for j in others.values()), others
        for name in done:
            assert await api.get_or_none(f"/api/v1/namespaces/{ns}/pods/{name}") is None

        async def evicted_event() -> list[dict[str, Any]]:
            return events_for(await cluster.events(), guard, "Evicted")

        (event, *_) = await wait_for(evicted_event, what="the Evicted event of guard")
        assert event["reportingController"] == "koord-descheduler"
        assert "LowNodeLoad: node is overutilized" in event["note"]
        guard_job = (await jobs_for(api, ns))["guard"]

        async def job_events() -> set[str]:
            return {
                e["reason"]
                for e in await api.events("default")
                if (e.get("regarding") or {}).get("kind") == "PodMigrationJob"
                and e["regarding"].get("name") == guard_job["metadata"]["name"]
                and e.get("reportingController") == "koord-descheduler"
            }

        # The refused evictions (the budget), then the eviction, on the job itself.
        reasons = await wait_for(job_events, what="events on guard's job", detail=log.text)
        assert {"FailedEvict", "Evicted"} <= reasons, reasons

        # Metrics (HTTPS, delegated authn/authz, read with the descheduler's own token).
        assert await http_status(runner.secure_port, "/readyz") == 200
        samples = await scrape(runner.secure_port, kube_env.token(ADMIN_USER))
        assert samples is not None
        labels = {"strategy": "LowNodeLoad", "namespace": ns, "node": hot}
        assert metric(samples, "descheduler_pods_evicted", result="error", **labels) >= 1  # the PDB
        assert metric(samples, "descheduler_pods_evicted", result="success", **labels) >= 2
        assert metric(samples, "descheduler_pod_migration_jobs", phase="Succeeded") >= 2
        leader = ("leader_election_master_status", frozenset({("name", "koord-descheduler")}))
        assert samples[leader] == 1
        # The embedded scheduler only caches: none of its series is served.
        assert not {n for n, _ in samples if n.startswith("scheduler_")}
        assert [r.getMessage() for r in log.records if r.levelno >= logging.ERROR] == []


async def test_a_job_created_by_hand_is_reconciled(
    api: Api, cluster: Cluster, kube_env: KubeEnv, tmp_path: Path
) -> None:
    """A user's PodMigrationJob (EvictDirectly) for a pod on the cold node, which LowNodeLoad
    leaves alone: the controller adopts it from its watch, arbitrates and evicts the pod."""
    _, cold = await hot_and_cold(api, cluster)
    ns = cluster.ns
    for name in ("w0", "w1", "w2", "w3"):
        body = bound_pod(ns, name, cold, "batch")
        body["metadata"]["ownerReferences"][0].update(name="batch", uid="uid-batch-rs")
        await create_running(api, body)
    lease = unique("koord-descheduler")
    cluster.leases.append((LEASE_NAMESPACE, lease))
    async with descheduler(config(tmp_path / "d.yaml", ns, lease), kube_env.kubeconfig_for(ADMIN_USER)) as (
        _,
        log,
    ):
        job = {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "PodMigrationJob",
            "metadata": {"name": unique("by-hand")},
            "spec": {
                "mode": "EvictDirectly",
                "ttl": "5m",
                "podRef": {"kind": "Pod", "namespace": ns, "name": "w0"},
                "deleteOptions": {"gracePeriodSeconds": 0},
            },
        }
        created = await api.post(PMJS, job)
        path = f"{PMJS}/{created['metadata']['name']}"
        try:

            async def succeeded() -> dict[str, Any] | None:
                got: dict[str, Any] = await api.get(path)
                return got if (got.get("status") or {}).get("phase") == "Succeeded" else None

            done = await wait_for(succeeded, what="the job made by hand to succeed", detail=log.text)
            assert done["metadata"]["annotations"]["descheduler.koordinator.sh/passed-arbitration"] == "true"
            assert await api.get_or_none(f"/api/v1/namespaces/{ns}/pods/w0") is None
        finally:
            await api.delete(path, grace=None)


async def test_runs_with_deploy_descheduler_rbac_only(
    api: Api, cluster: Cluster, kube_env: KubeEnv, tmp_path: Path
) -> None:
    await hot_and_cold(api, cluster)
    ns = cluster.ns
    objs = manifests(DESCHED_DIR / "rbac.yaml")
    applied = await apply(api, objs)
    try:
        async with Api(kube_env, token=kube_env.token(SA_USER)) as limited:

            async def granted() -> bool:
                try:
                    await limited.get("/api/v1/nodes?limit=1")
                    return True
                except ApiError as err:
                    assert err.status == 403, err
                    return False

            await wait_for(granted, timeout=30, what="the RBAC rules to take effect")
            for method, path in (
                ("GET", f"/api/v1/namespaces/{ns}/pods/guard"),
                ("DELETE", f"/api/v1/namespaces/{ns}/pods/a"),
            ):
                with pytest.raises(ApiError) as denied:
                    await limited.request(method, path)
                assert denied.value.status == 403, path
        cluster.leases.append((LEASE_NAMESPACE, "koord-descheduler"))
        cfg = config(tmp_path / "d.yaml", ns, "koord-descheduler")
        async with descheduler(cfg, kube_env.kubeconfig_for(SA_USER)) as (_, log):

            async def evicted() -> bool:
                jobs = await jobs_for(api, ns)
                return jobs.get("guard", {}).get("status", {}).get("phase") == "Succeeded"

            await wait_for(evicted, what="guard evicted by the descheduler's own identity", detail=log.text)
            assert await api.get_or_none(f"/api/v1/namespaces/{ns}/pods/guard") is None
            lease = await api.lease(LEASE_NAMESPACE, "koord-descheduler")
            assert lease is not None and lease["spec"]["holderIdentity"]
            refused = forbidden_lines("\n".join(r.getMessage() for r in log.records))
            assert refused == [], "\n".join(refused)
    finally:
        for path in reversed(applied):
            await api.delete(path, grace=None)


async def test_a_user_aborts_a_job_and_its_reservation_goes(
    api: Api, cluster: Cluster, kube_env: KubeEnv, tmp_path: Path
) -> None:
    """A user's ReservationFirst job (with ``preemptionOptions``, which v1.6 does not act on: a
    warning event names the field) for a pod on the cold node. No scheduler runs here, so its
    Reservation stays Pending; the user sets the job ``Aborted`` through the status subresource.
    The descheduler, as deploy/descheduler's ServiceAccount with exactly its grants, stops: the
    pod stays, the Reservation is deleted, the job keeps the user's status (its own writes carry
    a resourceVersion precondition, so none overwrites it)."""
    _, cold = await hot_and_cold(api, cluster)
    ns = cluster.ns
    for name in ("w0", "w1", "w2", "w3"):
        body = bound_pod(ns, name, cold, "batch")
        body["metadata"]["ownerReferences"][0].update(name="batch", uid="uid-batch-rs")
        await create_running(api, body)
    applied = await apply(api, manifests(DESCHED_DIR / "rbac.yaml"))
    lease = "koord-descheduler"  # the only Lease its Role grants
    cluster.leases.append((LEASE_NAMESPACE, lease))
    job_name = unique("abort-me")
    path = f"{PMJS}/{job_name}"
    reservation = f"/apis/scheduling.koordinator.sh/v1alpha1/reservations/{job_name}"
    try:
        async with Api(kube_env, token=kube_env.token(SA_USER)) as limited:

            async def granted() -> bool:
                try:
                    await limited.get(f"{PMJS}?limit=1")
                    return True
                except ApiError as err:
                    assert err.status == 403, err
                    return False

            await wait_for(granted, timeout=30, what="the RBAC rules to take effect")
        cfg = config(tmp_path / "d.yaml", ns, lease)
        async with descheduler(cfg, kube_env.kubeconfig_for(SA_USER)) as (_, log):
            job = {
                "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                "kind": "PodMigrationJob",
                "metadata": {"name": job_name},
                "spec": {
                    "mode": "ReservationFirst",
                    "ttl": "5m",
                    "podRef": {"kind": "Pod", "namespace": ns, "name": "w0"},
                    "reservationOptions": {"preemptionOptions": {}},
                },
            }
            await api.post(PMJS, job)

            async def reserved() -> dict[str, Any] | None:
                got: dict[str, Any] = await api.get(path)
                c = cond(got, "ReservationCreated")
                return got if c and c["status"] == "True" else None

            await wait_for(reserved, what="the job's Reservation", detail=log.text)
            assert await api.get_or_none(reservation) is not None
            await asyncio.sleep(1)  # a few ticks: still waiting for the Reservation
            got = await api.get(path)
            assert got["status"].get("phase") == "Running", got
            await api.patch(f"{path}/status", {"status": {"phase": "Aborted", "message": "not now"}})

            async def reservation_gone() -> bool:
                return await api.get_or_none(reservation) is None

            await wait_for(reservation_gone, what="the aborted job's Reservation to go", detail=log.text)
            await asyncio.sleep(1.5)  # a few more ticks: nothing written over the user's status
            got = await api.get(path)
            assert (got["status"]["phase"], got["status"]["message"]) == ("Aborted", "not now")
            assert await api.get_or_none(f"/api/v1/namespaces/{ns}/pods/w0") is not None

            async def job_events() -> dict[str, str]:
                return {
                    e["reason"]: e["note"]
                    for e in await api.events("default")
                    if (e.get("regarding") or {}).get("name") == job_name
                }

            def both(events: dict[str, str]) -> bool:
                return {"Aborted", "PreemptionOptionsIgnored"} <= set(events)

            events = await wait_for(
                lambda: _when(job_events, both), what="the job's Aborted and warning events", detail=log.text
            )
            assert "spec.reservationOptions.preemptionOptions" in events["PreemptionOptionsIgnored"]
            refused = forbidden_lines("\n".join(r.getMessage() for r in log.records))
            assert refused == [], "\n".join(refused)
            assert [r.getMessage() for r in log.records if r.levelno >= logging.ERROR] == []
    finally:
        await api.delete(path, grace=None)
        for p in reversed(applied):
            await api.delete(p, grace=None)


async def _when(read: Any, ok: Any) -> Any:
    got = await read()
    return got if ok(got) else None


async def test_job_writes_never_overwrite_someone_elses(
    api: Api, cluster: Cluster, kube_env: KubeEnv
) -> None:
    """The kube MigrationPort's writes carry the resourceVersion last seen: a status a user wrote
    since (here Aborted) is not overwritten; once the watch's version is observed, writes go on."""
    from koordsched.backends.kube.client import build_client
    from koordsched.backends.kube.deschedule_port import KubeMigrationPort
    from koordsched.descheduler.migration import job as pmj

    await install_pmj_crd(api)
    client = await build_client(str(kube_env.kubeconfig_for(ADMIN_USER)), qps=50, burst=100)
    name = unique("precondition")
    path = f"{PMJS}/{name}"
    try:
        port = KubeMigrationPort(client, None, None)  # type: ignore[arg-type]  # neither is used here
        job = pmj.PodMigrationJob(
            metadata=pmj.ObjectMeta(name=name),
            spec=pmj.PodMigrationJobSpec(
                mode="EvictDirectly", pod_ref=pmj.PodRef(namespace=cluster.ns, name="p")
            ),
            status=pmj.PodMigrationJobStatus(phase=pmj.PENDING),
        )
        await port.save(job)
        assert (await api.get(path))["status"]["phase"] == "Pending"
        await api.patch(f"{path}/status", {"status": {"phase": "Aborted", "message": "by hand"}})
        job.status.phase = pmj.RUNNING
        await port.save(job)  # 409: not written
        got = await api.get(path)
        assert (got["status"]["phase"], got["status"]["message"]) == ("Aborted", "by hand")
        await port.save(job)  # still stale: nothing is sent until the watch's version is seen
        assert (await api.get(path))["status"]["phase"] == "Aborted"
        port.observed(
            pmj.PodMigrationJob(
                metadata=pmj.ObjectMeta(name=name, resource_version=got["metadata"]["resourceVersion"])
            )
        )
        job.status.message = "resumed"
        await port.save(job)
        assert (await api.get(path))["status"]["message"] == "resumed"
    finally:
        await api.delete(path, grace=None)
        await client.close()
