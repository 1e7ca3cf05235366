"""What a pod asks for, as the fragmentation measure sees it: a :class:`Shape`.

Every form of a GPU request counts alike: DeviceShare's own parsing turns ``nvidia.com/gpu``,
``koordinator.sh/gpu`` (percent of a card), ``gpu-core`` + ``gpu-memory-ratio``,
``gpu-memory`` (bytes), ``gpu.shared`` and the Ascend forms (``huawei.com/npu-core``) into a
number of GPUs and a per-GPU request of core, memory ratio, memory and AI cores. A pod whose
device request DeviceShare refuses is a shape without GPUs (it will not be placed; its cpu and
memory still describe the workload).

Where a shape may run is its :class:`Placement`: the pod's node selector, required node
affinity and tolerations (of NoSchedule and NoExecute taints), evaluated over every node at
once (:func:`access_mask`), so the measure knows which nodes a pinned or GPU-model-bound
workload can use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import msgspec
import numpy as np
import numpy.typing as npt

from koordsched.api.core import NodeSelectorRequirement, NodeSelectorTerm, Pod, Toleration
from koordsched.api.koordinator import GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, LABEL_GPU_MODEL, NPU_CORE
from koordsched.api.taints import NO_EXECUTE, NO_SCHEDULE, find_untolerated_taint
from koordsched.framework.shared_memo import IdentityMemo
from koordsched.framework.snapshot import BoolArray, Snapshot
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare import DeviceRequestError, calc_gpu_per_instance, get_pod_device_requests
from koordsched.plugins.nodeaffinity.selector import Masks, Term, compile_terms

_GPU_TYPE: Final = "gpu"
#: Amounts are capped here (their sums in the kernels stay within int64).
_LARGEST: Final = 1 << 60
#: Shapes remembered (by requests, by object, as kernel vectors) before starting afresh.
_MAX_REMEMBERED: Final = 8192
_FILTER_EFFECTS: Final = (NO_SCHEDULE, NO_EXECUTE)
_ENCODER = msgspec.json.Encoder()


class Placement:
    """Which nodes a shape may use: node selector, required node affinity, tolerations.
    Equal when they say the same (compared by their encoding)."""

    __slots__ = ("key", "node_selector", "terms", "tolerations")

    def __init__(
        self,
        node_selector: Mapping[str, str],
        terms: Sequence[NodeSelectorTerm] | None,
        tolerations: Sequence[Toleration],
    ) -> None:
        self.node_selector = tuple(sorted(node_selector.items()))
        #: None: no required node affinity (every node); else the compiled terms (none: no node).
        self.terms: tuple[Term, ...] | None = None if terms is None else compile_terms(terms)
        self.tolerations = tuple(tolerations)
        self.key = _ENCODER.encode(
            (self.node_selector, None if terms is None else list(terms), list(self.tolerations))
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Placement) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"Placement({self.key.decode()})"


ANYWHERE: Final = Placement({}, None, ())


def pod_placement(pod: Pod) -> Placement:
    spec = pod.spec
    affinity = spec.affinity.node_affinity if spec.affinity is not None else None
    required = affinity.required_during_scheduling_ignored_during_execution if affinity is not None else None
    terms = required.node_selector_terms if required is not None else None
    if not spec.node_selector and terms is None and not spec.tolerations:
        return ANYWHERE
    return Placement(spec.node_selector, terms, spec.tolerations)


def models_placement(models: Sequence[str]) -> Placement:
    """A fixed mix entry's ``gpuModels`` (empty: any model), tolerating every taint."""
    everything = [Toleration(operator="Exists")]
    if not models:
        return Placement({}, None, everything)
    term = NodeSelectorTerm(
        match_expressions=[NodeSelectorRequirement(key=LABEL_GPU_MODEL, operator="In", values=list(models))]
    )
    return Placement({}, [term], everything)


