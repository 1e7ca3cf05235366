"""deploy/rbac.yaml against the requests a run really makes (fake API server): all granted, all used.

The e2e test (tests/e2e/test_rbac.py) proves the same on a real API server with the file applied;
this one sees every request, watches included (the e2e audit log leaves watches out), and runs in
a second.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import koordsched.kernels
from koordsched.api.kinds import CLUSTER_NETWORK_TOPOLOGIES
from koordsched.backends.kube.app import run_scheduler
from koordsched.backends.kube.handlers import CRD_KINDS, PLUGIN_KINDS
from koordsched.backends.kube.scheduler_flags import RunFlags
from koordsched.plugins.deviceshare.node_lock import lock_value
from tests.builders import shared_gpu_allocatable, vendor_device_manifest
from tests.kube.fake_apiserver import NODES, PODS, Collection, FakeApiServer, Recorded, node_json, pod_json
from tests.kube.helpers import eventually

REPO = Path(__file__).resolve().parents[2]
RBAC = REPO / "deploy" / "rbac.yaml"

Rule = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)


CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  leaseDuration: 1s
  renewDeadline: 600ms
  retryPeriod: 100ms
  resourceName: koord-scheduler
  resourceNamespace: koordinator-system
clientConnection: {qps: 1000, burst: 1000}
profiles:
  - schedulerName: koord-scheduler
    # Coscheduling's PodGroup status controller writes podgroups/status; ElasticQuota writes back.
    # DeviceShare with DevicePluginAdaption: the node lock (nodes get/patch, pods get) and the
    # HAMi-core label (pods patch).
    plugins:
      preFilter: {enabled: [{name: ElasticQuota}, {name: DeviceShare}]}
      filter: {enabled: [{name: DeviceShare}]}
      reserve: {enabled: [{name: ElasticQuota}, {name: DeviceShare}]}
      preBind: {enabled: [{name: DeviceShare}]}
      postBind: {enabled: [{name: Coscheduling}]}
"""

#: An ElasticQuota the status write-back patches (status.used and the runtime annotations).
QUOTA = {
    "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
    "kind": "ElasticQuota",
    "metadata": {"name": "default", "namespace": "default"},
    "spec": {"max": {"cpu": "8"}},
}


PVS = "/api/v1/persistentvolumes"
PVCS_NAME = "persistentvolumeclaims"


