"""The plugins koordsched implements: kube-scheduler v1.28's and Koordinator v1.6's, by their names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from koordsched.api.kinds import (
    CONFIG_MAPS,
    CSI_DRIVERS,
    CSI_NODES,
    CSI_STORAGE_CAPACITIES,
    DEVICES,
    ELASTIC_QUOTAS,
    NAMESPACES,
    NODE_METRICS,
    NODE_RESOURCE_TOPOLOGIES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    POD_GROUPS,
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    RESERVATIONS,
    SERVICES,
    STATEFUL_SETS,
    STORAGE_CLASSES,
)
from koordsched.framework.registry import PluginSpec, Registry
from koordsched.plugins.coscheduling import Coscheduling, CoschedulingArgs
from koordsched.plugins.coscheduling.controllers import coscheduling_controllers
from koordsched.plugins.defaultbinder import DefaultBinder
from koordsched.plugins.defaultprebind import DefaultPreBind
from koordsched.plugins.defaultpreemption import DefaultPreemption, DefaultPreemptionArgs
from koordsched.plugins.deviceshare import DEVICE_PLUGIN_ADAPTION, DeviceShare, DeviceShareArgs
from koordsched.plugins.deviceshare import warm_up_kernels as warm_up_deviceshare
from koordsched.plugins.elasticquota import ElasticQuota, ElasticQuotaArgs
from koordsched.plugins.elasticquota.controllers import quota_controllers
from koordsched.plugins.gpufragmentation import GPUFragmentation, GPUFragmentationArgs
from koordsched.plugins.gpufragmentation import warm_up_kernels as warm_up_gpufragmentation
from koordsched.plugins.imagelocality import ImageLocality
from koordsched.plugins.interpodaffinity import InterPodAffinity, InterPodAffinityArgs
from koordsched.plugins.interpodaffinity import warm_up_kernels as warm_up_interpodaffinity
from koordsched.plugins.loadaware import LoadAwareScheduling, LoadAwareSchedulingArgs
from koordsched.plugins.loadaware import warm_up_kernels as warm_up_loadaware
from koordsched.plugins.nodeaffinity import NodeAffinity, NodeAffinityArgs
from koordsched.plugins.nodename import NodeName
from koordsched.plugins.nodenumaresource import NodeNUMAResource, NodeNUMAResourceArgs
from koordsched.plugins.nodeports import NodePorts
from koordsched.plugins.noderesources import (
    NodeResourcesBalancedAllocation,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFit,
    NodeResourcesFitArgs,
)
from koordsched.plugins.noderesourcesfitplus import NodeResourcesFitPlus, NodeResourcesFitPlusArgs
from koordsched.plugins.nodeunschedulable import NodeUnschedulable
from koordsched.plugins.nodevolumelimits import NodeVolumeLimits
from koordsched.plugins.podtopologyspread import PodTopologySpread, PodTopologySpreadArgs
from koordsched.plugins.podtopologyspread import warm_up_kernels as warm_up_podtopologyspread
from koordsched.plugins.queuesort import PrioritySort
from koordsched.plugins.reservation import Reservation, ReservationArgs
from koordsched.plugins.reservation.controller import reservation_controllers
from koordsched.plugins.scarceresourceavoidance import ScarceResourceAvoidance, ScarceResourceAvoidanceArgs
from koordsched.plugins.schedulinggates import SchedulingGates
from koordsched.plugins.tainttoleration import TaintToleration
from koordsched.plugins.volumebinding import VolumeBinding, VolumeBindingArgs
from koordsched.plugins.volumerestrictions import VolumeRestrictions
from koordsched.plugins.volumezone import VolumeZone


def in_tree_registry(
    *, network_topology_manager: bool = False, feature_gates: Mapping[str, bool] | None = None
) -> Registry:
    """A fresh Registry of every in-tree plugin, with its args type where it takes args.

    ``network_topology_manager`` (``--enable-network-topology-manager``): Coscheduling reads
    ClusterNetworkTopology and declares the tree's status controller. ``feature_gates``
    (``--feature-gates``, name -> on): ``DevicePluginAdaption`` makes DeviceShare's PreBind write
    the vendor device plugins' annotations.
    """
    gates = feature_gates or {}
    adaption = gates.get(DEVICE_PLUGIN_ADAPTION, False)
    device_share = PluginSpec.of(
        DeviceShare, DeviceShareArgs, kinds=(DEVICES, CONFIG_MAPS), warm_up=warm_up_deviceshare
    )
    if adaption:
        device_share = replace(
            device_share, factory=lambda args, handle: DeviceShare(args, handle, device_plugin_adaption=True)
        )
    registry = Registry(
        [
            PluginSpec.of(SchedulingGates),
            PluginSpec.of(PrioritySort),
            PluginSpec.of(NodeUnschedulable),
            PluginSpec.of(NodeName),
            PluginSpec.of(TaintToleration),
            PluginSpec.of(NodeAffinity, NodeAffinityArgs),
            PluginSpec.of(NodePorts),
            PluginSpec.of(NodeResourcesFit, NodeResourcesFitArgs),
            PluginSpec.of(NodeResourcesBalancedAllocation, NodeResourcesBalancedAllocationArgs),
            PluginSpec.of(
                InterPodAffinity, InterPodAffinityArgs, kinds=(NAMESPACES,), warm_up=warm_up_interpodaffinity
            ),
            PluginSpec.of(
                PodTopologySpread,
                PodTopologySpreadArgs,
                kinds=(SERVICES, REPLICATION_CONTROLLERS, REPLICA_SETS, STATEFUL_SETS),
                warm_up=warm_up_podtopologyspread,
            ),
            PluginSpec.of(VolumeRestrictions, kinds=(PERSISTENT_VOLUME_CLAIMS,)),
            PluginSpec.of(
                NodeVolumeLimits,
                kinds=(CSI_NODES, PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES),
            ),
            PluginSpec.of(
                VolumeBinding,
                VolumeBindingArgs,
                kinds=(
                    STORAGE_CLASSES,
                    PERSISTENT_VOLUMES,
                    PERSISTENT_VOLUME_CLAIMS,
                    CSI_NODES,
                    CSI_DRIVERS,
                    CSI_STORAGE_CAPACITIES,
                ),
            ),
            PluginSpec.of(VolumeZone, kinds=(PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES)),
            PluginSpec.of(ImageLocality),
            PluginSpec.of(DefaultPreemption, DefaultPreemptionArgs, kinds=(POD_DISRUPTION_BUDGETS,)),
            PluginSpec.of(DefaultBinder),
            # Koordinator
            PluginSpec.of(
                LoadAwareScheduling,
                LoadAwareSchedulingArgs,
                kinds=(NODE_METRICS,),
                warm_up=warm_up_loadaware,
            ),
            PluginSpec.of(NodeResourcesFitPlus, NodeResourcesFitPlusArgs),
            PluginSpec.of(ScarceResourceAvoidance, ScarceResourceAvoidanceArgs),
            PluginSpec.of(NodeNUMAResource, NodeNUMAResourceArgs, kinds=(NODE_RESOURCE_TOPOLOGIES,)),
            device_share,
            PluginSpec.of(DefaultPreBind),
            PluginSpec.of(
                Reservation, ReservationArgs, kinds=(RESERVATIONS,), controllers=reservation_controllers
            ),
            PluginSpec.of(
                Coscheduling, CoschedulingArgs, kinds=(POD_GROUPS,), controllers=coscheduling_controllers
            ),
            PluginSpec.of(
                ElasticQuota,
                ElasticQuotaArgs,
                kinds=(ELASTIC_QUOTAS, POD_DISRUPTION_BUDGETS),
                controllers=quota_controllers,
            ),
            # koordsched's own
            PluginSpec.of(
                GPUFragmentation, GPUFragmentationArgs, kinds=(DEVICES,), warm_up=warm_up_gpufragmentation
            ),
        ]
    )
    if network_topology_manager:
        from koordsched.plugins.coscheduling.network_topology.manager import with_network_topology_manager

        registry = with_network_topology_manager(registry)
    return registry
