"""What a pod asks of DeviceShare: device requests, hints, joint allocation and GPU requirements.

Everything here depends on the pod alone, so it is worked out once per PodInfo (cached in
``PodInfo.extra``) and read by every extension point and every node. A problem with the
pod itself (an invalid combination of GPU resources, a malformed annotation, a bad
selector) becomes an UnschedulableAndUnresolvable Status with Koordinator's exact text
(Koordinator v1.6's ``apis/extension`` device-share rules); it is reported on that pod
and never raised out of the plugin.

Go iterates maps in random order where it checks device types; here the order is always
:data:`~koordsched.plugins.deviceshare.demand.TABLE`'s (gpu, rdma, fpga), one of the orders Go may take.
The rules that depend on the device type come from that table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

import msgspec

import koordsched.plugins.deviceshare.demand as demand
from koordsched.api.annotations import decode_annotation
from koordsched.api.core import LabelSelector
from koordsched.api.koordinator import (
    ANNOTATION_DEVICE_ALLOCATE_HINT,
    ANNOTATION_DEVICE_JOINT_ALLOCATE,
    ANNOTATION_GPU_PARTITION_SPEC,
    ANNOTATION_RESERVATION_AFFINITY,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_SHARED,
    DeviceHint,
    DeviceJointAllocate,
    GPUPartitionSpec,
)
from koordsched.api.koordinator_checks import (
    AnnotationRefused,
    check_device_hints,
    check_gpu_partition_spec,
    check_joint_allocate,
)
from koordsched.api.quantity import DECIMAL_SI, QuantityError, format_quantity, parse_quantity
from koordsched.api.selectors import SelectorError, validate_label_selector
from koordsched.framework.status import Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare.demand import (
    CHECK_ALWAYS,
    CHECK_PERCENTAGES,
    CHECK_SHARED,
    RULE_GPU,
    Combination,
)

log = logging.getLogger(__name__)

#: ``requiredTopologyScope`` -> level; an unknown scope has level 0, as a Go map lookup gives.
TOPOLOGY_SCOPE_LEVEL: Final[Mapping[str, int]] = {"Device": 4, "PCIe": 3, "NUMANode": 2, "Node": 1}

APPLY_FOR_ALL: Final = "ApplyForAll"
REQUESTS_AS_COUNT: Final = "RequestsAsCount"
EXCLUSIVE_DEVICE_LEVEL: Final = "DeviceLevel"
EXCLUSIVE_PCIE_LEVEL: Final = "PCIeLevel"
SAME_PCIE: Final = "SamePCIe"
PARTITION_RESTRICTED: Final = "Restricted"
#: The device count of an ApplyForAll request: every device of the type (that the selector matches).
EVERY_DEVICE: Final = -2

_EXTRA_KEY: Final = "DeviceShare/request"
_SIGNATURE_KEY: Final = "DeviceShare/signature"
#: The annotations :func:`parse_pod_device_request` reads (reservation affinity: only its presence).
_SIGNATURE_ANNOTATIONS: Final = (
    ANNOTATION_DEVICE_ALLOCATE_HINT,
    ANNOTATION_DEVICE_JOINT_ALLOCATE,
    ANNOTATION_GPU_PARTITION_SPEC,
)


class DeviceRequestError(ValueError):
    """A pod's device requests Koordinator refuses; the message is the exact upstream text."""


def percentage_ok(value: int) -> bool:
    """``ValidatePercentageResource``: at most one device's worth, or whole devices."""
    return value <= 100 or value % 100 == 0


def _go_resource_names(request: Mapping[str, int]) -> str:
    """``fmt.Sprintf("%v", quotav1.ResourceNames(...))``; Go's order is random, sorted here."""
    return "[" + " ".join(sorted(request)) + "]"


