"""Volumes through ``simulate`` with the bundled profile, as a user runs it: the issue's reports
(a pod whose only PV is pinned to n1 went to n2; a pod naming a missing claim was bound; storage
kinds were "unknown kind, skipped") and the ``volumes`` output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from koordsched.backends.sim.report import render_json, render_table
from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, simulate
from tests.builders import ZONE, node_manifest, pod_manifest, yaml_docs
from tests.scenario.helpers import WriteYaml, assert_failed_scheduling


def node(name: str, cpu: str = "4", zone: str = "") -> dict[str, Any]:
    return node_manifest(name, cpu, "16Gi", labels={ZONE: zone} if zone else None, capacity=False)


def storage_class(
    name: str, mode: str = "WaitForFirstConsumer", provisioner: str = "kubernetes.io/no-provisioner"
) -> str:
    return f"""
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: {name}}}
provisioner: {provisioner}
volumeBindingMode: {mode}
"""


def local_pv(name: str, host: str, size: str = "10Gi", cls: str = "local", claim: str = "") -> str:
    ref = f"\n  claimRef: {{namespace: default, name: {claim}}}" if claim else ""
    return f"""
apiVersion: v1
kind: PersistentVolume
metadata: {{name: {name}}}
spec:
  capacity: {{storage: {size}}}
  accessModes: [ReadWriteOnce]
  storageClassName: {cls}{ref}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [{host}]}}]
"""


def claim(name: str, cls: str = "local", size: str = "5Gi", volume: str = "") -> str:
    vol = f", volumeName: {volume}" if volume else ""
    return f"""
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: {name}, namespace: default, uid: uid-{name}}}
spec:
  {{accessModes: [ReadWriteOnce], storageClassName: {cls}, resources: {{requests: {{storage: {size}}}}}{vol}}}
