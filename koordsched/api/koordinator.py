"""Koordinator's CRDs and annotation payloads that the device and NUMA plugins read and write.

Field names follow Koordinator v1.6's JSON exactly (the Go types of koordinator-sh/koordinator
v1.6, ``apis/scheduling/v1alpha1`` and ``apis/extension``). Annotation payloads are Structs
too, so a malformed annotation is a decode error naming the field, reported on that pod or
node only.
"""

from __future__ import annotations

import msgspec

from koordsched.api.core import LabelSelector, ObjectMeta, Quantity, ResourceList

# --- resource names (spec 1.1) -----------------------------------------------------------------

GPU = "koordinator.sh/gpu"
GPU_CORE = "koordinator.sh/gpu-core"
GPU_MEMORY = "koordinator.sh/gpu-memory"
GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
GPU_SHARED = "koordinator.sh/gpu.shared"
RDMA = "koordinator.sh/rdma"
FPGA = "koordinator.sh/fpga"
NVIDIA_GPU = "nvidia.com/gpu"
#: Ascend NPU resources (Koordinator v1.7): AI cores, AI CPUs, DVPP percentage (100 per card).
NPU_CORE = "huawei.com/npu-core"
NPU_CPU = "huawei.com/npu-cpu"
NPU_DVPP = "huawei.com/npu-dvpp"
AMD_GPU = "amd.com/gpu"
HYGON_DCU = "dcu.com/gpu"
BATCH_CPU = "kubernetes.io/batch-cpu"
BATCH_MEMORY = "kubernetes.io/batch-memory"
MID_CPU = "kubernetes.io/mid-cpu"
MID_MEMORY = "kubernetes.io/mid-memory"

#: Device type strings (keys of device-allocated, hints, Device.spec.devices[].type).
DEVICE_GPU = "gpu"
DEVICE_RDMA = "rdma"
DEVICE_FPGA = "fpga"

# --- annotation and label keys (spec 2) --------------------------------------------------------

ANNOTATION_DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
ANNOTATION_DEVICE_ALLOCATE_HINT = "scheduling.koordinator.sh/device-allocate-hint"
ANNOTATION_DEVICE_JOINT_ALLOCATE = "scheduling.koordinator.sh/device-joint-allocate"
ANNOTATION_GPU_PARTITION_SPEC = "scheduling.koordinator.sh/gpu-partition-spec"
ANNOTATION_GPU_PARTITIONS = "scheduling.koordinator.sh/gpu-partitions"
ANNOTATION_RESOURCE_SPEC = "scheduling.koordinator.sh/resource-spec"
ANNOTATION_RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
ANNOTATION_NUMA_TOPOLOGY_SPEC = "scheduling.koordinator.sh/numa-topology-spec"
ANNOTATION_RESERVATION_AFFINITY = "scheduling.koordinator.sh/reservation-affinity"
LABEL_GPU_ISOLATION_PROVIDER = "koordinator.sh/gpu-isolation-provider"
LABEL_GPU_MODEL = "node.koordinator.sh/gpu-model"
LABEL_GPU_VENDOR = "node.koordinator.sh/gpu-vendor"
#: The scheduler feature gate (Koordinator v1.7, Alpha, off) for the vendor device-plugin annotations.
FEATURE_DEVICE_PLUGIN_ADAPTION = "DevicePluginAdaption"
LABEL_GPU_DRIVER_VERSION = "node.koordinator.sh/gpu-driver-version"
LABEL_GPU_PARTITION_POLICY = "node.koordinator.sh/gpu-partition-policy"
LABEL_SECONDARY_DEVICE_WELL_PLANNED = "node.koordinator.sh/secondary-device-well-planned"
LABEL_NUMA_TOPOLOGY_POLICY = "node.koordinator.sh/numa-topology-policy"
LABEL_CPU_BIND_POLICY = "node.koordinator.sh/cpu-bind-policy"
LABEL_NUMA_ALLOCATE_STRATEGY = "node.koordinator.sh/numa-allocate-strategy"
ANNOTATION_RESOURCE_AMPLIFICATION_RATIO = "node.koordinator.sh/resource-amplification-ratio"
ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
ANNOTATION_CPU_TOPOLOGY = "node.koordinator.sh/cpu-topology"
ANNOTATION_POD_CPU_ALLOCS = "node.koordinator.sh/pod-cpu-allocs"
ANNOTATION_KUBELET_CPU_MANAGER_POLICY = "kubelet.koordinator.sh/cpu-manager-policy"
ANNOTATION_SYSTEM_QOS_RESOURCE = "node.koordinator.sh/system-qos-resource"
LABEL_QOS_CLASS = "koordinator.sh/qosClass"
LABEL_PRIORITY_CLASS = "koordinator.sh/priority-class"
LABEL_PRIORITY = "koordinator.sh/priority"


