"""The Eviction API's version, as the API server serves it, and an Eviction's body.

kube-apiserver takes ``policy/v1beta1`` Evictions up to 1.24 and only ``policy/v1`` from 1.25
(v1 from 1.22). Which one it takes is read once from the core group's discovery (``GET /api/v1``:
the ``pods/eviction`` entry names its group and version), as ``kubectl drain`` does: probing
``/apis/policy/v1`` would say v1 on 1.21, which serves PodDisruptionBudgets there but not
Evictions. No entry (or none with a version) reads as ``v1beta1``, what servers before 1.22 take.
The lookup has the callers' timeout; a failed one is not remembered, so the next eviction asks
again. Discovery is open to every authenticated user (``system:discovery``): no RBAC to add.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from koordsched.backends.kube.client import KubeClient

__all__ = ["EvictionApi", "eviction_version"]

log = logging.getLogger(__name__)

#: What servers without ``pods/eviction``'s version in discovery (before 1.22) take.
LEGACY_VERSION = "v1beta1"


def eviction_version(discovery: Any) -> str:
    """``policy``'s version for Evictions, from ``/api/v1``'s APIResourceList."""
    resources = discovery.get("resources") if isinstance(discovery, dict) else None
    for resource in resources if isinstance(resources, list) else ():
        if not isinstance(resource, dict) or resource.get("name") != "pods/eviction":
            continue
        if resource.get("group") == "policy" and isinstance(resource.get("version"), str):
            return str(resource["version"]) or LEGACY_VERSION
    return LEGACY_VERSION


class EvictionApi:
    """The Eviction API of one cluster: its version, looked up on first use and kept."""

    def __init__(self, client: KubeClient, *, timeout: float) -> None:
        self.client = client
        self.timeout = timeout
        self._version: str | None = None
        self._lock = asyncio.Lock()

    async def version(self) -> str:
        """``v1`` or ``v1beta1``; raises the client's errors when the lookup fails."""
        if self._version is None:
            async with self._lock:  # concurrent evictions wait for one lookup
                if self._version is None:
                    raw = await self.client.request_bytes("GET", "/api/v1", request_timeout=self.timeout)
                    try:
                        discovery = json.loads(raw)
                    except ValueError:
                        discovery = None
                        log.warning("GET /api/v1: not JSON; Evictions are sent as policy/%s", LEGACY_VERSION)
                    self._version = eviction_version(discovery)
                    log.info("the API server takes policy/%s Evictions", self._version)
        return self._version

    async def body(self, name: str, namespace: str, delete_options: dict[str, Any] | None) -> dict[str, Any]:
        """An Eviction of the pod, in the version the server takes."""
        body: dict[str, Any] = {
            "apiVersion": f"policy/{await self.version()}",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if delete_options:
            body["deleteOptions"] = delete_options
        return body
