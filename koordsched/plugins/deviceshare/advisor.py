"""How another plugin chooses the GPU of a pod that shares one: :class:`SharedGPUAdvisor`.

DeviceShare's own choice (Reserve's scorer, LeastAllocated by default) takes the freest GPU,
which breaks whole GPUs that later one-GPU and multi-GPU pods need. A plugin of the profile
that implements this protocol (GPUFragmentation) gives, for the chosen node, a scorer that
ranks the node's GPUs its way; DeviceShare's allocation rules (partitions, topology scopes,
reservations) stay as they are: only the order among the GPUs they allow changes.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol, runtime_checkable

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare.scorer import DeviceScorer


@runtime_checkable
class SharedGPUAdvisor(Protocol):
    def shared_gpu_scorer(
        self, state: CycleState, pod: PodInfo, node_name: str
    ) -> tuple[DeviceScorer, Hashable] | None:
        """A scorer for the GPUs of ``node_name`` for this pod (one shared GPU), with what its
        ranking depends on besides the node's devices (to remember allocations by); None for
        DeviceShare's own."""
        ...
