"""What PreBind needs from the output port to bind volumes (the kube backend and the simulator provide it).

The scheduler does not bind claims itself: it records its decision on the PV (``claimRef``) or
on the claim (``volume.kubernetes.io/selected-node`` for the provisioner) and waits for the PV
controller to complete the binding, as kube-scheduler does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from koordsched.api.storage import PersistentVolume, PersistentVolumeClaim


@runtime_checkable
class VolumeBindingWriter(Protocol):
    async def update_persistent_volume(self, pv: PersistentVolume) -> PersistentVolume:
        """Write the PV's ``claimRef`` and annotations (conditional on its resourceVersion); the PV
        as written. Raises on failure (a conflict included)."""

    async def update_persistent_volume_claim(self, pvc: PersistentVolumeClaim) -> PersistentVolumeClaim:
        """Write the claim's annotations (conditional on its resourceVersion); the claim as written."""

    async def wait_for_volume_binding(self, done: Callable[[], bool], limit_s: float) -> bool:
        """Re-evaluate ``done`` as the cluster changes until it is True (then True) or ``limit_s``
        seconds passed (then False). ``done`` may raise: the wait ends with that error."""
