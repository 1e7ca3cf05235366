"""deploy/rbac.yaml is enough: the scheduler runs with exactly those permissions and nothing else.

The file's objects are applied verbatim. The scheduler authenticates as a token user named
``system:serviceaccount:koordinator-system:koordsched`` in the service-account groups, which is
how the apiserver sees the ServiceAccount the bindings name, so the file's own bindings are what
grant it access (no binding is added or rewritten here). It must schedule, write events (create,
and patch a series), patch the PodScheduled condition, and hold and release the Lease, with not
a single request refused: checked in its log and in the apiserver's audit log. And nothing more
is granted than it uses: every rule of the ClusterRole and the Role (watches aside, which the
audit log leaves out; tests/kube/test_rbac_usage.py sees those) appears among its requests,
as does the client-CA lookup the kube-system RoleBinding is for.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordsched.api.kinds import NODE_METRICS
from koordsched.backends.kube.handlers import CRD_KINDS
from tests.e2e.apiserver import REPO_ROOT, KubeEnv
from tests.e2e.conftest import RBAC_USER
from tests.e2e.helpers import (
    LEASE_NAMESPACE,
    Api,
    ApiError,
    AuditEvent,
    AuditLog,
    Cluster,
    SchedulerProcess,
    condition_message,
    events_for,
    forbidden_lines,
    node_of,
    pod,
    scheduler_processes,
    wait_for,
    write_profile,
)
from tests.e2e.volumes import Storage, exercise_volume_writes

pytestmark = pytest.mark.e2e

RBAC_FILE = REPO_ROOT / "deploy" / "rbac.yaml"
SA_FILE = REPO_ROOT / "deploy" / "serviceaccount.yaml"
#: Grants only used with objects this control plane lacks (no CRD installed): the ElasticQuota
#: status write-back, proven sufficient under this file by tests/e2e/test_elastic_quota.py.
NEEDS_OBJECTS = {
    ("scheduling.sigs.k8s.io", "elasticquotas", "patch"),
    ("scheduling.sigs.k8s.io", "elasticquotas/status", "patch"),
    # The quota overuse revoke controller (monitorAllQuotas), proven there too.
    ("", "pods/eviction", "create"),
    # The network topology tree manager runs only with --enable-network-topology-manager (off
    # here): tests/kube/test_rbac_usage.py runs it with these rules and sees them used, and
    # tests/e2e/test_network_topology.py writes the status against this API server.
    ("scheduling.koordinator.sh", "clusternetworktopologies", "list"),
    ("scheduling.koordinator.sh", "clusternetworktopologies/status", "patch"),
    # DevicePluginAdaption (off here): the node lock and the HAMi-core label. tests/kube/
    # test_rbac_usage.py runs with the gate on and these rules and sees them used.
    ("", "nodes", "get"),
    ("", "nodes", "patch"),
    ("", "pods", "get"),
    ("", "pods", "patch"),
}
#: The Role in deploy/rbac.yaml allows get/update of this Lease only.
LEASE_NAME = "koord-scheduler"

_PATHS = {
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
}


def manifests(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def granted(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def rbac_resource(event: AuditEvent) -> str:
    return f"{event.resource}/{event.subresource}" if event.subresource else event.resource


def collection(obj: dict[str, Any]) -> str:
    kind = obj["kind"]
    assert kind in _PATHS, f"{kind} in deploy/ is not handled by this test"
    return _PATHS[kind].format(ns=obj["metadata"].get("namespace", ""))


async def apply(api: Api, objs: list[dict[str, Any]]) -> list[str]:
    created = []
    for obj in objs:
        base = collection(obj)
        path = f"{base}/{obj['metadata']['name']}"
        try:
            await api.post(base, obj)
        except ApiError as err:
            assert err.status == 409, err
            await api.delete(path, grace=None)
            await api.post(base, obj)
        created.append(path)
    return created


async def test_scheduler_runs_with_deploy_rbac_only(
    api: Api, cluster: Cluster, kube_env: KubeEnv, tmp_path: Path, audit_log: AuditLog
) -> None:
    assert RBAC_FILE.is_file(), f"{RBAC_FILE} is missing"
    objs = manifests(RBAC_FILE)
    kinds = sorted(o["kind"] for o in objs)
    assert {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} <= set(kinds), kinds
    if SA_FILE.is_file():
        objs = manifests(SA_FILE) + objs

    async with Api(kube_env, token=kube_env.token(RBAC_USER)) as limited:
        # Nothing granted yet: the identity starts with no access at all.
        with pytest.raises(ApiError) as denied:
            await limited.get("/api/v1/nodes")
        assert denied.value.status == 403

        applied = await apply(api, objs)
        try:

            async def granted() -> bool:
                try:
                    await limited.get("/api/v1/nodes")
                    return True
                except ApiError as err:
                    assert err.status == 403, err
                    return False

            await wait_for(granted, timeout=30, what="the RBAC rules to take effect")
            # ...and only what the file grants.
            # ConfigMaps are read (DeviceShare's vNPU templates), never written.
            denied_paths = ["/api/v1/serviceaccounts", "/api/v1/secrets"]
            denied_paths += [f"/api/v1/namespaces/{cluster.ns}/{r}/x" for r in ("pods", "configmaps")]
            for path in denied_paths:
                with pytest.raises(ApiError) as denied:
                    # Pods may be deleted (preemption) and patched (DevicePluginAdaption's label),
                    # never updated.
                    write = path.endswith("/x")
                    await limited.request("PUT" if write else "GET", path, body={} if write else None)
                assert denied.value.status == 403, path
            await check_crd_rules(limited)

            await run_scheduler_checks(api, cluster, kube_env, tmp_path, audit_log)
        finally:
            for path in reversed(applied):
                await api.delete(path, grace=None)


async def check_crd_rules(limited: Api) -> None:
    """Koordinator's CRDs (not installed in this control plane): read access only.

    Authorization comes before routing, so a request the rules allow reaches the router and
    gets 404 (200 where the CRD is installed), and one they do not allow gets 403.
    """
    for kind in CRD_KINDS:
        for params in ({}, {"watch": "true", "timeoutSeconds": "1"}):
            try:
                await limited.get(kind.path, **params)
            except ApiError as err:
                assert err.status == 404, (kind.path, params, err)
    for method in ("POST", "DELETE"):
        with pytest.raises(ApiError) as denied:
            await limited.request(method, NODE_METRICS.path)
        assert denied.value.status == 403, method


PODGROUP_CRD = REPO_ROOT / "deploy" / "crds" / "scheduling.sigs.k8s.io_podgroups.yaml"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@contextlib.asynccontextmanager
async def pod_group_crd(api: Api) -> AsyncIterator[None]:
    """The PodGroup CRD, for this test only: the status controller's write must be seen used."""
    (crd,) = manifests(PODGROUP_CRD)
    with contextlib.suppress(ApiError):
        await api.post(CRD_PATH, crd)
    try:

        async def served() -> bool:
            try:
                await api.get("/apis/scheduling.sigs.k8s.io/v1alpha1/podgroups")
                return True
            except ApiError as err:
                assert err.status == 404, err
                return False

        await wait_for(served, what="PodGroups served")
        yield
    finally:
        await api.delete(f"{CRD_PATH}/{crd['metadata']['name']}", grace=None)


