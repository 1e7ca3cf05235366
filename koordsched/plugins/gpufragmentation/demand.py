"""What a pod asks for, as the fragmentation measure sees it: a :class:`Shape`.

Every form of a GPU request counts alike: DeviceShare's own parsing
(:func:`koordsched.plugins.deviceshare.pod_device_request`) turns ``nvidia.com/gpu``,
``koordinator.sh/gpu`` (percent of a card), ``gpu-core`` + ``gpu-memory-ratio``,
``gpu-memory`` (bytes) and ``gpu.shared`` into a number of GPUs and a per-GPU request of
core, memory ratio and memory. A pod whose device request DeviceShare refuses is a shape
without GPUs (it will not be placed; its cpu and memory still describe the workload).

The GPU models a shape accepts come from the pod's node selector and required node
affinity on ``node.koordinator.sh/gpu-model``; requirements on other labels are not part
of the shape (the measure would otherwise need every node's labels per shape).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import msgspec

from koordsched.api.core import NodeSelectorTerm, Pod
from koordsched.api.koordinator import GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, LABEL_GPU_MODEL
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare import DeviceRequestError, calc_gpu_per_instance, get_pod_device_requests

_EXTRA_KEY: Final = "gpufragmentation.shape"
#: requests_shape's answers by requests and model rule (a pure function's memo).
_BY_REQUESTS: dict[tuple[tuple[tuple[str, int], ...], ModelRule], Shape] = {}
_MAX_REMEMBERED: Final = 8192

#: Per-term model requirements: ((operator, values), ...) for the gpu-model key, any term
#: accepting is enough; () as a whole: every model.
ModelRule = tuple[tuple[tuple[str, tuple[str, ...]], ...], ...]
_GPU_TYPE: Final = "gpu"


class Shape(msgspec.Struct, frozen=True, array_like=True):
    """One kind of pod: cpu (milli), memory (bytes), ``gpus`` GPUs of (core, ratio, memory) each,
    and the GPU models it accepts."""

    cpu: int
    memory: int
    gpus: int = 0
    core: int = 0
    ratio: int = 0
    gpu_memory: int = 0
    models: ModelRule = ()

    def accepts(self, model: str) -> bool:
        """Whether a node labelled with GPU model ``model`` ("" for none) may run the shape."""
        if not self.models:
            return True
        return any(all(_holds(op, values, model) for op, values in term) for term in self.models)

    @property
    def row(self) -> tuple[int, int, int, int, int, int]:
        """The kernel's mix row (:mod:`koordsched.plugins.gpufragmentation.kernels`)."""
        return (self.cpu, self.memory, self.gpus, self.core, self.ratio, self.gpu_memory)


def _holds(op: str, values: tuple[str, ...], model: str) -> bool:
    if op == "In":
        return model in values
    if op == "NotIn":
        return model not in values
    if op == "Exists":
        return model != ""
    if op == "DoesNotExist":
        return model == ""
    return True  # Gt/Lt on a model name: NodeAffinity decides; the shape does not narrow


def model_rule(pod: Pod) -> ModelRule:
    """The pod's GPU-model constraints (node selector and required node affinity)."""
    spec = pod.spec
    fixed: tuple[tuple[str, tuple[str, ...]], ...] = ()
    wanted = spec.node_selector.get(LABEL_GPU_MODEL)
    if wanted is not None:
        fixed = (("In", (wanted,)),)
    affinity = spec.affinity.node_affinity if spec.affinity is not None else None
    required = affinity.required_during_scheduling_ignored_during_execution if affinity is not None else None
    terms: Sequence[NodeSelectorTerm] = required.node_selector_terms if required is not None else ()
    rules = [r for r in (_term_rule(t) for t in terms) if r is not None]
    if not rules:
        return (fixed,) if fixed else ()
    if any(not r for r in rules) and not fixed:
        return ()  # one term accepts any model
    return tuple(fixed + r for r in rules)


def _term_rule(term: NodeSelectorTerm) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
    """A term's gpu-model requirements; None for a term that matches nothing (no requirements)."""
    if not term.match_expressions and not term.match_fields:
        return None
    return tuple((r.operator, tuple(r.values)) for r in term.match_expressions if r.key == LABEL_GPU_MODEL)


def models_rule(models: Sequence[str]) -> ModelRule:
    """The rule of a fixed mix entry's ``gpuModels`` (empty: any model)."""
    return ((("In", tuple(models)),),) if models else ()


def requests_shape(requests: Mapping[str, int], models: ModelRule = ()) -> Shape:
    """The shape of a pod with these requests (cpu in milli, the rest in units). Raises
    DeviceRequestError for a device request DeviceShare refuses."""
    cpu = max(0, requests.get("cpu", 0))
    memory = max(0, requests.get("memory", 0))
    gpu = get_pod_device_requests(requests).get(_GPU_TYPE)
    if not gpu:
        return Shape(cpu, memory)
    per, count, _ = calc_gpu_per_instance(gpu)
    if count <= 0:
        return Shape(cpu, memory)
    return Shape(
        cpu,
        memory,
        count,
        max(0, per.get(GPU_CORE, 0)),
        max(0, per.get(GPU_MEMORY_RATIO, 0)),
        max(0, per.get(GPU_MEMORY, 0)),
        models,
    )


def pod_shape(pod: PodInfo) -> Shape:
    """The pod's shape, kept on the PodInfo (its spec does not change while it is known). A pod
    whose device request DeviceShare refuses counts by its cpu and memory alone."""
    cached: Shape | None = pod.extra.get(_EXTRA_KEY)
    if cached is not None:
        return cached
    rule = model_rule(pod.pod)
    key = (tuple(sorted(pod.requests.items())), rule)
    shape = _BY_REQUESTS.get(key)
    if shape is None:
        try:
            shape = requests_shape(pod.requests, rule)
        except DeviceRequestError:
            shape = Shape(max(0, pod.requests.get("cpu", 0)), max(0, pod.requests.get("memory", 0)))
        if len(_BY_REQUESTS) >= _MAX_REMEMBERED:
            _BY_REQUESTS.clear()
        _BY_REQUESTS[key] = shape
    pod.extra[_EXTRA_KEY] = shape
    return shape
