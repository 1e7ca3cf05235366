"""The API writes of DeviceShare's ``DevicePluginAdaption`` (Koordinator v1.7): the node lock's
read of the Node and of the locking pod, its one patch of the Node, and the pod labels a Binding
cannot carry.

Each request has the port's write timeout. The Node patch is a JSON merge patch of the one
annotation with the resourceVersion it was decided on, so the API server refuses it (409) when
the Node changed meanwhile (another scheduler took the lock), as Koordinator's Update would be.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from koordsched.backends.kube.client import MERGE_PATCH, STRATEGIC_MERGE_PATCH, ApiError, KubeClient


class _Meta(msgspec.Struct, rename="camel"):
    annotations: dict[str, str] | None = None
    resource_version: str = ""


class _Object(msgspec.Struct):
    """What the lock reads of a Node."""

    metadata: _Meta = msgspec.field(default_factory=_Meta)


_OBJECT = msgspec.json.Decoder(_Object)


def node_lock_patch(annotations: Mapping[str, str], resource_version: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"annotations": dict(annotations)}
    if resource_version:
        meta["resourceVersion"] = resource_version
    return {"metadata": meta}


def pod_labels_patch(labels: Mapping[str, str], uid: str) -> dict[str, Any]:
    """The labels PreBind set, the pod's uid riding along so a recreated pod is left alone."""
    meta: dict[str, Any] = {"labels": dict(labels)}
    if uid:
        meta["uid"] = uid
    return {"metadata": meta}


class KubeNodeLock:
    def __init__(self, client: KubeClient, write_timeout: float) -> None:
        self.client = client
        self.write_timeout = write_timeout

    async def _get(self, path: str) -> bytes | None:
        """The object at ``path``; None when the API server says NotFound."""
        try:
            return await self.client.request_bytes("GET", path, request_timeout=self.write_timeout)
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    async def read_node_annotations(self, node_name: str) -> tuple[Mapping[str, str], str] | None:
        raw = await self._get(f"/api/v1/nodes/{node_name}")
        if raw is None:
            return None
        meta = _OBJECT.decode(raw).metadata
        return meta.annotations or {}, meta.resource_version

    async def pod_exists(self, namespace: str, name: str) -> bool:
        return await self._get(f"/api/v1/namespaces/{namespace}/pods/{name}") is not None

    async def patch_node_annotations(
        self, node_name: str, annotations: Mapping[str, str], resource_version: str
    ) -> None:
        await self.client.request_bytes(
            "PATCH",
            f"/api/v1/nodes/{node_name}",
            body=node_lock_patch(annotations, resource_version),
            content_type=MERGE_PATCH,
            request_timeout=self.write_timeout,
        )

    async def patch_pod_labels(self, namespace: str, name: str, uid: str, labels: Mapping[str, str]) -> None:
        await self.client.request_bytes(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{name}",
            body=pod_labels_patch(labels, uid),
            content_type=STRATEGIC_MERGE_PATCH,
            request_timeout=self.write_timeout,
        )