"""


def pod(name: str, *claims: str, cpu: str = "100m") -> dict[str, Any]:
    volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return pod_manifest(name, cpu, "128Mi", uid="", image="busybox", volumes=volumes)


def cluster(*docs: dict[str, Any] | str) -> str:
    return yaml_docs(*docs)


def test_a_pod_goes_where_its_bound_pv_is(write_yaml: WriteYaml) -> None:
    # n2 is emptier, so resource scoring alone would pick it; the pod's PV lives on n1.
    path = write_yaml(
        cluster(
            node("n1", cpu="2"),
            node("n2", cpu="64"),
            storage_class("local"),
            local_pv("pv-n1", "n1", claim="data"),
            claim("data", volume="pv-n1"),
            pod("db", "data"),
        )
    )
    result = simulate([path])
    assert result.warnings == []
    p = result.pod("default/db")
    assert (p.status, p.node) == (SCHEDULED, "n1")
    assert [(v.claim, v.pv, v.node, v.status) for v in result.volumes] == [
        ("default/data", "pv-n1", "n1", "Bound")
    ]


def test_missing_claim_and_unbound_immediate_claim_keep_pods_pending(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        cluster(
            node("n1"),
            node("n2"),
            storage_class("fast", mode="Immediate", provisioner="csi.example.com"),
            claim("later", cls="fast"),
            pod("orphan", "missing"),
            pod("waits", "later"),
        )
    )
    result = simulate([path])
    orphan, waits = result.pod("default/orphan"), result.pod("default/waits")
    assert orphan.status == waits.status == UNSCHEDULABLE
    assert_failed_scheduling(
        orphan.message, '0/2 nodes are available: persistentvolumeclaim "missing" not found.'
    )
    assert_failed_scheduling(
        waits.message, "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    )


def test_wait_for_first_consumer_binds_distinct_local_pvs(write_yaml: WriteYaml) -> None:
    """Three replicas, three local PVs on two nodes: each claim gets its own PV on the pod's node,
    never one already taken; the fourth finds none and says so."""
    path = write_yaml(
        cluster(
            node("n1"),
            node("n2"),
            storage_class("local"),
            local_pv("n1-a", "n1", size="8Gi"),
            local_pv("n1-b", "n1", size="20Gi"),
            local_pv("n2-a", "n2"),
            *(claim(f"data-{i}") for i in range(4)),
            *(pod(f"db-{i}", f"data-{i}") for i in range(4)),
        )
    )
    result = simulate([path])
    bound = {v.claim: (v.pv, v.node) for v in result.volumes if v.status == "Bound"}
    assert len(bound) == 3 and len({pv for pv, _ in bound.values()}) == 3
    for i in range(4):
        p = result.pod(f"default/db-{i}")
        if p.status == SCHEDULED:
            pv, node_name = bound[f"default/data-{i}"]
            assert pv.startswith(node_name) and p.node == node_name
        else:
            assert_failed_scheduling(
                p.message,
                "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind.",
            )
    assert sum(p.status == SCHEDULED for p in result.pods) == 3
    # On n1 the smaller PV went first (the smallest that fits).
    n1 = [pv for pv, n in bound.values() if n == "n1"]
    assert "n1-a" in n1


def test_provisioning_and_the_report(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        cluster(
            node("n1"),
            storage_class("csi", provisioner="csi.example.com"),
            claim("dyn", cls="csi"),
            pod("app", "dyn"),
        )
    )
    result = simulate([path])
    assert result.pod("default/app").status == SCHEDULED
    out = json.loads(render_json(result))
    assert out["volumes"] == [
        {"claim": "default/dyn", "pv": "pvc-uid-dyn", "node": "n1", "status": "Bound", "provisioned": True}
    ]
    table = render_table(result)
    assert "CLAIM" in table and "default/dyn  Bound   pvc-uid-dyn  n1    yes" in table


def test_storage_objects_the_api_server_would_refuse_are_set_aside(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        cluster(
            node("n1"),
            storage_class("local"),
            claim("bad", size="lots"),
            pod("uses-bad", "bad"),
        )
    )
    result = simulate([path])
    assert any(
        "PersistentVolumeClaim default/bad" in w and "spec.resources.requests[storage]" in w
        for w in result.warnings
    )
    p = result.pod("default/uses-bad")
    assert p.status == UNSCHEDULABLE and 'PersistentVolumeClaim "bad" is invalid' in p.message


def test_the_local_volumes_example() -> None:
    """``koordsched simulate examples/local-volumes.yaml`` does what the file's header says."""
    example = Path(__file__).resolve().parents[2] / "examples" / "local-volumes.yaml"
    result = simulate([example])
    assert result.warnings == []
    placed = {p.name: (p.status, p.node) for p in result.pods}
    assert placed == {
        "db-a": (SCHEDULED, "n1"),
        "db-b": (UNSCHEDULABLE, None),
        "reports": (SCHEDULED, "n2"),
        "app": (SCHEDULED, "n1"),
        "orphan": (UNSCHEDULABLE, None),
    }
    assert {v.claim: v.pv for v in result.volumes} == {
        "default/bound": "pv-bound",
        "default/data-a": "pv-n1",
        "default/data-b": None,
        "default/dyn": "pvc-u-d",
    }


def test_ephemeral_volumes_get_their_claims_and_are_provisioned(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        cluster(
            node("n1"),
            storage_class("local"),
            storage_class("csi", provisioner="csi.example.com"),
            local_pv("pv-n1", "n1"),
            """
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: default, uid: web-0-uid}
spec:
  schedulerName: koord-scheduler
  containers: [{name: c, image: busybox, resources: {requests: {cpu: 100m}}}]
  volumes:
  - name: scratch
    ephemeral:
      volumeClaimTemplate:
        metadata: {labels: {app: web}}
        spec: {accessModes: [ReadWriteOnce], storageClassName: csi, resources: {requests: {storage: 1Gi}}}
  - name: cache
    ephemeral:
      volumeClaimTemplate:
        spec: {accessModes: [ReadWriteOnce], storageClassName: local, resources: {requests: {storage: 1Gi}}}
""",
        )
    )
    result = simulate([path])
    assert result.warnings == []
    assert (result.pod("default/web-0").status, result.pod("default/web-0").node) == (SCHEDULED, "n1")
    assert {v.claim: (v.pv, v.node, v.provisioned) for v in result.volumes} == {
        "default/web-0-cache": ("pv-n1", "n1", False),
        "default/web-0-scratch": ("pvc-uid-default-web-0-scratch", "n1", True),
    }
