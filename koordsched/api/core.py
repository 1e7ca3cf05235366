"""The parts of core Kubernetes objects that scheduling reads.

Only the fields the scheduler needs are declared; everything else in a manifest
or an API response is skipped by msgspec at decode time. Field names follow the
API's camelCase through ``rename="camel"``; the few that camel-casing would get
wrong (``hostIP``) are named explicitly.

Quantities are kept as they arrive (a YAML manifest may say ``cpu: 64``, the API
server always sends strings) and parsed once by :mod:`koordsched.api.resources`.
"""

from __future__ import annotations

from typing import Any

import msgspec

#: A resource quantity as written in a manifest: "500m", "1Gi", 64, 0.5.
Quantity = str | int | float
ResourceList = dict[str, Quantity]


class _Base(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    pass


class OwnerReference(_Base):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class ObjectMeta(_Base, gc=False):
    # Not tracked by the garbage collector (16 bytes less each, and less for it to walk): its
    # fields are strings and maps and lists of strings, which can never lead back to it.
    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    owner_references: list[OwnerReference] = []


# --- selectors -------------------------------------------------------------------------------


class LabelSelectorRequirement(_Base):
    key: str
    operator: str
    values: list[str] = []


class LabelSelector(_Base):
    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = []


class NodeSelectorRequirement(_Base):
    key: str
    operator: str
    values: list[str] = []


class NodeSelectorTerm(_Base):
    match_expressions: list[NodeSelectorRequirement] = []
    match_fields: list[NodeSelectorRequirement] = []


class NodeSelector(_Base):
    node_selector_terms: list[NodeSelectorTerm] = []


class PreferredSchedulingTerm(_Base):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(_Base):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = []


class PodAffinityTerm(_Base):
    label_selector: LabelSelector | None = None
    namespaces: list[str] = []
    topology_key: str = ""
    namespace_selector: LabelSelector | None = None
    #: Keys whose values in the pod's own labels are ANDed into ``labelSelector`` (as ``key In
    #: (value)``; mismatch: ``key NotIn (value)``). The API server (1.31+) merges them at creation.
    match_label_keys: list[str] = []
    mismatch_label_keys: list[str] = []


class WeightedPodAffinityTerm(_Base):
    weight: int
    pod_affinity_term: PodAffinityTerm


class PodAffinity(_Base):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = []
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = []


class Affinity(_Base):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


# --- taints and tolerations -------------------------------------------------------------------
# Frozen (hashable) so nodes can be grouped by their taint set.


class Taint(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True, frozen=True):
    key: str
    effect: str
    value: str = ""


class Toleration(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True, frozen=True):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


# --- pods --------------------------------------------------------------------------------------


class ResourceRequirements(_Base):
    requests: ResourceList = {}
    limits: ResourceList = {}


class ContainerPort(_Base):
    container_port: int
    host_port: int = 0
    protocol: str = "TCP"
    host_ip: str = msgspec.field(default="", name="hostIP")
    name: str = ""


class Container(_Base):
    name: str = ""
    image: str = ""
    resources: ResourceRequirements = msgspec.field(default_factory=ResourceRequirements)
    ports: list[ContainerPort] = []
    restart_policy: str | None = None


class PodSchedulingGate(_Base):
    name: str


class TopologySpreadConstraint(_Base):
    """``spec.topologySpreadConstraints[*]``. Required fields default to their zero values so a
    pod lacking one decodes and PodTopologySpread can name the field in its refusal."""

    max_skew: int = 0
    topology_key: str = ""
    when_unsatisfiable: str = ""
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] = []


# --- pod volumes (what the volume plugins read) -------------------------------------------------


class PersistentVolumeClaimVolumeSource(_Base):
    claim_name: str = ""
    read_only: bool = False


class EphemeralVolumeSource(_Base):
    #: The claim's template; the ephemeral-volume controller creates the claim ``<pod>-<volume>``
    #: from it, and the scheduler reads that claim, never the template.
    volume_claim_template: dict[str, Any] | None = None


class GCEPersistentDiskVolume(_Base):
    pd_name: str = ""
    read_only: bool = False


class AWSElasticBlockStoreVolume(_Base):
    volume_id: str = msgspec.field(default="", name="volumeID")
    read_only: bool = False