def access_mask(snap: Snapshot, masks: Masks, placement: Placement) -> BoolArray:
    """The live rows a shape with this placement may use."""
    n = snap.n
    mask = np.ones(n, dtype=np.bool_)
    if placement is ANYWHERE:
        untainted = np.asarray([not ts for ts in snap.taint_sets], dtype=np.bool_)
        return mask & untainted[snap.taint_class[:n]]
    selected = masks.labels_equal(snap, placement.node_selector)
    if selected is not None:
        mask &= selected[:n]
    if placement.terms is not None:
        mask &= masks.any_term(snap, placement.terms)[:n]
    tolerated = np.asarray(
        [
            find_untolerated_taint(ts, placement.tolerations, _FILTER_EFFECTS) is None
            for ts in snap.taint_sets
        ],
        dtype=np.bool_,
    )
    mask &= tolerated[snap.taint_class[:n]]
    return mask


class Shape(msgspec.Struct, frozen=True):
    """One kind of pod: cpu (milli), memory (bytes), ``gpus`` GPUs of (core, ratio, memory, AI
    cores) each, and where it may run."""

    cpu: int
    memory: int
    gpus: int = 0
    core: int = 0
    ratio: int = 0
    gpu_memory: int = 0
    placement: Placement = ANYWHERE
    #: ``huawei.com/npu-core`` per card (an Ascend NPU is a gpu device).
    npu_core: int = 0

    @property
    def row(self) -> tuple[int, int, int, int, int, int, int]:
        """The kernel's mix row (:mod:`koordsched.plugins.gpufragmentation.kernels`)."""
        return (self.cpu, self.memory, self.gpus, self.core, self.ratio, self.gpu_memory, self.npu_core)

    @property
    def vector(self) -> npt.NDArray[np.int64]:
        """:attr:`row` as the kernels take it (one array per shape, kept; never modified)."""
        found = _VECTORS.get(self)
        if found is None:
            if len(_VECTORS) >= _MAX_REMEMBERED:
                _VECTORS.clear()
            found = _VECTORS[self] = np.asarray(self.row, dtype=np.int64)
        return found


_VECTORS: dict[Shape, npt.NDArray[np.int64]] = {}


#: requests_shape's answers by requests and placement (a pure function's memo).
_BY_REQUESTS: dict[tuple[tuple[tuple[str, int], ...], Placement], Shape] = {}
_BY_OBJECT: IdentityMemo[Shape] = IdentityMemo()


def requests_shape(requests: Mapping[str, int], placement: Placement = ANYWHERE) -> Shape:
    """The shape of a pod with these requests (cpu in milli, the rest in units). Raises
    DeviceRequestError for a device request DeviceShare refuses."""
    cpu = _amount(requests.get("cpu", 0))
    memory = _amount(requests.get("memory", 0))
    gpu = get_pod_device_requests(requests).get(_GPU_TYPE)
    if not gpu:
        return Shape(cpu, memory, placement=placement)
    per, count, _ = calc_gpu_per_instance(gpu)
    if count <= 0:
        return Shape(cpu, memory, placement=placement)
    return Shape(
        cpu,
        memory,
        min(count, _LARGEST),
        _amount(per.get(GPU_CORE, 0)),
        _amount(per.get(GPU_MEMORY_RATIO, 0)),
        _amount(per.get(GPU_MEMORY, 0)),
        placement,
        _amount(per.get(NPU_CORE, 0)),
    )


def _amount(value: int) -> int:
    """An amount the kernels can hold: negative as 0, beyond int64 as the largest they take (no
    node has that much, so the shape fits nowhere, as the pod does not)."""
    return min(max(0, value), _LARGEST)


def pod_shape(pod: PodInfo) -> Shape:
    """The pod's shape (remembered per requests dict and spec, which pods of one template share,
    and by requests and placement: nothing is kept for each of many pods). A pod whose device
    request DeviceShare refuses counts by its cpu and memory alone."""
    spec = pod.pod.spec
    known = _BY_OBJECT.get(pod.requests, spec)
    if known is not None:
        return known
    placement = pod_placement(pod.pod)
    key = (tuple(sorted(pod.requests.items())), placement)
    shape = _BY_REQUESTS.get(key)
    if shape is None:
        try:
            shape = requests_shape(pod.requests, placement)
        except DeviceRequestError:
            cpu, memory = pod.requests.get("cpu", 0), pod.requests.get("memory", 0)
            shape = Shape(_amount(cpu), _amount(memory), placement=placement)
        if len(_BY_REQUESTS) >= _MAX_REMEMBERED:
            _BY_REQUESTS.clear()
        _BY_REQUESTS[key] = shape
    return _BY_OBJECT.put(pod.requests, shape, spec)
