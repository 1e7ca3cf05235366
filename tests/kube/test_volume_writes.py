"""VolumeBinding's writes through the kube port: merge patches of exactly the decision, conditional
on the resourceVersion it was made on, each with a timeout; and the poll for the PV controller."""

from __future__ import annotations

import asyncio
import time

import msgspec
import pytest

from koordsched.api.storage import ClaimReference, PersistentVolume, PersistentVolumeClaim
from koordsched.backends.kube.client import MERGE_PATCH, ApiError, KubeClient
from koordsched.backends.kube.port import KubePort
from koordsched.plugins.volumebinding import VolumeBindingWriter
from tests.kube.fake_apiserver import Collection, FakeApiServer

PVS = "/api/v1/persistentvolumes"
PVCS = "/api/v1/persistentvolumeclaims"


def serve(api: FakeApiServer) -> None:
    api.collections[PVS] = Collection(PVS, False, "PersistentVolume")
    api.collections[PVCS] = Collection(PVCS, True, "PersistentVolumeClaim")


def stored_pv(api: FakeApiServer) -> PersistentVolume:
    return msgspec.convert(api.get(PVS, "pv-1"), PersistentVolume)


async def test_a_pv_gets_the_claim_ref_and_nothing_else(api: FakeApiServer, client: KubeClient) -> None:
    serve(api)
    api.add(
        PVS,
        {
            "metadata": {"name": "pv-1", "labels": {"keep": "me"}},
            "spec": {"capacity": {"storage": "1Gi"}, "local": {"path": "/mnt"}},
        },
    )
    port = KubePort(client)
    assert isinstance(port, VolumeBindingWriter)
    pv = stored_pv(api)
    ref = ClaimReference(
        kind="PersistentVolumeClaim", namespace="ns", name="data", uid="u1", api_version="v1"
    )
    decided = msgspec.structs.replace(
        pv,
        metadata=msgspec.structs.replace(
            pv.metadata, annotations={"pv.kubernetes.io/bound-by-controller": "yes"}
        ),
        spec=msgspec.structs.replace(pv.spec, claim_ref=ref),
    )
    written = await port.update_persistent_volume(decided)
    (req,) = api.requests_to("PATCH", f"{PVS}/pv-1")
    assert req.content_type.startswith(MERGE_PATCH)
    assert req.body == {
        "metadata": {
            "resourceVersion": pv.metadata.resource_version,
            "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"},
        },
        "spec": {
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "namespace": "ns",
                "name": "data",
                "uid": "u1",
                "apiVersion": "v1",
            }
        },
    }
    stored = api.get(PVS, "pv-1")
    # Fields koordsched does not decode are left alone (an Update of the decoded object would drop them).
    assert stored["spec"]["local"] == {"path": "/mnt"} and stored["metadata"]["labels"] == {"keep": "me"}
    assert written.spec.claim_ref == ref
    assert written.metadata.resource_version == stored["metadata"]["resourceVersion"]


async def test_a_stale_decision_is_refused(api: FakeApiServer, client: KubeClient) -> None:
    serve(api)
    api.add(PVCS, {"metadata": {"name": "dyn", "namespace": "ns"}, "spec": {}})
    claim = msgspec.convert(api.get(PVCS, "ns/dyn"), PersistentVolumeClaim)
    api.modify(PVCS, api.get(PVCS, "ns/dyn"))  # someone else wrote it meanwhile
    selected = msgspec.structs.replace(
        claim,
        metadata=msgspec.structs.replace(
            claim.metadata, annotations={"volume.kubernetes.io/selected-node": "n1"}
        ),
    )
    port = KubePort(client)
    with pytest.raises(ApiError) as refused:
        await port.update_persistent_volume_claim(selected)
    assert refused.value.status == 409
    assert "volume.kubernetes.io/selected-node" not in (
        api.get(PVCS, "ns/dyn")["metadata"].get("annotations") or {}
    )


async def test_the_wait_polls_until_done_or_the_limit(client: KubeClient) -> None:
    port = KubePort(client)
    port.volumes.interval = 0.01
    calls = 0

    def third_time() -> bool:
        nonlocal calls
        calls += 1
        return calls == 3

    assert await port.wait_for_volume_binding(third_time, 5.0)
    t0 = time.monotonic()
    assert not await port.wait_for_volume_binding(lambda: False, 0.1)
    assert 0.08 <= time.monotonic() - t0 < 1.0

    def undone() -> bool:
        raise RuntimeError('ClaimRef got reset for pv "pv-1"')

    with pytest.raises(RuntimeError):
        await asyncio.wait_for(port.wait_for_volume_binding(undone, 5.0), 2)
