"""DefaultBinder: creates the pod's Binding through the handle's binder (API server or simulator)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import BindPlugin, Handle
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import BindingPlan, PodInfo


class DefaultBinder:
    name = "DefaultBinder"

    def __init__(self, args: Any, handle: Handle) -> None:
        self._handle = handle

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str, plan: BindingPlan) -> Status:
        """A refused bind (``BindError``) or any other failure becomes an Error status (upstream AsStatus)."""
        try:
            await self._handle.binder.bind(pod.pod, node_name, plan)
        except Exception as err:
            return Status.from_error(err)
        return SUCCESS


if TYPE_CHECKING:
    # The extension points DefaultBinder implements; mypy checks each line, nothing runs.
    _bind: type[BindPlugin] = DefaultBinder
