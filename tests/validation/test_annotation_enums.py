"""Koordinator annotations with a value Koordinator does not define: koord-scheduler reads such a
value as "no constraint"; koordsched refuses the pod at PreFilter (UnschedulableAndUnresolvable),
naming the annotation, the field and the value. Other pods in the same file are unaffected."""

from __future__ import annotations

import pytest

from koordsched.api.koordinator import (
    ANNOTATION_DEVICE_ALLOCATE_HINT,
    ANNOTATION_DEVICE_JOINT_ALLOCATE,
    ANNOTATION_GPU_PARTITION_SPEC,
    ANNOTATION_NUMA_TOPOLOGY_SPEC,
    ANNOTATION_RESOURCE_SPEC,
)
from koordsched.backends.sim.runner import simulate
from tests.scenario.helpers import WriteYaml
from tests.validation.manifests import cpu_node, device, dump, gpu_node, gpu_pod, js, nrt, pod

LSR = {"koordinator.sh/qosClass": "LSR"}

#: A PreFilter rejection is unresolvable on every node: DefaultPreemption says it cannot help.
PREEMPTION_NOT_HELPFUL = " preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.."


def _supported(*values: str) -> str:
    return "supported values: " + ", ".join(f'"{v}"' for v in values)


GPU_CASES = [
    (
        {ANNOTATION_DEVICE_ALLOCATE_HINT: js({"gpu": {"requiredTopologyScope": "Galaxy"}})},
        f"invalid {ANNOTATION_DEVICE_ALLOCATE_HINT} annotation: gpu.requiredTopologyScope: "
        f'Unsupported value: "Galaxy": {_supported("Device", "PCIe", "NUMANode", "Node")}',
    ),
    (
        {ANNOTATION_DEVICE_ALLOCATE_HINT: js({"gpu": {"allocateStrategy": "Sometimes"}})},
        f"invalid {ANNOTATION_DEVICE_ALLOCATE_HINT} annotation: gpu.allocateStrategy: "
        f'Unsupported value: "Sometimes": {_supported("ApplyForAll", "RequestsAsCount")}',
    ),
    (
        {ANNOTATION_DEVICE_ALLOCATE_HINT: js({"rdma": {"exclusivePolicy": "NodeLevel"}})},
        f"invalid {ANNOTATION_DEVICE_ALLOCATE_HINT} annotation: rdma.exclusivePolicy: "
        f'Unsupported value: "NodeLevel": {_supported("DeviceLevel", "PCIeLevel")}',
    ),
    (
        {ANNOTATION_GPU_PARTITION_SPEC: js({"allocatePolicy": "Strict"})},
        f'invalid {ANNOTATION_GPU_PARTITION_SPEC} annotation: allocatePolicy: Unsupported value: "Strict": '
        + _supported("Restricted", "BestEffort"),
    ),
    (
        {ANNOTATION_DEVICE_JOINT_ALLOCATE: js({"deviceTypes": ["gpu"], "requiredScope": "SameNUMA"})},
        f"invalid {ANNOTATION_DEVICE_JOINT_ALLOCATE} annotation: requiredScope: "
        f'Unsupported value: "SameNUMA": {_supported("SamePCIe")}',
    ),
]

BIND = _supported("Default", "FullPCPUs", "SpreadByPCPUs", "ConstrainedBurst")
#: Issue 24, item 8: koord-scheduler reads these as "no policy" and schedules the pod; so does
#: koordsched, with a Warning event naming annotation, field and value.
RESOURCE_SPEC_CASES = [
    (
        {ANNOTATION_RESOURCE_SPEC: js({"requiredCPUBindPolicy": "Full"})},
        f'requiredCPUBindPolicy: Unsupported value: "Full": {BIND}',
    ),
    (
        {ANNOTATION_RESOURCE_SPEC: js({"preferredCPUBindPolicy": "test"})},
        f'preferredCPUBindPolicy: Unsupported value: "test": {BIND}',
    ),
    (
        {
            ANNOTATION_RESOURCE_SPEC: js(
                {"preferredCPUBindPolicy": "FullPCPUs", "preferredCPUExclusivePolicy": "CoreLevel"}
            )
        },
        'preferredCPUExclusivePolicy: Unsupported value: "CoreLevel": '
        + _supported("None", "PCPULevel", "NUMANodeLevel"),
    ),
]
CPU_CASES = [
    (
        {ANNOTATION_NUMA_TOPOLOGY_SPEC: js({"numaTopologyPolicy": "Galaxy"})},
        f"invalid {ANNOTATION_NUMA_TOPOLOGY_SPEC} annotation: numaTopologyPolicy: "
        f'Unsupported value: "Galaxy": {_supported("BestEffort", "Restricted", "SingleNUMANode")}',
    ),
    (
        {
            ANNOTATION_NUMA_TOPOLOGY_SPEC: js(
                {"numaTopologyPolicy": "SingleNUMANode", "singleNUMANodeExclusive": "No"}
            )
        },
        f"invalid {ANNOTATION_NUMA_TOPOLOGY_SPEC} annotation: singleNUMANodeExclusive: "
        f'Unsupported value: "No": {_supported("Preferred", "Required")}',
    ),
]


