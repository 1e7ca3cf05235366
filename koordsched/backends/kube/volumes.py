"""VolumeBinding's writes to the API server and its wait for the PV controller.

kube-scheduler ``Update``s the whole PV (or claim) from its informer cache. koordsched decodes
only the fields it reads, so a PUT would drop the rest: it sends a JSON merge patch of exactly
what the decision changes, with the ``resourceVersion`` the decision was made on, so the API
server refuses it (409) when the object changed meanwhile, as it refuses a stale Update.

Each write has a timeout and is not retried: a failed PreBind runs Unreserve and the pod is
retried from its scheduling cycle, which sees whatever landed (a PV whose claimRef did land is
pre-bound to the claim and is chosen again). The wait re-checks every second, as upstream polls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import msgspec

from koordsched.api.core import to_builtins
from koordsched.api.storage import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    PersistentVolume,
    PersistentVolumeClaim,
)
from koordsched.backends.kube.client import MERGE_PATCH, KubeClient

#: upstream's poll interval while waiting for the PV controller.
POLL_INTERVAL = 1.0

_PV = msgspec.json.Decoder(PersistentVolume)
_PVC = msgspec.json.Decoder(PersistentVolumeClaim)


def pv_patch(pv: PersistentVolume) -> dict[str, Any]:
    """The claimRef (and the bound-by-controller mark) VolumeBinding decided for the PV."""
    meta: dict[str, Any] = {}
    if pv.metadata.resource_version:
        meta["resourceVersion"] = pv.metadata.resource_version
    mark = pv.metadata.annotations.get(ANN_BOUND_BY_CONTROLLER)
    if mark is not None:
        meta["annotations"] = {ANN_BOUND_BY_CONTROLLER: mark}
    ref = to_builtins(pv.spec.claim_ref) if pv.spec.claim_ref is not None else None
    return {"metadata": meta, "spec": {"claimRef": ref}}


def pvc_patch(pvc: PersistentVolumeClaim) -> dict[str, Any]:
    """The selected node VolumeBinding decided for a claim to be provisioned."""
    meta: dict[str, Any] = {"annotations": {ANN_SELECTED_NODE: pvc.metadata.annotations[ANN_SELECTED_NODE]}}
    if pvc.metadata.resource_version:
        meta["resourceVersion"] = pvc.metadata.resource_version
    return {"metadata": meta}


class KubeVolumeWriter:
    def __init__(self, client: KubeClient, write_timeout: float) -> None:
        self.client = client
        self.write_timeout = write_timeout
        self.interval = POLL_INTERVAL

    async def update_pv(self, pv: PersistentVolume) -> PersistentVolume:
        raw = await self.client.request_bytes(
            "PATCH",
            f"/api/v1/persistentvolumes/{pv.metadata.name}",
            body=pv_patch(pv),
            content_type=MERGE_PATCH,
            request_timeout=self.write_timeout,
        )
        return _PV.decode(raw)

    async def update_pvc(self, pvc: PersistentVolumeClaim) -> PersistentVolumeClaim:
        m = pvc.metadata
        raw = await self.client.request_bytes(
            "PATCH",
            f"/api/v1/namespaces/{m.namespace}/persistentvolumeclaims/{m.name}",
            body=pvc_patch(pvc),
            content_type=MERGE_PATCH,
            request_timeout=self.write_timeout,
        )
        return _PVC.decode(raw)

    async def wait(self, done: Callable[[], bool], limit_s: float) -> bool:
        """Check ``done`` every :data:`POLL_INTERVAL` (first after one interval, as upstream) until
        it holds or ``limit_s`` passed; its exception ends the wait."""
        deadline = time.monotonic() + limit_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(self.interval, left))
            if done():
                return True