class _Base(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    pass


# --- Device (scheduling.koordinator.sh/v1alpha1, cluster-scoped, name = node name) -------------


class DeviceTopology(_Base):
    socket_id: int = msgspec.field(default=0, name="socketID")
    #: NUMA node; -1 means unknown.
    node_id: int = msgspec.field(default=0, name="nodeID")
    #: PCIe switch id.
    pcie_id: str = msgspec.field(default="", name="pcieID")
    bus_id: str = msgspec.field(default="", name="busID")


class VirtualFunction(_Base):
    minor: int = 0
    bus_id: str = msgspec.field(default="", name="busID")


class VirtualFunctionGroup(_Base):
    labels: dict[str, str] = {}
    vfs: list[VirtualFunction] = []


class DeviceInfo(_Base):
    type: str = ""
    labels: dict[str, str] = {}
    #: UUID (GPU) or PCI address (RDMA).
    id: str = msgspec.field(default="", name="id")
    minor: int | None = None
    module_id: int | None = msgspec.field(default=None, name="moduleID")
    health: bool = False
    resources: ResourceList = {}
    topology: DeviceTopology | None = None
    vf_groups: list[VirtualFunctionGroup] = []


class DeviceSpec(_Base):
    devices: list[DeviceInfo] = []


class DeviceAllocationItem(_Base):
    name: str = ""
    namespace: str = ""
    uuid: str = ""
    minors: list[int] = []


class DeviceAllocation(_Base):
    type: str = ""
    entries: list[DeviceAllocationItem] = []


class DeviceStatus(_Base):
    allocations: list[DeviceAllocation] = []


class Device(_Base):
    api_version: str = "scheduling.koordinator.sh/v1alpha1"
    kind: str = "Device"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: DeviceSpec = msgspec.field(default_factory=DeviceSpec)
    status: DeviceStatus = msgspec.field(default_factory=DeviceStatus)


# --- NodeResourceTopology (topology.node.k8s.io/v1alpha1, cluster-scoped, name = node name) ----


class ResourceInfo(_Base):
    name: str
    capacity: Quantity = 0
    allocatable: Quantity = 0
    available: Quantity = 0


class CostInfo(_Base):
    name: str = ""
    value: int = 0


class AttributeInfo(_Base):
    name: str = ""
    value: str = ""


class Zone(_Base):
    name: str
    type: str = ""
    parent: str = ""
    costs: list[CostInfo] = []
    attributes: list[AttributeInfo] = []
    resources: list[ResourceInfo] = []


class NodeResourceTopology(_Base):
    api_version: str = "topology.node.k8s.io/v1alpha1"
    kind: str = "NodeResourceTopology"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    topology_policies: list[str] = []
    zones: list[Zone] = []


# --- annotation payloads (spec 2.1-2.4) ---------------------------------------------------------


class DeviceHint(_Base):
    selector: LabelSelector | None = None
    #: Present (even as {}) means a VF must be allocated from each chosen device.
    vf_selector: LabelSelector | None = None
    allocate_strategy: str = ""  # ApplyForAll | RequestsAsCount
    required_topology_scope: str = ""  # Device | PCIe | NUMANode | Node
    exclusive_policy: str = ""  # DeviceLevel | PCIeLevel


#: scheduling.koordinator.sh/device-allocate-hint: device type -> hint.
DeviceAllocateHints = dict[str, DeviceHint]


class DeviceJointAllocate(_Base):
    device_types: list[str] = []
    required_scope: str = ""  # SamePCIe


class GPUPartitionSpec(_Base):
    allocate_policy: str = ""  # Restricted | BestEffort (default)
    ring_bus_bandwidth: Quantity | None = None


class GPUPartition(_Base):
    minors: list[int] = []
    gpu_link_type: str = msgspec.field(default="", name="gpuLinkType")
    ring_bus_bandwidth: Quantity | None = None
    allocation_score: int = 0


#: scheduling.koordinator.sh/gpu-partitions on a Device: GPU count (as a string) -> partitions.
GPUPartitionTable = dict[str, list[GPUPartition]]


class VFAllocation(_Base):
    minor: int = 0
    bus_id: str = msgspec.field(default="", name="busID")


class DeviceAllocationExtension(_Base):
    vfs: list[VFAllocation] = []
    #: The vNPU template the allocation follows (Koordinator v1.7); omitted when empty.
    gpu_shared_resource_template: str = ""


class DeviceAllocationEntry(_Base):
    """One allocated device in scheduling.koordinator.sh/device-allocated (``minor: 0`` is kept)."""

    minor: int
    resources: ResourceList = {}
    id: str = msgspec.field(default="", name="id")
    extension: DeviceAllocationExtension | None = None


#: scheduling.koordinator.sh/device-allocated: device type -> allocated devices.
DeviceAllocations = dict[str, list[DeviceAllocationEntry]]


class NUMATopologySpec(_Base):
    numa_topology_policy: str = ""  # "" | BestEffort | Restricted | SingleNUMANode
    single_numa_node_exclusive: str = msgspec.field(default="", name="singleNUMANodeExclusive")


class ResourceSpec(_Base):
    required_cpu_bind_policy: str = msgspec.field(default="", name="requiredCPUBindPolicy")
    preferred_cpu_bind_policy: str = msgspec.field(default="", name="preferredCPUBindPolicy")
    preferred_cpu_exclusive_policy: str = msgspec.field(default="", name="preferredCPUExclusivePolicy")


class NUMANodeResource(_Base):
    node: int = 0
    resources: ResourceList = {}


class ResourceStatus(_Base):
    """scheduling.koordinator.sh/resource-status: the cpuset (Linux cpulist) and per-NUMA resources."""

    cpuset: str = ""
    numa_node_resources: list[NUMANodeResource] = msgspec.field(
        default_factory=list, name="numaNodeResources"
    )


class CPUInfo(_Base):
    id: int = 0
    core: int = 0
    socket: int = 0
    node: int = 0


class CPUTopology(_Base):
    """node.koordinator.sh/cpu-topology on a NodeResourceTopology."""

    detail: list[CPUInfo] = []


class PodCPUAlloc(_Base):
    namespace: str = ""
    name: str = ""
    uid: str = ""
    cpuset: str = ""
    managed_by_kubelet: bool = False


class KubeletCPUManagerPolicy(_Base):
    policy: str = ""
    options: dict[str, str] = {}
    reserved_cpus: str = msgspec.field(default="", name="reservedCPUs")


class SystemQOSResource(_Base):
    cpuset: str = ""
    cpuset_exclusive: bool | None = None


class NodeReservation(_Base):
    resources: ResourceList = {}
    reserved_cpus: str = msgspec.field(default="", name="reservedCPUs")
    apply_policy: str = ""