class RBDVolume(_Base):
    monitors: list[str] = []
    image: str = ""
    pool: str = "rbd"
    read_only: bool = False


class ISCSIVolume(_Base):
    target_portal: str = ""
    iqn: str = ""
    lun: int = 0
    read_only: bool = False


class AzureDiskVolume(_Base):
    disk_name: str = ""
    disk_uri: str = msgspec.field(default="", name="diskURI")
    read_only: bool = False


class CinderVolume(_Base):
    volume_id: str = msgspec.field(default="", name="volumeID")
    read_only: bool = False


class CSIVolume(_Base):
    driver: str = ""


class EmptyDirVolume(_Base):
    medium: str = ""


class HostPathVolume(_Base):
    path: str = ""


class Volume(_Base):
    name: str = ""
    #: Local storage: the descheduler leaves such pods alone unless evictLocalStoragePods.
    empty_dir: EmptyDirVolume | None = None
    host_path: HostPathVolume | None = None
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    ephemeral: EphemeralVolumeSource | None = None
    gce_persistent_disk: GCEPersistentDiskVolume | None = None
    aws_elastic_block_store: AWSElasticBlockStoreVolume | None = None
    rbd: RBDVolume | None = None
    iscsi: ISCSIVolume | None = None
    azure_disk: AzureDiskVolume | None = None
    cinder: CinderVolume | None = None
    csi: CSIVolume | None = None


class PodSpec(_Base):
    containers: list[Container] = []
    init_containers: list[Container] = []
    overhead: ResourceList = {}
    node_name: str = ""
    node_selector: dict[str, str] = {}
    affinity: Affinity | None = None
    tolerations: list[Toleration] = []
    topology_spread_constraints: list[TopologySpreadConstraint] = []
    scheduler_name: str = "default-scheduler"
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str | None = None
    scheduling_gates: list[PodSchedulingGate] = []
    host_network: bool = False
    restart_policy: str = ""
    volumes: list[Volume] = []


class PodCondition(_Base):
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None


class PodStatus(_Base):
    phase: str = ""
    conditions: list[PodCondition] = []
    nominated_node_name: str = ""
    #: When the kubelet started the pod (RFC 3339); preemption prefers to evict the newest.
    start_time: str | None = None


class Pod(_Base, gc=False):
    # Untracked too: a tree of Structs, maps and lists that never refers back to the pod.
    api_version: str = "v1"
    kind: str = "Pod"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)

    @property
    def key(self) -> str:
        """``namespace/name``, the pod's identity in logs, events and the queue."""
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def identity(self) -> str:
        """The uid, else the key: a hand-written manifest may have no uid. Queue, cache and
        waiting pods all index pods by this."""
        return self.metadata.uid or self.key


# --- nodes -------------------------------------------------------------------------------------


class NodeSpec(_Base):
    unschedulable: bool = False
    taints: list[Taint] = []
    provider_id: str = msgspec.field(default="", name="providerID")


class NodeCondition(_Base):
    type: str
    status: str
    reason: str = ""
    message: str = ""


class ContainerImage(_Base):
    """One entry of ``status.images``: an image's names (tags, digests) and its size (ImageLocality)."""

    names: list[str] = []
    size_bytes: int = 0


class NodeStatus(_Base):
    capacity: ResourceList = {}
    allocatable: ResourceList = {}
    conditions: list[NodeCondition] = []
    images: list[ContainerImage] = []


class Node(_Base):
    api_version: str = "v1"
    kind: str = "Node"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)


# --- priority classes -------------------------------------------------------------------------


class PriorityClass(_Base):
    api_version: str = "scheduling.k8s.io/v1"
    kind: str = "PriorityClass"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    value: int = 0
    global_default: bool = False
    preemption_policy: str | None = None
    description: str = ""


# --- the binding the scheduler creates ----------------------------------------------------------


class ObjectReference(_Base):
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    api_version: str = ""


class Binding(_Base):
    api_version: str = "v1"
    kind: str = "Binding"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    target: ObjectReference = msgspec.field(default_factory=ObjectReference)


def to_builtins(obj: Any) -> Any:
    """Encode a Struct to plain dicts and lists with the API's field names."""
    return msgspec.to_builtins(obj)