def _shared_ok(request: Mapping[str, int]) -> bool:
    shared = request[GPU_SHARED]
    for name in (GPU_CORE, GPU_MEMORY_RATIO):
        value = request.get(name)
        if value is not None and (value % shared != 0 or value // shared > 100):
            return False
    return True


def _percentages_ok(request: Mapping[str, int]) -> bool:
    return all(percentage_ok(request[n]) for n in (GPU_CORE, GPU_MEMORY_RATIO) if n in request)


def _always(request: Mapping[str, int]) -> bool:
    return True


#: The combination checks the demand table names.
_CHECKS: Final[Mapping[str, Callable[[Mapping[str, int]], bool]]] = {
    CHECK_ALWAYS: _always,
    CHECK_PERCENTAGES: _percentages_ok,
    CHECK_SHARED: _shared_ok,
}


def validate_device_request(device_type: str, request: Mapping[str, int]) -> Combination:
    """``ValidateDeviceRequest``: the request's combination (see the demand table), or DeviceRequestError."""
    if not request:
        raise DeviceRequestError("pod request should not be empty")
    entry = demand.TABLE.by_type[device_type]
    for name, value in request.items():
        if name in entry.percentage_checked and not percentage_ok(value):
            raise DeviceRequestError(f"invalid resource unit {name}: {format_quantity(value, DECIMAL_SI)}")
    combination = demand.TABLE.combinations[device_type].get(frozenset(request))
    if combination is None or not _CHECKS[combination.check](request):
        raise DeviceRequestError(f"invalid resource device requests: {_go_resource_names(request)}")
    return combination


def convert_device_request(request: Mapping[str, int], combination: Combination) -> dict[str, int]:
    """``ConvertDeviceRequest``: whole-GPU names and ``koordinator.sh/gpu`` become core + ratio."""
    if not combination.convert:
        return dict(request)
    return {c.target: c.factor * request[c.source] for c in combination.convert}


def get_pod_device_requests(pod_requests: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """``GetPodDeviceRequests``: device type -> converted request, for the types the pod asks for."""
    out: dict[str, dict[str, int]] = {}
    table = demand.TABLE
    if table.all_names.isdisjoint(pod_requests):
        return out  # most pods ask for no device: one set operation instead of a scan per type
    for entry in table.demands:
        masked = {n: pod_requests[n] for n in entry.resources if pod_requests.get(n, 0) != 0}
        if not masked:
            continue
        combination = validate_device_request(entry.device_type, masked)
        out[entry.device_type] = convert_device_request(masked, combination)
    return out


def calc_gpu_per_instance(request: Mapping[str, int]) -> tuple[dict[str, int], int, bool]:
    """``calcDesiredRequestsAndCountForGPU``: (request per GPU, number of GPUs, shared).

    The per-GPU request carries core and ratio, or core and memory; ``gpu.shared`` only
    sets the count. Integer division truncates, as Go's does on these non-negative values.
    """
    desired = 1
    shared = request.get(GPU_SHARED, 0)
    ratio = request.get(GPU_MEMORY_RATIO)
    if shared > 0:
        desired = shared
    elif ratio is not None and ratio > 100 and ratio % 100 == 0:
        desired = ratio // 100
    per_gpu: dict[str, int] = {}
    gpu_shared = False
    core = request.get(GPU_CORE)
    if core is not None:
        per_gpu[GPU_CORE] = core // desired
    if ratio is not None:
        per_ratio = ratio // desired
        gpu_shared = per_ratio < 100
        per_gpu[GPU_MEMORY_RATIO] = per_ratio
    elif GPU_MEMORY in request:
        gpu_shared = True
        per_gpu[GPU_MEMORY] = request[GPU_MEMORY] // desired
    return per_gpu, desired, gpu_shared


@dataclass(frozen=True, slots=True)
class GPURequirements:
    """The GPU part of the PreFilter state (``GPURequirements`` upstream)."""

    number_of_gpus: int
    requests_per_gpu: dict[str, int]
    gpu_shared: bool
    honor_partition: bool
    restricted_partition: bool
    ring_bus_bandwidth: Fraction | None
    required_scope: str
    required_scope_level: int


@dataclass(frozen=True, slots=True)
class TypeHint:
    """A device hint with its selectors already checked; a nil selector means "no selector"."""

    hint: DeviceHint

    @property
    def selector(self) -> LabelSelector | None:
        return self.hint.selector

    @property
    def vf_selector(self) -> LabelSelector | None:
        return self.hint.vf_selector

    @property
    def must_allocate_vf(self) -> bool:
        """A ``vfSelector``, even ``{}``, means each chosen device must give a VF."""
        return self.hint.vf_selector is not None


@dataclass(frozen=True, slots=True)
class PodDeviceRequest:
    """Everything PreFilter derives from the pod (the upstream ``preFilterState`` minus node state)."""

    #: Device type -> converted request (section 1.2), only for requested types, in the demand table's order.
    requests: dict[str, dict[str, int]]
    hints: dict[str, TypeHint] = field(default_factory=dict)
    #: Joint allocation with its ``deviceTypes`` already filtered (ApplyForAll and unrequested types dropped).
    joint: DeviceJointAllocate | None = None
    gpu: GPURequirements | None = None
    has_reservation_affinity: bool = False

    @property
    def primary(self) -> str:
        """The joint allocation's primary device type, or "" without one."""
        if self.joint is None or not self.joint.device_types:
            return ""
        return self.joint.device_types[0]

    @property
    def has_selectors(self) -> bool:
        return any(h.selector is not None for h in self.hints.values())

    @property
    def narrows_candidates(self) -> bool:
        """Some hint restricts the devices an allocation may use (selector or PCIe exclusivity)."""
        return self.has_selectors or any(
            h.hint.exclusive_policy == EXCLUSIVE_PCIE_LEVEL
            for t, h in self.hints.items()
            if t in self.requests
        )

    def hint(self, device_type: str) -> TypeHint | None:
        return self.hints.get(device_type)

    def per_instance(self, device_type: str) -> tuple[dict[str, int], int]:
        """The request per device and how many devices (``Prepare``'s ``calcDesiredRequestsAndCount``),
        by the type's rule; the count is :data:`EVERY_DEVICE` for ApplyForAll, which the node decides.
        A requested type only; the result is a new dict each call.
        """
        req = self.requests[device_type]
        if demand.TABLE.by_type[device_type].rule == RULE_GPU:
            gpu = self.gpu
            assert gpu is not None  # set whenever the GPU-rule type is requested
            return dict(gpu.requests_per_gpu), gpu.number_of_gpus
        name = demand.TABLE.by_type[device_type].unit
        value = req.get(name, 0)
        hint = self.hint(device_type)
        strategy = hint.hint.allocate_strategy if hint is not None else ""
        if value > 100 and value % 100 == 0:
            return {name: 100}, value // 100
        if strategy == APPLY_FOR_ALL:
            return dict(req), EVERY_DEVICE
        if strategy == REQUESTS_AS_COUNT:
            assert hint is not None
            return {name: 100 if hint.hint.exclusive_policy == EXCLUSIVE_DEVICE_LEVEL else 1}, value
        return dict(req), 1


def _parse_hints(annotations: Mapping[str, str]) -> dict[str, TypeHint]:
    raw = annotations.get(ANNOTATION_DEVICE_ALLOCATE_HINT)
    if raw is None:
        return {}
    try:
        decoded = decode_annotation(raw, dict[str, DeviceHint | None])
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise DeviceRequestError(f"invalid DeviceAllocateHint annotation, err: {err}") from None
    try:
        check_device_hints(decoded)
    except AnnotationRefused as err:
        raise DeviceRequestError(str(err)) from None
    hints: dict[str, TypeHint] = {}
    for device_type, hint in decoded.items():
        if hint is None:
            continue
        for what, selector in (("Selector", hint.selector), ("VFSelector", hint.vf_selector)):
            if selector is None:
                continue
            try:
                validate_label_selector(selector)
            except SelectorError as err:
                raise DeviceRequestError(
                    f"invalid {what} of DeviceHint, deviceType: {device_type}, err: {err}"
                ) from None
        hints[device_type] = TypeHint(hint)
    return hints


def _parse_joint(
    annotations: Mapping[str, str], hints: Mapping[str, TypeHint], requests: Mapping[str, dict[str, int]]
) -> DeviceJointAllocate | None:
    raw = annotations.get(ANNOTATION_DEVICE_JOINT_ALLOCATE)
    if raw is None:
        return None
    try:
        joint = decode_annotation(raw, DeviceJointAllocate)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise DeviceRequestError(f"invalid DeviceJointAllocate annotation, err: {err}") from None
    try:
        check_joint_allocate(joint)
    except AnnotationRefused as err:
        raise DeviceRequestError(str(err)) from None
    kept = []
    for device_type in joint.device_types:
        hint = hints.get(device_type)
        if hint is not None and hint.hint.allocate_strategy == APPLY_FOR_ALL:
            continue
        if requests.get(device_type):
            kept.append(device_type)
    return DeviceJointAllocate(device_types=kept, required_scope=joint.required_scope)


def _parse_partition_spec(annotations: Mapping[str, str]) -> tuple[GPUPartitionSpec | None, Fraction | None]:
    raw = annotations.get(ANNOTATION_GPU_PARTITION_SPEC)
    if raw is None:
        return None, None
    try:
        spec = decode_annotation(raw, GPUPartitionSpec)
        bandwidth = None if spec.ring_bus_bandwidth is None else parse_quantity(spec.ring_bus_bandwidth)
    except (msgspec.DecodeError, msgspec.ValidationError, QuantityError) as err:
        raise DeviceRequestError(f"invalid GPUPartitionSpec annotation, err: {err}") from None
    try:
        check_gpu_partition_spec(spec)
    except AnnotationRefused as err:
        raise DeviceRequestError(str(err)) from None
    return spec, bandwidth


def _gpu_requirements(
    request: Mapping[str, int], annotations: Mapping[str, str], hints: Mapping[str, TypeHint]
) -> GPURequirements:
    per_gpu, count, shared = calc_gpu_per_instance(request)
    spec, bandwidth = _parse_partition_spec(annotations)
    hint = hints.get(demand.TABLE.gpu_type)
    scope = hint.hint.required_topology_scope if hint is not None else ""
    return GPURequirements(
        number_of_gpus=count,
        requests_per_gpu=per_gpu,
        gpu_shared=shared,
        honor_partition=spec is not None,
        restricted_partition=spec is not None and spec.allocate_policy == PARTITION_RESTRICTED,
        ring_bus_bandwidth=bandwidth,
        required_scope=scope,
        required_scope_level=TOPOLOGY_SCOPE_LEVEL.get(scope, 0),
    )


def parse_pod_device_request(
    pod_requests: Mapping[str, int], annotations: Mapping[str, str]
) -> PodDeviceRequest | None:
    """PreFilter's pod-side work; None when the pod requests no device. Raises DeviceRequestError."""
    requests = get_pod_device_requests(pod_requests)
    if not requests:
        return None
    hints = _parse_hints(annotations)
    joint = _parse_joint(annotations, hints, requests)
    gpu_request = requests.get(demand.TABLE.gpu_type)
    gpu = _gpu_requirements(gpu_request, annotations, hints) if gpu_request is not None else None
    return PodDeviceRequest(
        requests=requests,
        hints=hints,
        joint=joint,
        gpu=gpu,
        has_reservation_affinity=ANNOTATION_RESERVATION_AFFINITY in annotations,
    )


#: Parsed requests by device signature: pods of one workload share theirs (bounded).
_BY_SIGNATURE: dict[tuple[object, ...], PodDeviceRequest | Status | None] = {}
_MISSING: Final = object()


def pod_device_request(pod: PodInfo) -> PodDeviceRequest | Status | None:
    """The pod's device request, an UAU Status explaining why it is invalid, or None (no device).

    Cached on the PodInfo (its spec and annotations do not change while it is queued: an
    update builds a new PodInfo) and by :func:`device_signature`, since the request is a
    function of what the signature holds. A request is never modified once made.
    """
    if demand.TABLE.all_names.isdisjoint(pod.requests):
        return None  # most pods: no device, whatever the annotations say (nothing kept per pod)
    extra = pod.extra
    if _EXTRA_KEY in extra:
        cached: PodDeviceRequest | Status | None = extra[_EXTRA_KEY]
        return cached
    signature = device_signature(pod)
    known = _BY_SIGNATURE.get(signature, _MISSING)
    result: PodDeviceRequest | Status | None
    if known is not _MISSING:
        result = known  # type: ignore[assignment]
        if isinstance(result, Status):
            log.info("pod %s: device request rejected: %s", pod.key, result.message())
    else:
        try:
            result = parse_pod_device_request(pod.requests, pod.pod.metadata.annotations)
        except DeviceRequestError as err:
            log.info("pod %s: device request rejected: %s", pod.key, err)
            result = Status.unresolvable(str(err))
        if len(_BY_SIGNATURE) >= 4096:
            _BY_SIGNATURE.clear()
        _BY_SIGNATURE[signature] = result
    extra[_EXTRA_KEY] = result
    return result


def device_signature(pod: PodInfo) -> tuple[object, ...]:
    """Everything :func:`parse_pod_device_request` reads from the pod: pods with equal signatures
    make equal requests, so a result per node computed for one holds for the other (cached)."""
    cached: tuple[object, ...] | None = pod.extra.get(_SIGNATURE_KEY)
    if cached is not None:
        return cached
    annotations = pod.pod.metadata.annotations
    names = demand.TABLE.all_names
    signature = (
        tuple(sorted((n, v) for n, v in pod.requests.items() if n in names)),
        tuple(annotations.get(a) for a in _SIGNATURE_ANNOTATIONS),
        ANNOTATION_RESERVATION_AFFINITY in annotations,
    )
    pod.extra[_SIGNATURE_KEY] = signature
    return signature