def add_volume_objects(api: FakeApiServer) -> None:
    """A pod whose claim gets a local PV on n1, and one whose claim is to be provisioned."""
    classes = "/apis/storage.k8s.io/v1/storageclasses"
    for name, provisioner in (("local", "kubernetes.io/no-provisioner"), ("csi", "csi.example.com")):
        api.add(
            classes,
            {
                "metadata": {"name": name},
                "provisioner": provisioner,
                "volumeBindingMode": "WaitForFirstConsumer",
            },
        )
    api.add(
        PVS,
        {
            "metadata": {"name": "local-pv"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local",
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [],
                                "matchExpressions": [
                                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}
                                ],
                            }
                        ]
                    }
                },
            },
            "status": {"phase": "Available"},
        },
    )
    for claim, cls in (("data", "local"), ("dyn", "csi")):
        api.add(
            f"/api/v1/{PVCS_NAME}",
            {
                "metadata": {"name": claim, "namespace": "default"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": cls,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        )
        body = pod_json(f"uses-{claim}", cpu="100m")
        body["spec"]["volumes"] = [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]
        api.add(PODS, body)


TEMPLATES_PATH = "/api/v1/namespaces/koordinator-system/configmaps"


def add_metax_objects(api: FakeApiServer) -> None:
    """A MetaX node whose lock a deleted pod holds, and a HAMi-core pod asking for a shared GPU."""
    devices = next(k.path for k in CRD_KINDS if k.kind == "Device")
    # DeviceShare watches its vNPU templates' ConfigMap by namespace: served empty.
    api.collections[TEMPLATES_PATH] = Collection(TEMPLATES_PATH, True, "ConfigMap")
    node = node_json(
        "mx", cpu="2", annotations={"hami.io/mutex.lock": lock_value(time.time() - 60, "default", "gone")}
    )
    node["status"]["allocatable"] |= shared_gpu_allocatable(1)
    # Tainted, so the other pods keep to the nodes the checks above expect them on.
    node["spec"]["taints"] = [{"key": "gpu", "effect": "NoSchedule"}]
    api.add(NODES, node)
    api.add(devices, vendor_device_manifest("mx", "metax", "C500"))
    req = {
        "koordinator.sh/gpu.shared": "1",
        "koordinator.sh/gpu-core": "5",
        "koordinator.sh/gpu-memory": "1Gi",
    }
    body = pod_json("vgpu", cpu="100m")
    body["metadata"]["labels"] = {"koordinator.sh/gpu-isolation-provider": "HAMi-core"}
    body["spec"]["containers"][0]["resources"] = {"requests": {**req, "cpu": "100m"}, "limits": req}
    body["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    api.add(PODS, body)


def write_files(tmp_path: Path, api: FakeApiServer) -> tuple[str, str]:
    config, kubeconfig = tmp_path / "config.yaml", tmp_path / "kubeconfig"
    config.write_text(CONFIG)
    kubeconfig.write_text(
        f"""
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{api.url}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""
    )
    return str(config), str(kubeconfig)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(autouse=True)
def no_numba_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(koordsched.kernels, "warm_up", lambda: None)


def objects(kind: str) -> Iterator[dict[str, Any]]:
    with RBAC.open() as f:
        yield from (d for d in yaml.safe_load_all(f) if d and d["kind"] == kind)


def rules(kind: str, name: str) -> list[dict[str, Any]]:
    (role,) = [o for o in objects(kind) if o["metadata"]["name"] == name]
    found: list[dict[str, Any]] = role["rules"]
    return found


def attributes(req: Recorded) -> tuple[Rule, str, str]:
    """What apiserver authorizes a request as: (group, resource, verb), namespace, name."""
    parts = req.path.strip("/").split("/")
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        group, rest = parts[1], parts[3:]
    namespace = ""
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    resource, name = rest[0], (rest[1] if len(rest) > 1 else "")
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(req.method, "")
    if req.method == "GET":
        verb = "get" if name else ("watch" if req.query.get("watch") in ("true", "1") else "list")
    return (group, resource, verb), namespace, name


def allowed(rule_list: list[dict[str, Any]], attrs: Rule, name: str) -> bool:
    group, resource, verb = attrs
    return any(
        group in r["apiGroups"]
        and resource in r["resources"]
        and verb in r["verbs"]
        and (not r.get("resourceNames") or name in r["resourceNames"])
        for r in rule_list
    )


def granted(rule_list: list[dict[str, Any]]) -> set[Rule]:
    return {
        (g, res, v) for r in rule_list for g in r["apiGroups"] for res in r["resources"] for v in r["verbs"]
    }


async def test_every_request_is_granted_and_every_grant_is_used(api: FakeApiServer, tmp_path: Path) -> None:
    for kind in CRD_KINDS:  # served, so that their informers get to watch too
        api.collections[kind.path] = Collection(kind.path, kind.namespaced, kind.kind)
    quotas = next(k.path for k in CRD_KINDS if k.kind == "ElasticQuota")
    api.collections[quotas] = Collection(quotas, True, "ElasticQuota")
    api.add(quotas, QUOTA)
    api.add(NODES, node_json("n1", cpu="2"))
    api.add(PODS, pod_json("fits", cpu="1"))
    api.add(PODS, pod_json("too-big", cpu="4"))
    # A preemption: "urgent" fits only on n2, held by a lower-priority pod (pods delete, the
    # nominatedNodeName status patch).
    api.add(NODES, node_json("n2", cpu="1"))
    api.add(PODS, pod_json("victim", node="n2", cpu="1"))
    urgent = pod_json("urgent", cpu="1")
    urgent["spec"].update(priority=1000, nodeSelector={"kubernetes.io/hostname": "n2"})
    api.add(PODS, urgent)
    add_volume_objects(api)
    # A gang of one, so the PodGroup status controller writes (podgroups/status patch).
    groups = next(k.path for k in CRD_KINDS if k.kind == "PodGroup")
    api.add(groups, {"metadata": {"name": "gang", "namespace": "default"}, "spec": {"minMember": 1}})
    member = pod_json("gang-0", cpu="100m")
    member["metadata"].setdefault("labels", {})["pod-group.scheduling.sigs.k8s.io"] = "gang"
    api.add(PODS, member)
    # --enable-network-topology-manager: the tree manager lists and watches ClusterNetworkTopology
    # and writes the status of "default" (clusternetworktopologies/status patch).
    topologies = CLUSTER_NETWORK_TOPOLOGIES.path
    api.collections[topologies] = Collection(topologies, False, CLUSTER_NETWORK_TOPOLOGIES.kind)
    api.add(
        topologies,
        {
            "metadata": {"name": "default"},
            "spec": {"networkTopologySpec": [{"topologyLayer": "NodeTopologyLayer"}]},
        },
    )
    add_metax_objects(api)
    config, kubeconfig = write_files(tmp_path, api)
    stop = asyncio.Event()
    flags = RunFlags(
        config_given=True, network_topology_manager=True, feature_gates={"DevicePluginAdaption": True}
    )
    task = asyncio.ensure_future(
        run_scheduler(
            config, kubeconfig=kubeconfig, bind_address="127.0.0.1", port=free_port(), stop=stop, flags=flags
        )
    )
    try:
        await eventually(lambda: api.get(PODS, "default/fits")["spec"].get("nodeName") == "n1", within=10)
        await eventually(lambda: any(e["reason"] == "FailedScheduling" for e in api.events.values()))
        await eventually(lambda: bool(api.get(PODS, "default/too-big").get("status", {}).get("conditions")))
        # The ConfigMap DeviceShare reads is watched in its namespace (add_metax_objects).
        scoped = {"/api/v1/configmaps": TEMPLATES_PATH}
        await eventually(lambda: all(api.watchers(scoped.get(k.path, k.path)) for k in PLUGIN_KINDS))
        await eventually(lambda: api.get(PODS, "default/urgent")["spec"].get("nodeName") == "n2", within=10)
        # VolumeBinding's PreBind: a PV's claimRef, and a claim's selected node for the provisioner.
        await eventually(lambda: bool(api.requests_to("PATCH", f"{PVS}/local-pv")), within=10)
        await eventually(
            lambda: bool(api.requests_to("PATCH", f"/api/v1/namespaces/default/{PVCS_NAME}/dyn"))
        )
        await eventually(
            lambda: api.get(groups, "default/gang").get("status", {}).get("phase") == "Scheduled"
        )
        # The status write-back (elasticquotas and elasticquotas/status patch): whatever the pods
        # in "default" hold by now, it is written.
        await eventually(lambda: bool(api.get(quotas, "default/default").get("status", {}).get("used")))
        await eventually(lambda: bool(api.get(topologies, "default").get("status", {}).get("detailStatus")))
        # DevicePluginAdaption: a lock whose pod is gone (pods get) is taken over (nodes get, patch);
        # the HAMi-core label is patched onto the pod before its binding (pods patch).
        await eventually(lambda: api.get(PODS, "default/vgpu")["spec"].get("nodeName") == "mx", within=10)
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 10) == 0

    cluster_rules = rules("ClusterRole", "koordsched")
    (role,) = objects("Role")
    lease_rules, lease_namespace = role["rules"], role["metadata"]["namespace"]
    used: set[Rule] = set()
    for req in api.requests:
        attrs, namespace, name = attributes(req)
        used.add(attrs)
        if attrs[1] == "leases":
            assert namespace == lease_namespace and allowed(lease_rules, attrs, name), (req.method, req.path)
        elif attrs == ("", "configmaps", "get"):
            # The client CA lookup, granted by the built-in extension-apiserver-authentication-reader.
            assert (namespace, name) == ("kube-system", "extension-apiserver-authentication")
        else:
            assert allowed(cluster_rules, attrs, name), (req.method, req.path, attrs)
    # Every grant is used. A repeated event's series is patched only at the recorder's flush
    # (10 s on): tests/e2e/test_rbac.py waits for it.
    # Reservation writes need a Reservation to schedule, which this fake does not serve for
    # writes: tests/e2e/test_reservations.py runs with the same rules and uses them.
    reservation_writes = {
        ("scheduling.koordinator.sh", "reservations", "patch"),
        ("scheduling.koordinator.sh", "reservations/status", "patch"),
        # The quota revoke controller's evictions need monitorAllQuotas and an overused quota:
        # tests/e2e/test_elastic_quota.py runs with the same rules and evicts.
        ("", "pods/eviction", "create"),
    }
    assert granted(cluster_rules) - {("events.k8s.io", "events", "patch")} - reservation_writes <= used
    assert granted(lease_rules) <= used
    assert api.get(PODS, "default/vgpu")["metadata"]["labels"]["hami.io/vgpu-node"] == "mx"
