"""What the resource scorers need from a pod, per configured resource (``resourceAllocationScorer``).

Built once per pod at PreScore: for each configured resource, the snapshot column to
read (-1 to leave it out), where the node's requested amount comes from, and the pod's
own request. Upstream leaves a resource out of a node's score when the node has none of
it (allocatable 0), when it is a scalar resource the pod does not request, and when it
is a name the scheduler does not track (neither cpu, memory, ephemeral-storage nor a
scalar resource). What does not depend on the pod is worked out once, when the plugin
is built.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from koordsched.api.resources import is_scalar_resource_name
from koordsched.framework.snapshot import CPU, EPHEMERAL_STORAGE, I64, MEMORY, Snapshot
from koordsched.framework.types import PodInfo
from koordsched.plugins.noderesources.args import ResourceSpec
from koordsched.plugins.noderesources.nonzero import pod_nonzero

_CPU, _MEMORY, _EPHEMERAL, _SCALAR, _UNTRACKED = range(5)


@dataclass(frozen=True, slots=True)
class ScoreRequest:
    cols: I64
    #: Column of the non-zero cpu/memory array to read the node's requested amount from, or -1 for ``used``.
    nonzero_cols: I64
    pod_req: I64
    #: No resource is left to score: every node scores the same.
    empty: bool

    @property
    def key(self) -> bytes:
        """Pods with equal keys get equal scores on an unchanged node (see RowMemo)."""
        return self.cols.tobytes() + b"/" + self.nonzero_cols.tobytes() + b"/" + self.pod_req.tobytes()


class ScoreResources:
    """The configured resources of one scorer, resolved to kinds once."""

    def __init__(self, resources: list[ResourceSpec], use_requested: bool) -> None:
        """``use_requested`` False counts cpu and memory the non-zero way on both the node and the pod
        side (NodeResourcesFit); True uses plain requests (NodeResourcesBalancedAllocation)."""
        self.names = [r.name for r in resources]
        self.weights = np.asarray([r.weight for r in resources], dtype=np.int64)
        kinds = []
        for name in self.names:
            if name == CPU:
                kinds.append(_CPU)
            elif name == MEMORY:
                kinds.append(_MEMORY)
            elif name == EPHEMERAL_STORAGE:
                kinds.append(_EPHEMERAL)
            elif is_scalar_resource_name(name):
                kinds.append(_SCALAR)
            else:
                kinds.append(_UNTRACKED)
        self.kinds = kinds
        self.use_requested = use_requested
        nonzero = [k if k in (_CPU, _MEMORY) and not use_requested else -1 for k in kinds]
        self.nonzero_cols: I64 = np.asarray(nonzero, dtype=np.int64)

    def request(self, snapshot: Snapshot, pod: PodInfo) -> ScoreRequest:
        """``calculatePodResourceRequestList`` plus the column lookup the kernels need."""
        requests = pod.requests
        nonzero = None if self.use_requested else pod_nonzero(pod)
        cols: list[int] = []
        amounts: list[int] = []
        for name, kind in zip(self.names, self.kinds, strict=True):
            if kind in (_CPU, _MEMORY):  # cpu and memory are always columns 0 and 1
                cols.append(kind)
                amounts.append(requests.get(name, 0) if nonzero is None else nonzero[2 + kind])
            elif kind == _EPHEMERAL:
                cols.append(2)
                amounts.append(requests.get(name, 0))
            elif kind == _SCALAR and (amount := requests.get(name, 0)):
                col = snapshot.resources.get(name)
                cols.append(-1 if col is None else col)
                amounts.append(amount)
            else:
                cols.append(-1)
                amounts.append(0)
        return ScoreRequest(
            np.asarray(cols, dtype=np.int64),
            self.nonzero_cols,
            np.asarray(amounts, dtype=np.int64),
            all(c < 0 for c in cols),
        )