@pytest.mark.parametrize(("annotations", "expected"), GPU_CASES)
def test_device_annotation_enum_refused(
    write_yaml: WriteYaml, annotations: dict[str, str], expected: str
) -> None:
    path = write_yaml(
        dump(gpu_node(), device(), gpu_pod("bad", annotations), gpu_pod("good"), gpu_pod("good-too"))
    )
    result = simulate([path])
    bad = result.pod("default/bad")
    assert bad.status == "Unschedulable"
    assert bad.message == f"0/1 nodes are available: {expected}.{PREEMPTION_NOT_HELPFUL}"
    assert result.pod("default/good").node == "gpu-0"
    assert result.pod("default/good-too").node == "gpu-0"


@pytest.mark.parametrize(("annotations", "expected"), CPU_CASES)
def test_numa_annotation_enum_refused(
    write_yaml: WriteYaml, annotations: dict[str, str], expected: str
) -> None:
    path = write_yaml(
        dump(
            cpu_node(),
            nrt(),
            pod("bad", {"cpu": "2"}, annotations=annotations, labels=LSR),
            pod("good", {"cpu": "2"}, labels=LSR),
        )
    )
    result = simulate([path])
    bad = result.pod("default/bad")
    assert bad.status == "Unschedulable"
    assert bad.message == f"0/1 nodes are available: {expected}.{PREEMPTION_NOT_HELPFUL}"
    assert result.pod("default/good").node == "cpu-0"


@pytest.mark.parametrize(("annotations", "problem"), RESOURCE_SPEC_CASES)
def test_resource_spec_value_koordinator_reads_as_no_policy_schedules_with_a_warning(
    write_yaml: WriteYaml, annotations: dict[str, str], problem: str
) -> None:
    path = write_yaml(
        dump(
            cpu_node(),
            nrt(),
            pod("odd", {"cpu": "2"}, annotations=annotations, labels=LSR),
            pod("good", {"cpu": "2"}, labels=LSR),
        )
    )
    result = simulate([path])
    assert result.pod("default/odd").node == "cpu-0"
    assert result.pod("default/good").node == "cpu-0"
    note = (
        f"annotation {ANNOTATION_RESOURCE_SPEC}: {problem}; scheduled as koord-scheduler reads it: no policy"
    )
    warned = [e for e in result.port.events_for("default/odd") if e.type == "Warning"]
    assert [(e.reason, e.message) for e in warned] == [("AnnotationValueIgnored", note)]
    assert f"default/odd: {note}" in result.warnings


@pytest.mark.parametrize("annotation", [ANNOTATION_RESOURCE_SPEC, ANNOTATION_NUMA_TOPOLOGY_SPEC])
def test_empty_numa_annotations_are_unreadable_as_in_koordinator(
    write_yaml: WriteYaml, annotation: str
) -> None:
    """An empty string is not "absent": Go's json.Unmarshal refuses it, so koord-scheduler fails PreFilter."""
    path = write_yaml(dump(cpu_node(), pod("bad", {"cpu": "2"}, annotations={annotation: ""}), pod("good")))
    result = simulate([path])
    bad = result.pod("default/bad")
    assert bad.status == "Unschedulable"
    assert "unexpected end of JSON input" in bad.message
    assert result.pod("default/good").node == "cpu-0"


def test_valid_values_still_schedule(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        dump(
            gpu_node(),
            device(),
            cpu_node(),
            nrt(),
            gpu_pod(
                "hinted", {ANNOTATION_DEVICE_ALLOCATE_HINT: js({"gpu": {"requiredTopologyScope": "PCIe"}})}
            ),
            pod(
                "bound-cpus",
                {"cpu": "2"},
                labels=LSR,
                annotations={ANNOTATION_RESOURCE_SPEC: js({"preferredCPUBindPolicy": "ConstrainedBurst"})},
            ),
        )
    )
    result = simulate([path])
    assert result.pod("default/hinted").node == "gpu-0"
    assert result.pod("default/bound-cpus").status == "Scheduled"
