"""Kinds of objects that plugins read besides Pods, Nodes and PriorityClasses (CRDs, mostly).

A plugin's spec names the kinds it reads (``PluginSpec.kinds``); the scheduler and both
backends learn from there what to watch or load, how to key and check each object and
whether it belongs to one node. Nothing outside this module and the plugins names a kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from koordsched.api.config_maps import ConfigMap
from koordsched.api.core import Pod
from koordsched.api.crd_checks import check_device, check_node_resource_topology
from koordsched.api.defaults import default_namespace
from koordsched.api.elastic_quota import ElasticQuota, parse_elastic_quota
from koordsched.api.koordinator import Device, NodeResourceTopology
from koordsched.api.network_topology import ClusterNetworkTopology, check_cluster_network_topology
from koordsched.api.node_metric import parse_node_metric
from koordsched.api.podgroup import PodGroup, check_pod_group
from koordsched.api.policy import PodDisruptionBudget, check_pod_disruption_budget
from koordsched.api.reservation import Reservation, bound, check_reservation, reserve_pod, unschedulable
from koordsched.api.slo import NodeMetric
from koordsched.api.storage import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    check_csi_node,
    check_csi_storage_capacity,
    check_persistent_volume,
    check_persistent_volume_claim,
    check_storage_class,
)
from koordsched.api.transform import rewrite_device
from koordsched.api.workloads import Namespace, ReplicaSet, ReplicationController, Service, StatefulSet

T = TypeVar("T")


@dataclass(frozen=True)
class PodStandIn(Generic[T]):
    """Objects of a kind that are scheduled as pods (a Reservation's reserve pod).

    The scheduler feeds ``to_pod(obj)`` through its pod handlers (queue while pending, cache
    once bound; None means the object no longer stands for a pod); a backend binds such a
    pod by writing the object (``annotation`` on the pod names it).
    """

    to_pod: Callable[[T], Pod | None]
    #: The pod annotation holding the object's name.
    annotation: str
    #: The object once its pod is bound: (object, node, annotations PreBind wrote, wall time).
    bound: Callable[[T, str, Mapping[str, str], float], T]
    #: The object after a failed attempt: (object, message, wall time).
    unschedulable: Callable[[T, str, float], T]


@dataclass(frozen=True)
class ObjectKind(Generic[T]):
    """One kind: its Struct, where the API server serves it and how the scheduler treats it.

    The scheduler stores only objects of ``type`` under the kind, so plugins read them typed
    (``Handle.objects``).
    """

    kind: str
    type: type[T]
    #: The all-namespaces collection URL.
    path: str
    namespaced: bool
    #: One object per node, named after it: a change to the object is a change to that node.
    per_node: bool = False
    #: Checks values the Struct cannot (quantities, timestamps); raises ValueError naming the field,
    #: :class:`~koordsched.api.field_errors.Refused` for a well-formed value the scheduler refuses.
    #: The plugins reading the kind call it too (once per object version) and set such objects aside.
    check: Callable[[T], object] | None = None
    #: What the readers do with an object ``check`` refuses (the simulator's warning says it).
    refused: str = "set aside"
    #: An object ``check`` refuses is set aside where it arrives (``EventHandlers.on_object``):
    #: its readers see no such object. For kinds where "absent" could hand out what the object
    #: records (a Device: bound pods hold its minors), False: the readers refuse it themselves.
    drop_refused: bool = False
    #: Rewrites an object on the way in, as koord-scheduler's informer transformers do.
    rewrite: Callable[[T], T] | None = None
    #: A CRD a cluster may lack (no Koordinator, no koordlet): the kube backend then treats it
    #: as present and empty. Kinds every cluster serves (Namespaces, Services, ...) are not
    #: optional: without them (or without the RBAC grant to read them) the cache never syncs,
    #: as a constraint read from an empty store would be silently wrong.
    optional: bool = False
    #: The API server's defaulting of the kind (see :mod:`koordsched.api.defaults`): objects in a
    #: cluster went through it, so the simulator's loader applies it to manifests.
    defaults: Callable[[T], T] | None = None
    #: Older collection URLs to watch instead when the API server does not serve ``path``
    #: (policy/v1beta1 PodDisruptionBudgets before Kubernetes 1.21), in order of preference.
    fallback_paths: tuple[str, ...] = ()
    #: Objects of this kind are scheduled as pods (see :class:`PodStandIn`).
    stand_in: PodStandIn[T] | None = None

    def key_of(self, namespace: str, name: str) -> str:
        """The store key: ``namespace/name``, or ``name`` for cluster-scoped kinds."""
        return f"{namespace}/{name}" if self.namespaced else name


DEVICES: ObjectKind[Device] = ObjectKind(
    "Device",
    Device,
    "/apis/scheduling.koordinator.sh/v1alpha1/devices",
    namespaced=False,
    per_node=True,
    check=check_device,
    rewrite=rewrite_device,
    refused="DeviceShare offers none of its node's devices",
    optional=True,
)
NODE_RESOURCE_TOPOLOGIES: ObjectKind[NodeResourceTopology] = ObjectKind(
    "NodeResourceTopology",
    NodeResourceTopology,
    "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies",
    namespaced=False,
    per_node=True,
    check=check_node_resource_topology,
    refused="set aside: NodeNUMAResource treats its node as having no NodeResourceTopology",
    drop_refused=True,
    optional=True,
)
NODE_METRICS: ObjectKind[NodeMetric] = ObjectKind(
    "NodeMetric",
    NodeMetric,
    "/apis/slo.koordinator.sh/v1alpha1/nodemetrics",
    namespaced=False,
    per_node=True,
    check=parse_node_metric,
    refused="LoadAwareScheduling treats its node as having no NodeMetric",
    drop_refused=True,
    optional=True,
)

CLUSTER_NETWORK_TOPOLOGIES: ObjectKind[ClusterNetworkTopology] = ObjectKind(
    "ClusterNetworkTopology",
    ClusterNetworkTopology,
    "/apis/scheduling.koordinator.sh/v1alpha1/clusternetworktopologies",
    namespaced=False,
    check=check_cluster_network_topology,
    refused="set aside: the network topology tree keeps what it was built from",
    drop_refused=True,
    optional=True,
)
RESERVATIONS: ObjectKind[Reservation] = ObjectKind(
    "Reservation",
    Reservation,
    "/apis/scheduling.koordinator.sh/v1alpha1/reservations",
    namespaced=False,
    check=check_reservation,
    refused="not scheduled and matched by no pod; an Available one keeps holding its status.allocatable",
    stand_in=PodStandIn(reserve_pod, "scheduling.koordinator.sh/reservation-name", bound, unschedulable),
    optional=True,
)
ELASTIC_QUOTAS: ObjectKind[ElasticQuota] = ObjectKind(
    "ElasticQuota",
    ElasticQuota,
    "/apis/scheduling.sigs.k8s.io/v1alpha1/elasticquotas",
    namespaced=True,
    check=parse_elastic_quota,
    refused="ElasticQuota refuses the pods charged to it",
    optional=True,
)


# --- core and apps kinds read by kube-scheduler's default plugins ---------------------------

NAMESPACES: ObjectKind[Namespace] = ObjectKind(
    "Namespace", Namespace, "/api/v1/namespaces", namespaced=False, defaults=default_namespace
)
SERVICES: ObjectKind[Service] = ObjectKind("Service", Service, "/api/v1/services", namespaced=True)
REPLICATION_CONTROLLERS: ObjectKind[ReplicationController] = ObjectKind(
    "ReplicationController", ReplicationController, "/api/v1/replicationcontrollers", namespaced=True
)
REPLICA_SETS: ObjectKind[ReplicaSet] = ObjectKind(
    "ReplicaSet", ReplicaSet, "/apis/apps/v1/replicasets", namespaced=True
)
STATEFUL_SETS: ObjectKind[StatefulSet] = ObjectKind(
    "StatefulSet", StatefulSet, "/apis/apps/v1/statefulsets", namespaced=True
)


#: DeviceShare's vNPU templates (``gpuSharedResourceTemplatesConfig``, Koordinator v1.7). The path is
#: every namespace's; the kube backend watches only the ConfigMap the args name when the profiles
#: agree on one (``WatchScopedPlugin``).
CONFIG_MAPS: ObjectKind[ConfigMap] = ObjectKind("ConfigMap", ConfigMap, "/api/v1/configmaps", namespaced=True)


# --- policy kinds read by DefaultPreemption ---------------------------------------------------

POD_DISRUPTION_BUDGETS: ObjectKind[PodDisruptionBudget] = ObjectKind(
    "PodDisruptionBudget",
    PodDisruptionBudget,
    "/apis/policy/v1/poddisruptionbudgets",
    namespaced=True,
    check=check_pod_disruption_budget,
    refused="set aside: DefaultPreemption treats it as matching no pod, as kube-scheduler does",
    drop_refused=True,
    fallback_paths=("/apis/policy/v1beta1/poddisruptionbudgets",),
)

# --- storage kinds read by the volume plugins -------------------------------------------------

STORAGE_CLASSES: ObjectKind[StorageClass] = ObjectKind(
    "StorageClass",
    StorageClass,
    "/apis/storage.k8s.io/v1/storageclasses",
    namespaced=False,
    check=check_storage_class,
    refused="set aside: claims naming it find no such StorageClass",
    drop_refused=True,
)
PERSISTENT_VOLUMES: ObjectKind[PersistentVolume] = ObjectKind(
    "PersistentVolume",
    PersistentVolume,
    "/api/v1/persistentvolumes",
    namespaced=False,
    check=check_persistent_volume,
    refused="set aside: no claim is bound to it by the scheduler, and pods using it are not scheduled",
    drop_refused=True,
)
PERSISTENT_VOLUME_CLAIMS: ObjectKind[PersistentVolumeClaim] = ObjectKind(
    "PersistentVolumeClaim",
    PersistentVolumeClaim,
    "/api/v1/persistentvolumeclaims",
    namespaced=True,
    check=check_persistent_volume_claim,
    refused="pods using it are not scheduled",
)
CSI_NODES: ObjectKind[CSINode] = ObjectKind(
    "CSINode",
    CSINode,
    "/apis/storage.k8s.io/v1/csinodes",
    namespaced=False,
    per_node=True,
    check=check_csi_node,
    refused="set aside: NodeVolumeLimits finds no CSINode for its node",
    drop_refused=True,
)
CSI_DRIVERS: ObjectKind[CSIDriver] = ObjectKind(
    "CSIDriver", CSIDriver, "/apis/storage.k8s.io/v1/csidrivers", namespaced=False
)
CSI_STORAGE_CAPACITIES: ObjectKind[CSIStorageCapacity] = ObjectKind(
    "CSIStorageCapacity",
    CSIStorageCapacity,
    "/apis/storage.k8s.io/v1/csistoragecapacities",
    namespaced=True,
    check=check_csi_storage_capacity,
    refused="set aside: VolumeBinding does not count its capacity for provisioning",
    drop_refused=True,
    # storage.k8s.io/v1 only from Kubernetes 1.24 (1.20 serves it as alpha/beta behind gates): a
    # cluster without it has no capacities, and drivers that publish them find no room.
    optional=True,
)

# --- gang scheduling ------------------------------------------------------------------------

POD_GROUPS: ObjectKind[PodGroup] = ObjectKind(
    "PodGroup",
    PodGroup,
    "/apis/scheduling.sigs.k8s.io/v1alpha1/podgroups",
    namespaced=True,
    check=check_pod_group,
    refused="set aside: Coscheduling treats its gang as not initialised",
    drop_refused=True,
    optional=True,
)
