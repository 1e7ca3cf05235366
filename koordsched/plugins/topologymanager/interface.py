"""What a NUMA hint provider implements, and where the chosen affinity is kept during a cycle.

NodeNUMAResource and DeviceShare both provide hints (``GetPodTopologyHints``) and carry
out an allocation restricted to a chosen affinity (``Allocate``). The manager merges the
hints under the node's policy, calls ``allocate`` on every provider with the best hint,
and stores that hint per node in the CycleState, so a later Filter (DeviceShare's) sees
the node as already admitted and Reserve allocates within the same NUMA nodes.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from koordsched.framework.cycle_state import CycleState, StateData
from koordsched.framework.interface import Handle
from koordsched.framework.snapshot import NodeInfo, Snapshot
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


@runtime_checkable
class SignedHintProvider(Protocol):
    """A hint provider that can say what its hints and allocations read, so the topology manager's
    verdict for a node can be remembered: equal signatures and node tokens give equal results."""

    def numa_signature(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """What the provider reads from the pod; None when the result must not be remembered."""

    def numa_node_token(self, node: NodeInfo) -> Hashable:
        """What the provider reads about the node (hashable, equal for nodes it cannot tell apart)."""


class RowLayout(Protocol):
    """Something that counts the snapshot's node additions and removals (the only changes that
    move nodes between rows), so rows recorded earlier can be told still valid in O(1)."""

    layout_version: int


class AffinityStore(StateData):
    """Node name -> the NUMA affinity admitted for it in this cycle.

    Entries come two ways: one node at a time (:meth:`set`, what the topology manager's
    Admit does) and, for the rows whose Filter result NodeNUMAResource remembered from an
    earlier pod, a whole array at once (:meth:`set_rows`: a hint id per snapshot row into a
    table of hints), so a remembered row costs nothing per node. :meth:`get` sees both.

    ``signature`` names the computation every entry came from (NodeNUMAResource's request
    signature together with its hint providers'), or is None when that is not known: a
    consumer may then reuse a per-row result it remembered under the same signature.
    Reading :attr:`by_node` (tests, debugging) gives a plain dict of every entry and, since
    the caller may write to it, forgets the signature.
    """

    def __init__(self) -> None:
        self._explicit: dict[str, NUMATopologyHint] = {}
        #: Hint id per snapshot row (-1: none), indexes into ``_table``; None without rows.
        self._row_ids: npt.NDArray[np.int64] | None = None
        self._table: Sequence[NUMATopologyHint] = ()
        #: The snapshot's NodeInfos when the rows were recorded (to name them if rows move).
        self._infos: list[NodeInfo] = []
        self._by_name: Mapping[str, NodeInfo] = {}
        self._layout: RowLayout | None = None
        self._layout_version = -1
        self.signature: Hashable | None = None

    def _rows_valid(self) -> bool:
        """Whether the recorded rows still hold the nodes they held (else they are named first)."""
        if self._row_ids is None:
            return False
        layout = self._layout
        if layout is not None and layout.layout_version == self._layout_version:
            return True
        self._materialize()
        return False

    # --- one node at a time ----------------------------------------------------------------

    def get(self, name: str) -> NUMATopologyHint | None:
        hint = self._explicit.get(name)
        if hint is not None or self._row_ids is None:
            return hint
        if not self._rows_valid():  # the rows were named: every entry is explicit now
            return self._explicit.get(name)
        info = self._by_name.get(name)
        if info is None:
            return None
        ids = self._row_ids
        hint_id = int(ids[info.row]) if info.row < len(ids) else -1
        return self._table[hint_id] if hint_id >= 0 else None

    def set(self, name: str, hint: NUMATopologyHint) -> None:
        self._explicit[name] = hint

    # --- many rows at once -----------------------------------------------------------------

    def set_rows(
        self,
        snapshot: Snapshot,
        layout: RowLayout,
        rows: npt.NDArray[np.int64],
        hint_ids: npt.NDArray[np.int64],
        table: Sequence[NUMATopologyHint],
    ) -> None:
        """Store ``table[hint_ids[i]]`` for the node of snapshot row ``rows[i]``; ``layout`` tells
        when rows move."""
        if not len(rows):
            return
        ids = self._row_ids
        if ids is None or self._table is not table or not self._rows_valid() or len(ids) < snapshot.n:
            self._materialize()
            ids = self._row_ids = np.full(snapshot.n, -1, dtype=np.int64)
            self._table = table
            self._infos = list(snapshot.infos)
            self._by_name = snapshot.by_name
            self._layout = layout
            self._layout_version = layout.layout_version
        ids[rows] = hint_ids

    def admitted(self, snapshot: Snapshot, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Per position of ``rows``: whether the node there has an affinity stored."""
        ids = self._row_ids
        if ids is not None and self._rows_valid() and len(ids) >= snapshot.n:
            out: npt.NDArray[np.bool_] = ids[rows] >= 0
        else:
            out = np.zeros(len(rows), dtype=np.bool_)
        if self._explicit:
            mask = np.zeros(snapshot.n, dtype=np.bool_)
            by_name = snapshot.by_name
            for name in self._explicit:
                info = by_name.get(name)
                if info is not None:
                    mask[info.row] = True
            out |= mask[rows]
        return out

    @property
    def empty(self) -> bool:
        return not self._explicit and self._row_ids is None

    def _materialize(self) -> None:
        """Turn the row entries into named ones (rows are about to lose their meaning)."""
        ids = self._row_ids
        if ids is None:
            return
        for row in np.flatnonzero(ids >= 0).tolist():
            if row < len(self._infos):
                self._explicit.setdefault(self._infos[row].name, self._table[int(ids[row])])
        self._row_ids = None
        self._infos = []
        self._by_name = {}
        self._layout = None

    @property
    def by_node(self) -> dict[str, NUMATopologyHint]:
        """Every entry as a dict the caller may change (forgets ``signature``)."""
        self._materialize()
        self.signature = None
        return self._explicit

    def clone(self) -> AffinityStore:
        new = AffinityStore()
        new._explicit = dict(self._explicit)
        new._row_ids = None if self._row_ids is None else self._row_ids.copy()
        new._table = self._table
        new._infos = self._infos  # never modified in place
        new._by_name = self._by_name
        new._layout = self._layout
        new._layout_version = self._layout_version
        new.signature = self.signature
        return new


def affinity_store(state: CycleState) -> AffinityStore:
    """The cycle's store, written empty on first use (a caller that ran no PreFilter)."""
    store = state.read_optional(AFFINITY_STORE_KEY, AffinityStore)
    if store is None:
        store = AffinityStore()
        state.write(AFFINITY_STORE_KEY, store)
    return store


def providers(handle: Handle) -> list[NUMATopologyHintProvider]:
    """The profile's hint providers, in the order its plugins were built (Koordinator: NodeNUMAResource,
    then DeviceShare)."""
    return [p for p in handle.plugins().values() if isinstance(p, NUMATopologyHintProvider)]
