"""DeviceShare's PreBind with ``DevicePluginAdaption`` on: the vendor annotations and node lock.

The annotations come from :func:`~koordsched.plugins.deviceshare.adaption.adapt`; the node lock
is taken through the output port (:class:`~koordsched.plugins.deviceshare.node_lock.NodeLockWriter`)
before anything is added to the binding plan, so a failure leaves the plan as it was and fails
PreBind (the pod gets its FailedScheduling event and condition and is retried).
"""

from __future__ import annotations

from koordsched.api.koordinator import Device
from koordsched.framework.interface import Handle
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.framework.types import BindingPlan, PodInfo
from koordsched.plugins.deviceshare.adaption import AdaptionError, adapt, wrap
from koordsched.plugins.deviceshare.allocation import PodAllocations
from koordsched.plugins.deviceshare.node_lock import NodeLockError, NodeLocks, NodeLockWriter


class DevicePluginAdapter:
    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self.locks = NodeLocks()

    async def pre_bind(
        self, pod: PodInfo, node_name: str, device: Device, allocations: PodAllocations, plan: BindingPlan
    ) -> Status:
        now = self._handle.clock.wall()
        meta = pod.pod.metadata
        try:
            result = adapt(allocations, device.metadata.labels, meta.labels, node_name, int(now * 1e9))
        except AdaptionError as err:
            return Status(Code.ERROR, str(err))
        if result.lock_key:
            writer = self._handle.binder
            if not isinstance(writer, NodeLockWriter):
                why = "failed to lock node: this scheduler's output cannot write Nodes"
                return Status(Code.ERROR, wrap(result.vendor, why))
            try:
                await self.locks.lock(writer, node_name, result.lock_key, meta.namespace, meta.name, now)
            except NodeLockError as err:
                return Status(Code.ERROR, wrap(result.vendor, str(err)))
        plan.annotations.update(result.annotations)
        plan.labels.update(result.labels)
        return SUCCESS
