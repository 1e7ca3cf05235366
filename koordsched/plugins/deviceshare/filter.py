"""DeviceShare's Filter over many rows: the kernel, remembered codes, the exact allocator.

Through the shared :class:`~koordsched.framework.batch.BatchEvaluator`, cheapest first:

1. **row memo**: codes kept per row and request signature
   (:func:`~koordsched.plugins.deviceshare.requests.device_signature`), served while the row
   has not changed (the device store marks a node's row changed whenever its devices or
   their usage change); none while preemption state is present;
2. **kernel**: :func:`~koordsched.plugins.deviceshare.kernels.filter_devices` decides most
   rows and marks the rest EXACT (see the kernels module for what it can decide); a node
   with preemption state is always EXACT;
3. **content memo**: the exact verdicts kept per node *content*
   (:meth:`~koordsched.plugins.deviceshare.store.DeviceStore.token`: the Device CR's
   content, the usage, the VFs in use, the partition labels), since many nodes are alike;
   never for a node with preemption state, nor an Error;
4. **exact**: :meth:`~koordsched.plugins.deviceshare.allocator.Allocator.allocate` on the node.

Whatever the tiers say, a node where a bound pod's allocation of a requested type (or the node's
Device CR) cannot be read is refused last, with a reason naming the pod and the annotation (or the
CR): see :meth:`~koordsched.plugins.deviceshare.cycle.DeviceCycles.refusal`.

The codes are those of :class:`~koordsched.framework.batch.FilterCodes`: the kernel's fixed
reasons, then one code per distinct Status of the exact allocator. A node that already has
a NUMA affinity stored in this cycle passes, as upstream (the topology manager already
called ``Allocate`` there); that is applied after the memo, which holds codes regardless.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from functools import partial

import koordsched.plugins.deviceshare.demand as demand
import koordsched.plugins.deviceshare.kernels as kd
from koordsched.framework.batch import BatchEvaluator, BoolArray, FilterCodes
from koordsched.framework.interface import Codes, Rows
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.plugins.deviceshare.cycle import NAME, CycleData, DeviceCycles
from koordsched.plugins.deviceshare.gpu_allocator import (
    ERR_INSUFFICIENT_GPU,
    ERR_INSUFFICIENT_PARTITIONED,
    ERR_INSUFFICIENT_TOPOLOGY_SCOPED,
    ERR_MISSING_PARTITION_TABLE,
    ERR_MISSING_TOPOLOGY_TREE,
    ERR_UNSUPPORTED_GPU_COUNT,
    ERR_UNSUPPORTED_MULTI_SHARED,
)
from koordsched.plugins.deviceshare.walk import insufficient
from koordsched.plugins.topologymanager.interface import AffinityStore

log = logging.getLogger(__name__)


def kernel_statuses() -> dict[int, Status]:
    """The Status behind each reason code the filter kernel returns."""
    out: dict[int, Status] = {}
    for ti, t in enumerate(demand.TABLE.types):
        out[kd.typed_code(ti, kd.R_NO_DEVICES)] = Status.unresolvable(insufficient(t))
        out[kd.typed_code(ti, kd.R_NO_VF)] = Status.unresolvable(f"Insufficient {t} VirtualFunctions")
        out[kd.typed_code(ti, kd.R_INSUFFICIENT)] = Status.unschedulable(insufficient(t))
    out[kd.R_GPU_INSUFFICIENT] = Status.unschedulable(ERR_INSUFFICIENT_GPU)
    out[kd.R_TOPO_SCOPED] = Status.unschedulable(ERR_INSUFFICIENT_TOPOLOGY_SCOPED)
    out[kd.R_MISSING_TABLE] = Status.unresolvable(ERR_MISSING_PARTITION_TABLE)
    out[kd.R_UNSUPPORTED_COUNT] = Status.unresolvable(ERR_UNSUPPORTED_GPU_COUNT)
    out[kd.R_PARTITION_INSUFFICIENT] = Status.unschedulable(ERR_INSUFFICIENT_PARTITIONED)
    out[kd.R_MISSING_TREE] = Status.unresolvable(ERR_MISSING_TOPOLOGY_TREE)
    out[kd.R_MULTI_SHARED] = Status.unresolvable(ERR_UNSUPPORTED_MULTI_SHARED)
    return out


class DeviceFilter:
    """Filter codes of a pod's rows (see the module docstring for the tiers)."""

    def __init__(self, cycles: DeviceCycles) -> None:
        self._cycles = cycles
        self._store = cycles.store
        self.codes = FilterCodes(NAME, fixed=kernel_statuses(), first=kd.FIRST_DYNAMIC_CODE)
        # Exact verdicts cost an allocator walk each: remember a signature's codes from its first pod.
        self.evaluator = BatchEvaluator(eager=True)

    def filter_batch(self, data: CycleData, affinities: AffinityStore | None, rows: Rows) -> Codes:
        """Codes of ``rows``; ``affinities``: the NUMA affinities admitted in this cycle."""
        snap = self._cycles.handle.snapshot
        preempting = data.preempting

        def token(info: NodeInfo) -> Hashable:
            return self._store.token(info) if not data.preempting_on(info.name) else None

        codes = self.evaluator.evaluate(
            snap,
            rows,
            memo_key=None if preempting else data.signature,
            content_key=("filter", data.signature),
            exact=partial(self._exact_code, data),
            token=token,
            kernel=partial(self._kernel, data),
        )
        if affinities is not None:
            codes[affinities.admitted(snap, rows)] = 0
        # Last, over whatever was remembered or admitted: nodes where an allocation or the Device
        # cannot be read offer none of the types concerned.
        for position, status in self._cycles.refuse_rows(data, rows):
            codes[position] = self.codes.code(status)
        return codes

    def _kernel(self, data: CycleData, rows: Rows) -> tuple[Codes, BoolArray | None]:
        arr = self._store.flush_rows()
        tab, grp, parts = arr.tables.arrays()
        codes: Codes = kd.filter_devices(
            arr.flags,
            arr.ndev,
            arr.nslot,
            arr.free,
            arr.vf_free,
            arr.gpu_row,
            arr.gpu_group,
            tab,
            grp,
            parts,
            rows,
            data.vector,
        )
        if data.preempting:
            snap = self._cycles.handle.snapshot
            has_model = arr.flags[rows] & kd.FLAG_HAS_MODEL != 0
            codes[data.preemptible_rows(snap, rows) & has_model] = kd.EXACT
        # Usually the kernel decides every row: then say so without numpy passes over the codes.
        if not kd.any_between(codes, kd.EXACT, kd.EXACT):
            return codes, None
        return codes, codes == kd.EXACT

    def _exact_code(self, data: CycleData, info: NodeInfo) -> tuple[int, bool]:
        status = self.exact(data, info)
        # An Error may be transient (a bug on one node): never remembered.
        return self.codes.code(status), status.code is not Code.ERROR

    def exact(self, data: CycleData, info: NodeInfo) -> Status:
        """The exact allocator's verdict on one node (stored NUMA affinities aside)."""
        try:
            allocator = self._cycles.allocator(data, info)
            if allocator is None:
                return SUCCESS
            _, status = allocator.allocate(preemptible=data.node_preemptible(info.name))
            return status
        except Exception as err:  # a bug on one node must not fail the whole cycle
            log.exception("DeviceShare: filter failed on node %s", info.name)
            return Status.from_error(err)

    def explain(self, code: int) -> Status:
        return self.codes.status(code)