async def run_scheduler_checks(
    api: Api, cluster: Cluster, kube_env: KubeEnv, tmp_path: Path, audit_log: AuditLog
) -> None:
    async with pod_group_crd(api):
        await _run_scheduler_checks(api, cluster, kube_env, tmp_path, audit_log)


async def _run_scheduler_checks(
    api: Api, cluster: Cluster, kube_env: KubeEnv, tmp_path: Path, audit_log: AuditLog
) -> None:
    await cluster.add_node("a", cpu="2")
    await cluster.add_node("b", cpu="2")
    cluster.leases.append((LEASE_NAMESPACE, LEASE_NAME))
    await api.delete(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}")
    config = write_profile(tmp_path / "profile.yaml", lease_name=LEASE_NAME)
    mark = audit_log.mark()
    with scheduler_processes() as procs:
        # The user name has colons, and so has kubeconfig_for()'s file name: kubernetes_asyncio
        # splits a kubeconfig path at ':' (as if it were $KUBECONFIG), so use a plain name.
        kubeconfig = tmp_path / "kubeconfig-rbac"
        kubeconfig.write_bytes(kube_env.kubeconfig_for(RBAC_USER).read_bytes())
        kubeconfig.chmod(0o600)
        sched = SchedulerProcess("sched-rbac", config, kubeconfig, tmp_path)
        procs.append(sched)
        await sched.wait_ready()

        # The Lease: created (create), then renewed (get + update).
        async def leading() -> dict[str, Any] | None:
            lease = await api.lease(LEASE_NAMESPACE, LEASE_NAME)
            spec = (lease or {}).get("spec") or {}
            return spec if spec.get("holderIdentity") == sched.identity else None

        first = await wait_for(leading, what="the scheduler to hold the lease", detail=sched.tail)

        async def renewed() -> bool:
            spec = await leading()
            return spec is not None and spec.get("renewTime") != first.get("renewTime")

        await wait_for(renewed, what="a lease renewal", detail=sched.tail)

        # Scheduled: binding (pods/binding create) and a Scheduled event (events create).
        fits = await cluster.add_pod("fits", cpu="2")
        pods = await cluster.wait_bound(["fits"])
        assert node_of(pods["fits"])
        # Unschedulable: PodScheduled=False (pods/status patch) and FailedScheduling (events create).
        big = await cluster.add_pod("big", cpu="3")
        pending = await cluster.wait_condition("big", "False", "Unschedulable")
        message = condition_message(pending)
        assert message.startswith("0/2 nodes are available: 2 Insufficient cpu."), message

        async def both_events() -> bool:
            evs = await cluster.events()
            return bool(events_for(evs, fits, "Scheduled")) and bool(events_for(evs, big, "FailedScheduling"))

        await wait_for(both_events, what="Scheduled and FailedScheduling events", detail=sched.tail)

        # A gang of one: bound, and its PodGroup's status written (podgroups/status patch).
        groups = f"/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{cluster.ns}/podgroups"
        kind = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup"}
        await api.post(groups, {**kind, "metadata": {"name": "gang"}, "spec": {"minMember": 1}})
        member = pod(cluster.ns, "gang-0", cpu="100m")
        member["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] = "gang"
        await api.create_pod(member)
        await cluster.wait_bound(["gang-0"])

        async def pod_group_scheduled() -> bool:
            status = (await api.get(f"{groups}/gang")).get("status") or {}
            return status.get("phase") == "Scheduled"

        await wait_for(pod_group_scheduled, what="the PodGroup status", detail=sched.tail)
        await cluster.delete_pod("gang-0")  # the preemption below needs both nodes empty

        # The same failure again (the freed node does not help): the event's series is patched
        # (events patch) at the recorder's next flush, within about 10 s.
        await cluster.delete_pod("fits")

        async def series_patched() -> int:
            evs = events_for(await cluster.events(), big, "FailedScheduling")
            same = [e for e in evs if e["note"] == message]
            return max(((e.get("series") or {}).get("count", 0) for e in same), default=0)

        count = await wait_for(
            series_patched, timeout=45, what="the FailedScheduling series", detail=sched.tail
        )
        assert count >= 2

        # A preemption: pods delete (the victim) and pods/status patch (nominatedNodeName); the
        # PodDisruptionBudget informer lists policy/v1, then policy/v1beta1 on this 1.20 server.
        await preempt_one(api, cluster, sched)
        # VolumeBinding's writes: a PV's claimRef (persistentvolumes patch) and a claim's selected
        # node (persistentvolumeclaims patch), the PV controller's part played by the test.
        storage = Storage(api)
        try:
            await exercise_volume_writes(api, cluster.ns, cluster.node_name("b"), storage)
        finally:
            await storage.cleanup()

        # A graceful stop releases the lease (update).
        sched.signal(signal.SIGTERM)
        assert await sched.wait_exit() == 0, sched.tail()
        lease = await api.lease(LEASE_NAMESPACE, LEASE_NAME)
        assert (lease or {}).get("spec", {}).get("holderIdentity") in ("", None), lease
        log = sched.log_text()

    assert forbidden_lines(log) == [], "\n".join(forbidden_lines(log))
    assert "Traceback" not in log, log
    mine = [e for e in audit_log.events(mark) if e.user == RBAC_USER]
    refused = [(e.verb, e.uri, e.code) for e in mine if e.code == 403]
    assert refused == [], refused
    done = {(e.verb, e.resource, e.subresource) for e in mine if 200 <= e.code < 300}
    # The client CA lookup at start, allowed by the extension-apiserver-authentication-reader binding
    # (200, or 404 where the map does not exist: authorization comes first either way).
    lookups = [e for e in mine if (e.verb, e.resource, e.namespace) == ("get", "configmaps", "kube-system")]
    assert [e.name for e in lookups] == ["extension-apiserver-authentication"], lookups
    assert lookups[0].code in (200, 404), lookups
    # Every rule granted is used (authorized: anything but 403; a CRD that is not installed is 404).
    authorized = {
        (e.raw["objectRef"].get("apiGroup", ""), rbac_resource(e), e.verb) for e in mine if e.code != 403
    }
    rbac = manifests(RBAC_FILE)
    # Reservation writes need the CRD and a Reservation, which this control plane lacks:
    # tests/e2e/test_reservations.py runs a scheduler with these rules and sees them used.
    reservation_writes = {
        ("scheduling.koordinator.sh", "reservations", "patch"),
        ("scheduling.koordinator.sh", "reservations/status", "patch"),
    }
    for kind in ("ClusterRole", "Role"):
        (role,) = [o for o in rbac if o["kind"] == kind]
        unused = {g for g in granted(role["rules"]) if g[2] != "watch"} - authorized - reservation_writes
        unused -= NEEDS_OBJECTS
        assert unused == set(), f"{kind} grants what the scheduler never asked for: {sorted(unused)}"
    for needed in [
        ("list", "pods", ""),
        ("list", "nodes", ""),
        ("list", "priorityclasses", ""),
        ("create", "pods", "binding"),
        ("patch", "pods", "status"),
        ("create", "events", ""),
        ("patch", "events", ""),
        ("create", "leases", ""),
        ("update", "leases", ""),
        ("patch", "persistentvolumes", ""),
        ("patch", "persistentvolumeclaims", ""),
        ("patch", "podgroups", "status"),
    ]:
        assert needed in done, (needed, sorted(done))


async def preempt_one(api: Api, cluster: Cluster, sched: SchedulerProcess) -> None:
    high = f"{cluster.ns}-high"
    classes = "/apis/scheduling.k8s.io/v1/priorityclasses"
    await api.post(classes, {"metadata": {"name": high}, "value": 1000})
    try:
        await cluster.add_pod("low-a", cpu="2")
        await cluster.add_pod("low-b", cpu="2")
        await cluster.wait_bound(["low-a", "low-b"])
        urgent = pod(cluster.ns, "urgent", cpu="1")
        urgent["spec"]["priorityClassName"] = high
        await api.create_pod(urgent)
        pods = await cluster.wait_bound(["urgent"], timeout=60)
        assert len({"low-a", "low-b"} & set(pods)) == 1, sorted(pods)
    finally:
        await api.delete(f"{classes}/{high}")
        # Leave the nodes' room to what follows (the volume writes pin a pod to node b).
        for name in ("low-a", "low-b", "urgent"):
            await cluster.delete_pod(name)
