"""DefaultPreBind (Koordinator, spec 4.9).

In koord-scheduler the PreBind plugins edit a copy of the pod and DefaultPreBind sends one
strategic-merge patch with what they changed before the Binding is created. koordsched
carries the PreBind plugins' annotations on the Binding itself (``BindingPlan.annotations``,
which the API server copies onto the pod atomically with ``spec.nodeName``), so nothing is
left to patch: the plugin exists so that Koordinator's profiles, which name it in
``preBind``, load unchanged, and it succeeds without I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Handle, PreBindPlugin
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import BindingPlan, PodInfo


class DefaultPreBind:
    name = "DefaultPreBind"

    def __init__(self, args: Any, handle: Handle) -> None:
        self._handle = handle

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str, plan: BindingPlan) -> Status:
        return SUCCESS


if TYPE_CHECKING:
    # The extension points DefaultPreBind implements; mypy checks each line, nothing runs.
    _pre_bind: type[PreBindPlugin] = DefaultPreBind
