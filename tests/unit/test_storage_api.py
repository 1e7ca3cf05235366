"""The storage kinds as decoded and checked where they enter (api/storage.py), and their helpers."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from koordsched.api.field_errors import Refused
from koordsched.api.storage import (
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    check_csi_node,
    check_csi_storage_capacity,
    check_persistent_volume,
    check_persistent_volume_claim,
    check_storage_class,
    claim_class,
    claim_request_bytes,
    pv_capacity_bytes,
    pv_node_affinity_matches,
)
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import default_config, load_config
from koordsched.plugins.registry import in_tree_registry


def pv(spec: dict[str, Any], **meta: Any) -> PersistentVolume:
    return msgspec.convert({"metadata": {"name": "pv-1", **meta}, "spec": spec}, PersistentVolume)


def pvc(spec: dict[str, Any], **meta: Any) -> PersistentVolumeClaim:
    return msgspec.convert(
        {"metadata": {"name": "c", "namespace": "ns", **meta}, "spec": spec}, PersistentVolumeClaim
    )


def test_defaults_as_the_api_server_writes_them() -> None:
    sc = msgspec.convert({"metadata": {"name": "s"}, "provisioner": "p"}, StorageClass)
    assert sc.volume_binding_mode == "Immediate"
    assert pv({}).spec.volume_mode == "Filesystem"
    assert pv_capacity_bytes(pv({"capacity": {"storage": "1Gi"}})) == 1024**3
    assert claim_request_bytes(pvc({"resources": {"requests": {"storage": "1.5Ki"}}})) == 1536


@pytest.mark.parametrize(
    ("check", "obj", "message"),
    [
        (
            check_storage_class,
            msgspec.convert(
                {"metadata": {"name": "s"}, "provisioner": "d", "volumeBindingMode": "Later"}, StorageClass
            ),
            'StorageClass "s" is invalid: volumeBindingMode: Unsupported value: "Later": '
            'supported values: "Immediate", "WaitForFirstConsumer"',
        ),
        (
            check_persistent_volume,
            pv({"capacity": {"storage": "-1Gi"}, "accessModes": ["ReadWriteOnce"]}),
            'PersistentVolume "pv-1" is invalid: spec.capacity[storage]: Invalid value: "-1Gi": '
            "must be greater than or equal to 0",
        ),
        (
            check_persistent_volume,
            pv({"accessModes": ["ReadWriteSometimes"]}),
            'PersistentVolume "pv-1" is invalid: spec.accessModes[0]: Unsupported value: '
            '"ReadWriteSometimes": supported values: '
            '"ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"',
        ),
        (
            check_persistent_volume_claim,
            pvc({"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}),
            None,
        ),
        (
            check_csi_node,
            msgspec.convert(
                {
                    "metadata": {"name": "n1"},
                    "spec": {"drivers": [{"name": "d", "allocatable": {"count": -2}}]},
                },
                CSINode,
            ),
            'CSINode "n1" is invalid: spec.drivers[0].allocatable.count: Invalid value: -2: '
            "must be greater than or equal to 0",
        ),
        (
            check_csi_storage_capacity,
            msgspec.convert({"metadata": {"name": "cap"}, "capacity": "lots"}, CSIStorageCapacity),
            None,
        ),
    ],
)
def test_checks_refuse_with_the_api_servers_words(check: Any, obj: Any, message: str | None) -> None:
    with pytest.raises(Refused) as refused:
        check(obj)
    if message is not None:
        assert str(refused.value) == message
    else:
        assert obj.metadata.name in str(refused.value)


def test_claim_class_beta_annotation_wins() -> None:
    assert claim_class(pvc({"storageClassName": "new"})) == "new"
    ann = {"volume.beta.kubernetes.io/storage-class": "old"}
    assert claim_class(pvc({"storageClassName": "new"}, annotations=ann)) == "old"
    assert claim_class(pvc({})) == ""


def test_pv_node_affinity_ignores_match_fields_as_upstream() -> None:
    by_name = {
        "required": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
            ]
        }
    }
    # Upstream checks PV affinity against a node built from labels only (no name).
    assert not pv_node_affinity_matches(pv({"nodeAffinity": by_name}), {"kubernetes.io/hostname": "n1"})
    assert pv_node_affinity_matches(pv({}), {})


@pytest.mark.parametrize("bundled", [False, True])
def test_the_default_profile_has_the_volume_plugins_where_upstream_has_them(bundled: bool) -> None:
    registry = in_tree_registry()
    config = (
        load_config(default_profile_path().read_bytes(), registry) if bundled else default_config(registry)
    )
    profile = config.profiles[0]
    filters = profile.plugins_at("filter")
    order = [
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
    ]
    assert [p for p in filters if p in order] == order
    assert (
        "VolumeBinding" in profile.plugins_at("reserve")
        and profile.plugins_at("preBind")[0] == "VolumeBinding"
    )
    assert profile.args["VolumeBinding"].bind_timeout_seconds == 600  # type: ignore[attr-defined]
