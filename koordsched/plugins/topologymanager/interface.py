"""What a NUMA hint provider implements, and where the chosen affinity is kept during a cycle.

NodeNUMAResource and DeviceShare both provide hints (``GetPodTopologyHints``) and carry
out an allocation restricted to a chosen affinity (``Allocate``). The manager merges the
hints under the node's policy, calls ``allocate`` on every provider with the best hint,
and stores that hint per node in the CycleState, so a later Filter (DeviceShare's) sees
the node as already admitted and Reserve allocates within the same NUMA nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from koordsched.framework.cycle_state import CycleState, StateData
from koordsched.framework.interface import Handle
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import Status
from koordsched.framework.types import PodInfo

#: CycleState key, as Koordinator names it.
AFFINITY_STORE_KEY = "koordinator.sh/topology-affinity-store"


@dataclass(frozen=True)
class NUMATopologyHint:
    """A set of NUMA nodes as a bit mask (bit i = NUMA node i); ``None`` means "any node"."""

    affinity: int | None
    preferred: bool
    score: int = 0
    #: The provider cannot satisfy its resource at all (kubelet's empty hint list, merged in).
    unsatisfied: bool = False


#: resource or device type name -> its hints; None for "no preference" (kubelet's nil list).
TopologyHints = dict[str, list[NUMATopologyHint] | None]


@runtime_checkable
class NUMATopologyHintProvider(Protocol):
    name: str

    def get_pod_topology_hints(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> tuple[TopologyHints | None, Status]: ...

    def allocate(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, affinity: NUMATopologyHint
    ) -> Status: ...


class AffinityStore(StateData):
    """Node name -> the NUMA affinity admitted for it in this cycle."""

    def __init__(self) -> None:
        self.by_node: dict[str, NUMATopologyHint] = {}

    def clone(self) -> AffinityStore:
        new = AffinityStore()
        new.by_node = dict(self.by_node)
        return new


def affinity_store(state: CycleState) -> AffinityStore:
    store = state.get(AFFINITY_STORE_KEY)
    if not isinstance(store, AffinityStore):
        store = AffinityStore()
        state.write(AFFINITY_STORE_KEY, store)
    return store


def providers(handle: Handle) -> list[NUMATopologyHintProvider]:
    """The profile's hint providers, in the order its plugins were built (Koordinator: NodeNUMAResource,
    then DeviceShare)."""
    return [p for p in handle.plugins().values() if isinstance(p, NUMATopologyHintProvider)]
