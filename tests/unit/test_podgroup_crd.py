"""The PodGroup CRD (deploy/crds): identity, structural schema, nothing Coscheduling reads is pruned."""

from __future__ import annotations

import msgspec

from koordsched.api import kinds as api_kinds
from koordsched.api.core import ObjectMeta
from koordsched.api.podgroup import PodGroup, PodGroupSpec, PodGroupStatus
from tests.unit.test_crds import CRD_DIR, load, props, structural_errors, validate, version_schema, wire_names

PG_CRD = CRD_DIR / "scheduling.sigs.k8s.io_podgroups.yaml"


def test_identity_and_protected_group_approval() -> None:
    crd = load(PG_CRD)
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "podgroups.scheduling.sigs.k8s.io"
    assert (spec["group"], spec["scope"], spec["names"]["kind"]) == (
        "scheduling.sigs.k8s.io",
        "Namespaced",
        "PodGroup",
    )
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    # The status controller writes through the status subresource.
    assert version["subresources"] == {"status": {}}
    assert crd["metadata"]["annotations"]["api-approved.kubernetes.io"].startswith("https://github.com/")
    kind = api_kinds.POD_GROUPS
    assert kind.path == f"/apis/{spec['group']}/v1alpha1/{spec['names']['plural']}"
    assert kind.namespaced


def test_schema_is_structural_and_keeps_every_field() -> None:
    schema = version_schema(load(PG_CRD))
    assert list(structural_errors(schema)) == []
    for at, struct in (((), PodGroup), (("spec",), PodGroupSpec), (("status",), PodGroupStatus)):
        assert wire_names(struct) <= set(props(schema, *at)["properties"])


def test_a_pod_group_passes_the_schema() -> None:
    schema = version_schema(load(PG_CRD))
    pg = PodGroup(
        metadata=ObjectMeta(name="pg", namespace="default"),
        spec=PodGroupSpec(min_member=3, min_resources={"cpu": "3"}, schedule_timeout_seconds=30),
        status=PodGroupStatus(phase="Scheduling", scheduled=2, schedule_start_time="2026-01-01T00:00:00Z"),
    )
    assert list(validate(msgspec.to_builtins(pg), schema)) == []
    assert list(validate({"spec": {"minMember": 2**31}}, schema)) != []
