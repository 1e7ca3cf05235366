"""VolumeRestrictions, VolumeZone and NodeVolumeLimits, table-driven from kube-scheduler v1.28's semantics."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from koordsched.api.core import Pod
from koordsched.api.resources import resource_list
from koordsched.api.storage import CSINode
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.status import Code, Status
from koordsched.plugins.nodevolumelimits import ERR_REASON_MAX_VOLUME_COUNT, NodeVolumeLimits
from koordsched.plugins.nodevolumelimits.migration import attach_limit_key, ebs_volume_id
from koordsched.plugins.volumerestrictions import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_RWOP_CONFLICT,
    VolumeRestrictions,
)
from koordsched.plugins.volumezone import ERR_REASON_CONFLICT, VolumeZone
from tests.builders import make_node, pod_info
from tests.plugins.conftest import place
from tests.plugins.volumes.helpers import HOSTNAME, NS, StorageHandle, claim_pod, pv, pvc, sc


def handle_with(
    nodes: dict[str, dict[str, str]], *objs: Any, alloc: dict[str, dict[str, Any]] | None = None
) -> StorageHandle:
    snap = Snapshot()
    for name, labels in nodes.items():
        node = make_node(name, labels={HOSTNAME: name, **labels})
        columns: dict[str, int] = {"cpu": 4000, "pods": 110}
        if alloc and name in alloc:
            node = msgspec.structs.replace(
                node, status=msgspec.structs.replace(node.status, allocatable=alloc[name])
            )
            # As the cache writes a node's row: every allocatable resource gets a column.
            columns.update(resource_list(alloc[name]))
        snap.add_node(node, columns)
    h = StorageHandle(snap)
    for o in objs:
        h.add(o)
    return h


def run(plugin: Any, h: StorageHandle, pod: Pod) -> tuple[Status, dict[str, Status]]:
    state = CycleState()
    info = pod_info(pod)
    _, status = plugin.pre_filter(state, info)
    if not status.ok:
        return status, {}
    return status, {n: plugin.filter(state, info, h.snapshot.by_name[n]) for n in h.snapshot.by_name}


def inline_pod(name: str, *volumes: dict[str, Any]) -> Pod:
    return claim_pod(name, volumes=list(volumes))


def gce(pd: str, ro: bool = False) -> dict[str, Any]:
    return {"name": pd, "gcePersistentDisk": {"pdName": pd, "readOnly": ro}}


# --- VolumeRestrictions -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("existing", "incoming", "conflict"),
    [
        (gce("disk-a"), gce("disk-a"), True),
        (gce("disk-a", ro=True), gce("disk-a", ro=True), False),
        (gce("disk-a", ro=True), gce("disk-a"), True),
        (gce("disk-a"), gce("disk-b"), False),
        (
            {"name": "e", "awsElasticBlockStore": {"volumeID": "vol-1", "readOnly": True}},
            {"name": "e", "awsElasticBlockStore": {"volumeID": "vol-1", "readOnly": True}},
            True,
        ),
        (
            {"name": "r", "rbd": {"monitors": ["m1", "m2"], "pool": "p", "image": "i"}},
            {"name": "r", "rbd": {"monitors": ["m2"], "pool": "p", "image": "i"}},
            True,
        ),
        (
            {"name": "r", "rbd": {"monitors": ["m1"], "pool": "p", "image": "i"}},
            {"name": "r", "rbd": {"monitors": ["m2"], "pool": "p", "image": "i"}},
            False,
        ),
        (
            {"name": "s", "iscsi": {"targetPortal": "t:3260", "iqn": "iqn.x", "lun": 0}},
            {"name": "s", "iscsi": {"targetPortal": "t:3260", "iqn": "iqn.x", "lun": 1, "readOnly": True}},
            True,
        ),
    ],
)
def test_disk_conflicts(existing: dict[str, Any], incoming: dict[str, Any], conflict: bool) -> None:
    h = handle_with({"n1": {}, "n2": {}})
    place(h.snapshot, "n1", inline_pod("old", existing))
    _, statuses = run(VolumeRestrictions(None, h), h, inline_pod("new", incoming))
    assert statuses["n2"].ok
    assert statuses["n1"].reasons == ((ERR_REASON_DISK_CONFLICT,) if conflict else ())


def test_read_write_once_pod_claim_used_anywhere_blocks_every_node() -> None:
    h = handle_with({"n1": {}, "n2": {}}, pvc("solo", modes=["ReadWriteOncePod"]), pvc("shared"))
    plugin = VolumeRestrictions(None, h)
    status, _ = run(plugin, h, claim_pod("a", "solo"))
    assert status.code is Code.SKIP  # nobody uses it yet
    used = place(h.snapshot, "n1", claim_pod("a", "solo"))
    _, statuses = run(plugin, h, claim_pod("b", "solo"))
    assert {n: s.reasons for n, s in statuses.items()} == {
        "n1": (ERR_REASON_RWOP_CONFLICT,),
        "n2": (ERR_REASON_RWOP_CONFLICT,),
    }
    # Preemption's dry run removes the user: the claim is free again.
    state = CycleState()
    info = pod_info(claim_pod("b", "solo"))
    plugin.pre_filter(state, info)
    plugin.remove_pod(state, info, used, h.snapshot.by_name["n1"])
    assert plugin.filter(state, info, h.snapshot.by_name["n2"]).ok
    # A ReadWriteOnce claim shared by pods: not this plugin's business.
    place(h.snapshot, "n1", claim_pod("c", "shared"))
    _, status = plugin.pre_filter(CycleState(), pod_info(claim_pod("d", "shared")))
    assert status.code is Code.SKIP


def test_restrictions_missing_claim() -> None:
    h = handle_with({"n1": {}})
    status, _ = run(VolumeRestrictions(None, h), h, claim_pod("a", "nope"))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ('persistentvolumeclaim "nope" not found',)


# --- VolumeZone ----------------------------------------------------------------------------------

ZONE, ZONE_BETA, REGION = (
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
)


@pytest.mark.parametrize(
    ("pv_labels", "node_labels", "fits"),
    [
        ({ZONE: "a"}, {ZONE: "a"}, True),
        ({ZONE: "a"}, {ZONE: "b"}, False),
        ({ZONE: "a__b"}, {ZONE: "b"}, True),
        ({ZONE_BETA: "a"}, {ZONE: "a"}, True),  # a beta PV label matches the GA node label
        ({ZONE: "a"}, {ZONE_BETA: "a"}, False),  # not the other way round
        ({ZONE: "a", REGION: "r1"}, {ZONE: "a", REGION: "r2"}, False),
        ({ZONE: "a"}, {}, True),  # a node without zone labels takes any volume
        ({ZONE: "a"}, {REGION: "r1"}, False),
    ],
)
def test_volume_zone(pv_labels: dict[str, str], node_labels: dict[str, str], fits: bool) -> None:
    h = handle_with(
        {"n1": node_labels}, sc("local"), pvc("c", volume="p", bound=True), pv("p", labels=pv_labels)
    )
    status, statuses = run(VolumeZone(None, h), h, claim_pod("x", "c"))
    assert status.ok
    assert statuses["n1"].ok is fits
    if not fits:
        assert statuses["n1"].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert statuses["n1"].reasons == (ERR_REASON_CONFLICT,)


@pytest.mark.parametrize(
    ("objs", "code", "reason"),
    [
        ([], Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 'persistentvolumeclaim "c" not found'),
        (
            [pvc("c", volume="gone", bound=True)],
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            'persistentvolume "gone" not found',
        ),
        (
            [pvc("c", cls=None)],
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "PersistentVolumeClaim had no pv name and storageClass name",
        ),
        (
            [pvc("c", cls="nope")],
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            'storageclass.storage.k8s.io "nope" not found',
        ),
        (
            [pvc("c", cls="fast"), sc("fast", mode="Immediate")],
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "PersistentVolume had no name",
        ),
        ([pvc("c"), sc("local")], Code.SKIP, None),  # waits for its first consumer: VolumeBinding's
    ],
)
def test_volume_zone_prefilter(objs: list[Any], code: Code, reason: str | None) -> None:
    h = handle_with({"n1": {}}, *objs)
    status, _ = run(VolumeZone(None, h), h, claim_pod("x", "c"))
    assert status.code is code
    if reason is not None:
        assert status.reasons == (reason,)


# --- NodeVolumeLimits ------------------------------------------------------------------------------

DRIVER = "ebs.csi.aws.com"


def csi_node(name: str, count: int | None, driver: str = DRIVER, migrated: str = "") -> CSINode:
    alloc = {"count": count} if count is not None else None
    meta: dict[str, Any] = {"name": name}
    if migrated:
        meta["annotations"] = {"storage.alpha.kubernetes.io/migrated-plugins": migrated}
    return msgspec.convert(
        {"metadata": meta, "spec": {"drivers": [{"name": driver, "nodeID": name, "allocatable": alloc}]}},
        CSINode,
    )


def csi_pv(name: str, handle_id: str, driver: str = DRIVER) -> Any:
    return pv(name, csi={"driver": driver, "volumeHandle": handle_id})


def test_limit_counts_attached_volumes_once_per_volume() -> None:
    objs = [
        csi_node("n1", 2),
        csi_node("n2", 1),
        *(csi_pv(f"p{i}", f"h{i}") for i in range(3)),
        *(pvc(f"c{i}", volume=f"p{i}", bound=True) for i in range(3)),
    ]
    h = handle_with({"n1": {}, "n2": {}}, *objs)
    plugin = NodeVolumeLimits(None, h)
    place(h.snapshot, "n1", claim_pod("old", "c0"))
    place(h.snapshot, "n2", claim_pod("old2", "c0"))
    _, statuses = run(plugin, h, claim_pod("new", "c1"))
    # n1: 1 attached + 1 new <= 2; n2: 1 + 1 > 1.
    assert statuses["n1"].ok and statuses["n2"].reasons == (ERR_REASON_MAX_VOLUME_COUNT,)
    # The same volume as the attached one costs nothing more.
    _, statuses = run(plugin, h, claim_pod("same", "c0"))
    assert statuses["n2"].ok
    _, statuses = run(plugin, h, claim_pod("two", "c1", "c2"))
    assert statuses["n1"].reasons == (ERR_REASON_MAX_VOLUME_COUNT,)


def test_limit_from_node_allocatable_and_unbound_claims_count_by_provisioner() -> None:
    key = attach_limit_key(DRIVER)
    h = handle_with(
        {"n1": {}},
        sc("ebs", provisioner=DRIVER),
        pvc("u1", cls="ebs"),
        pvc("u2", cls="ebs"),
        alloc={"n1": {"cpu": "4", key: "1"}},
    )
    plugin = NodeVolumeLimits(None, h)
    _, statuses = run(plugin, h, claim_pod("one", "u1"))
    assert statuses["n1"].ok
    _, statuses = run(plugin, h, claim_pod("two", "u1", "u2"))
    assert statuses["n1"].reasons == (ERR_REASON_MAX_VOLUME_COUNT,)


def test_in_tree_volumes_count_under_their_csi_driver_once_migrated() -> None:
    ebs = {"name": "e", "awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-0123"}}
    ebs2 = {"name": "f", "awsElasticBlockStore": {"volumeID": "vol-0456"}}
    h = handle_with({"n1": {}, "n2": {}}, csi_node("n1", 1))
    plugin = NodeVolumeLimits(None, h)
    place(h.snapshot, "n1", inline_pod("old", ebs))
    place(h.snapshot, "n2", inline_pod("old2", ebs))
    _, statuses = run(plugin, h, inline_pod("new", ebs2))
    # n1 has a CSINode (migration on) with room for 1; n2 has none: no limit known.
    assert statuses["n1"].reasons == (ERR_REASON_MAX_VOLUME_COUNT,) and statuses["n2"].ok
    _, statuses = run(plugin, h, inline_pod("again", ebs))
    assert statuses["n1"].ok


def test_limits_lookup_errors() -> None:
    h = handle_with({"n1": {}}, csi_node("n1", 1))
    plugin = NodeVolumeLimits(None, h)
    _, statuses = run(plugin, h, claim_pod("x", "missing"))
    assert statuses["n1"].code is Code.ERROR
    assert statuses["n1"].reasons == (
        f'looking up PVC {NS}/missing: persistentvolumeclaim "missing" not found',
    )
    _, status = plugin.pre_filter(CycleState(), pod_info(claim_pod("none")))
    assert status.code is Code.SKIP


def test_attach_limit_key_and_ebs_ids() -> None:
    assert attach_limit_key("ebs.csi.aws.com") == "attachable-volumes-csi-ebs.csi.aws.com"
    long = "a-very-long-csi-driver-name.storage.example.com"
    key = attach_limit_key(long)
    assert key.startswith("attachable-volumes-csi-a-very-long-csi-drive") and len(key) == 23 + 23 + 16
    assert ebs_volume_id("aws://us-east-1a/vol-0123") == "vol-0123"
    assert ebs_volume_id("vol-9") == "vol-9"


def test_azure_disk_and_cinder_count_under_their_csi_drivers() -> None:
    azure = {"name": "a", "azureDisk": {"diskName": "d1", "diskURI": "/subscriptions/s/disks/d1"}}
    cinder_pv = pv("cv", cinder={"volumeID": "vol-c1"})
    h = handle_with(
        {"n1": {}},
        csi_node("n1", 1, driver="disk.csi.azure.com"),
        cinder_pv,
        pvc("cc", volume="cv", bound=True),
    )
    h.add(
        msgspec.convert(
            {
                "metadata": {"name": "n1"},
                "spec": {
                    "drivers": [
                        {"name": "disk.csi.azure.com", "allocatable": {"count": 1}},
                        {"name": "cinder.csi.openstack.org", "allocatable": {"count": 0}},
                    ]
                },
            },
            CSINode,
        )
    )
    plugin = NodeVolumeLimits(None, h)
    _, statuses = run(plugin, h, inline_pod("az", azure))
    assert statuses["n1"].ok
    place(h.snapshot, "n1", inline_pod("old", azure))
    other = {"name": "b", "azureDisk": {"diskName": "d2", "diskURI": "/subscriptions/s/disks/d2"}}
    _, statuses = run(plugin, h, inline_pod("az2", other))
    assert statuses["n1"].reasons == (ERR_REASON_MAX_VOLUME_COUNT,)
    _, statuses = run(plugin, h, claim_pod("cin", "cc"))
    assert statuses["n1"].reasons == (ERR_REASON_MAX_VOLUME_COUNT,)
