"""Enum checks on Koordinator's pod annotations, which koord-scheduler v1.6 does not make.

koord-scheduler decodes these annotations and compares their strings with the values it
knows, so a typo (``requiredTopologyScope: "Galaxy"``, ``preferredCPUBindPolicy: "Full"``)
silently means "no constraint": the pod runs somewhere it did not ask for. koordsched
refuses the pod instead, naming the annotation, the field and the value, worded as the
API server words an unsupported value. The plugins call these when they read a pending
pod's annotations at PreFilter (an UnschedulableAndUnresolvable status); empty strings
("" is each field's "not set") pass.

Except ``resource-spec``'s CPU bind and exclusive policies (:func:`resource_spec_problems`):
koord-scheduler reads an unknown one as "no policy" and schedules the pod, and refusing it would
strand a pod that runs under koord-scheduler after a migration; NodeNUMAResource schedules it as
koord-scheduler does and warns (a Warning event naming annotation, field and value).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from koordsched.api.field_errors import Refused, not_supported
from koordsched.api.koordinator import (
    ANNOTATION_DEVICE_ALLOCATE_HINT,
    ANNOTATION_DEVICE_JOINT_ALLOCATE,
    ANNOTATION_GPU_PARTITION_SPEC,
    ANNOTATION_NUMA_TOPOLOGY_SPEC,
    ANNOTATION_RESOURCE_SPEC,
    DeviceHint,
    DeviceJointAllocate,
    GPUPartitionSpec,
    NUMATopologySpec,
    ResourceSpec,
)

__all__ = [
    "ALLOCATE_STRATEGIES",
    "CPU_BIND_POLICIES",
    "CPU_EXCLUSIVE_POLICIES",
    "DEVICE_EXCLUSIVE_POLICIES",
    "JOINT_ALLOCATE_SCOPES",
    "NUMA_EXCLUSIVE_POLICIES",
    "NUMA_TOPOLOGY_POLICIES",
    "PARTITION_ALLOCATE_POLICIES",
    "TOPOLOGY_SCOPES",
    "AnnotationRefused",
    "check_device_hints",
    "check_gpu_partition_spec",
    "check_joint_allocate",
    "check_numa_topology_spec",
    "check_resource_spec",
    "resource_spec_problems",
]

# The values apis/extension (koordinator v1.6) declares for each field.
ALLOCATE_STRATEGIES: Final = ("ApplyForAll", "RequestsAsCount")
TOPOLOGY_SCOPES: Final = ("Device", "PCIe", "NUMANode", "Node")
DEVICE_EXCLUSIVE_POLICIES: Final = ("DeviceLevel", "PCIeLevel")
JOINT_ALLOCATE_SCOPES: Final = ("SamePCIe",)
PARTITION_ALLOCATE_POLICIES: Final = ("Restricted", "BestEffort")
CPU_BIND_POLICIES: Final = ("Default", "FullPCPUs", "SpreadByPCPUs", "ConstrainedBurst")
CPU_EXCLUSIVE_POLICIES: Final = ("None", "PCPULevel", "NUMANodeLevel")
#: ``NUMATopologyPolicy`` values a pod may ask for ("" is Koordinator's ``NUMATopologyPolicyNone``).
NUMA_TOPOLOGY_POLICIES: Final = ("BestEffort", "Restricted", "SingleNUMANode")
NUMA_EXCLUSIVE_POLICIES: Final = ("Preferred", "Required")


class AnnotationRefused(Refused):
    """A pod annotation with a value Koordinator does not define; the message names all three."""


def _enum(field: str, value: str, supported: Iterable[str]) -> str | None:
    supported = tuple(supported)
    if value and value not in supported:
        return not_supported(field, value, supported)
    return None


def _raise(annotation: str, errors: Iterable[str | None]) -> None:
    errs = [e for e in errors if e is not None]
    if errs:
        raise AnnotationRefused(f"invalid {annotation} annotation: " + "; ".join(errs))


def check_device_hints(hints: Mapping[str, DeviceHint | None]) -> None:
    """``scheduling.koordinator.sh/device-allocate-hint``: each type's strategy, scope and exclusivity."""
    errors: list[str | None] = []
    for device_type, hint in hints.items():
        if hint is None:
            continue
        errors.append(_enum(f"{device_type}.allocateStrategy", hint.allocate_strategy, ALLOCATE_STRATEGIES))
        errors.append(
            _enum(f"{device_type}.requiredTopologyScope", hint.required_topology_scope, TOPOLOGY_SCOPES)
        )
        errors.append(
            _enum(f"{device_type}.exclusivePolicy", hint.exclusive_policy, DEVICE_EXCLUSIVE_POLICIES)
        )
    _raise(ANNOTATION_DEVICE_ALLOCATE_HINT, errors)


def check_joint_allocate(joint: DeviceJointAllocate) -> None:
    """``scheduling.koordinator.sh/device-joint-allocate``: ``requiredScope``."""
    _raise(
        ANNOTATION_DEVICE_JOINT_ALLOCATE,
        [_enum("requiredScope", joint.required_scope, JOINT_ALLOCATE_SCOPES)],
    )


def check_gpu_partition_spec(spec: GPUPartitionSpec) -> None:
    """``scheduling.koordinator.sh/gpu-partition-spec``: ``allocatePolicy``."""
    _raise(
        ANNOTATION_GPU_PARTITION_SPEC,
        [_enum("allocatePolicy", spec.allocate_policy, PARTITION_ALLOCATE_POLICIES)],
    )


def check_resource_spec(spec: ResourceSpec) -> None:
    """``scheduling.koordinator.sh/resource-spec``: the CPU bind and exclusive policies."""
    _raise(ANNOTATION_RESOURCE_SPEC, resource_spec_problems(spec))


def resource_spec_problems(spec: ResourceSpec) -> list[str]:
    """The resource-spec fields whose value no Koordinator policy has, each worded as the API
    server words an unsupported value. koord-scheduler reads each as "no policy" (an unknown bind
    policy binds no CPUs, an unknown exclusive policy excludes nothing): NodeNUMAResource schedules
    such a pod as it does and warns (issue 24, item 8)."""
    return [
        e
        for e in (
            _enum("requiredCPUBindPolicy", spec.required_cpu_bind_policy, CPU_BIND_POLICIES),
            _enum("preferredCPUBindPolicy", spec.preferred_cpu_bind_policy, CPU_BIND_POLICIES),
            _enum("preferredCPUExclusivePolicy", spec.preferred_cpu_exclusive_policy, CPU_EXCLUSIVE_POLICIES),
        )
        if e is not None
    ]


def check_numa_topology_spec(spec: NUMATopologySpec) -> None:
    """``scheduling.koordinator.sh/numa-topology-spec``: the policy and its exclusivity."""
    _raise(
        ANNOTATION_NUMA_TOPOLOGY_SPEC,
        [
            _enum("numaTopologyPolicy", spec.numa_topology_policy, NUMA_TOPOLOGY_POLICIES),
            _enum("singleNUMANodeExclusive", spec.single_numa_node_exclusive, NUMA_EXCLUSIVE_POLICIES),
        ],
    )
