"""``--enable-network-topology-manager``: the tree manager and its status controller (spec A.2).

Without the flag Coscheduling never has a tree, so a gang asking for topology fails with
``no cluster network topology``, as in Koordinator. With it, :func:`with_network_topology_manager`
turns the registry's Coscheduling into one that reads ``ClusterNetworkTopology`` objects (watched
in a cluster, loaded by ``simulate``), builds the tree from them and the nodes, and declares
:class:`TopologyStatusController`, which writes ``status.detailStatus`` back when it differs
(through the status subresource; I/O-free, :mod:`koordsched.framework.controllers`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

from koordsched.api.kinds import CLUSTER_NETWORK_TOPOLOGIES, ObjectKind
from koordsched.api.network_topology import DEFAULT_NAME, ClusterNetworkTopologyDetailStatus
from koordsched.framework.controllers import Controller, MergePatch, ObjectWrite, Write, WriteResult
from koordsched.framework.interface import Handle
from koordsched.framework.registry import Registry
from koordsched.plugins.coscheduling.args import CoschedulingArgs
from koordsched.plugins.coscheduling.plugin import NAME, Coscheduling

log = logging.getLogger(__name__)

#: Koordinator rebuilds the tree and compares the status this often.
PERIOD = 10.0
WRITE_TIMEOUT = 30.0


def detail_status_body(details: Sequence[ClusterNetworkTopologyDetailStatus]) -> list[dict[str, Any]]:
    """The entries as the CRD stores them: the required fields always written (the root's name "")."""
    out = []
    for d in details:
        entry: dict[str, Any] = {
            "topologyInfo": {
                "topologyLayer": d.topology_info.topology_layer,
                "topologyName": d.topology_info.topology_name,
            },
            "nodeNum": d.node_num,
        }
        if d.parent_topology_info is not None:
            p = d.parent_topology_info
            entry["parentTopologyInfo"] = {"topologyLayer": p.topology_layer, "topologyName": p.topology_name}
        if d.child_topology_layer:
            entry["childTopologyLayer"] = d.child_topology_layer
        if d.child_topology_names:
            entry["childTopologyNames"] = list(d.child_topology_names)
        out.append(entry)
    return out


class TopologyStatusController:
    """Writes ``ClusterNetworkTopology/default``'s ``status.detailStatus`` as the tree stands."""

    name = "network-topology-status"
    description = "the network topology tree manager"
    watches: tuple[ObjectKind[Any], ...] = (CLUSTER_NETWORK_TOPOLOGIES,)
    interval = PERIOD
    workers = 0
    write_timeout = WRITE_TIMEOUT
    #: The simulator writes it too: its output then shows what a cluster's object would.
    simulated = True

    def __init__(self, plugins: Sequence[Coscheduling]) -> None:
        self.plugins = list(plugins)
        #: The status last sent, until the object shows it (or the write failed).
        self._sent: list[ClusterNetworkTopologyDetailStatus] | None = None

    def reconcile(self) -> list[Write]:
        plugin = next((p for p in self.plugins if p.topology.manager is not None), None)
        if plugin is None:
            return []
        obj = plugin.handle.objects(CLUSTER_NETWORK_TOPOLOGIES).get(DEFAULT_NAME)
        tree = plugin.topology.tree()
        if obj is None or tree is None:
            return []
        details = tree.detail_status()
        if details == obj.status.detail_status:
            self._sent = None
            return []
        if details == self._sent:
            return []
        self._sent = details
        body: dict[str, Any] = {"status": {"detailStatus": detail_status_body(details)}}
        if obj.metadata.uid:
            body["metadata"] = {"uid": obj.metadata.uid}
        patch = MergePatch(CLUSTER_NETWORK_TOPOLOGIES, "", DEFAULT_NAME, body, "status", object_fallback=True)
        return [ObjectWrite(DEFAULT_NAME, (patch,))]

    def applied(self, write: Write, result: WriteResult) -> None:
        if result.ok:
            return
        self._sent = None  # the next round sends it again
        log.warning("ClusterNetworkTopology %s: status not updated: %s", DEFAULT_NAME, result.error)

    def next_due(self) -> float | None:
        return None


def _topology_controllers(plugins: Sequence[object]) -> list[Controller]:
    found = [p for p in plugins if isinstance(p, Coscheduling)]
    return [TopologyStatusController(found)] if found else []


def with_network_topology_manager(registry: Registry) -> Registry:
    """``registry`` with its Coscheduling building (and reporting) the network topology tree."""
    spec = registry.get(NAME)
    if spec is None:
        return registry
    base_controllers = spec.controllers

    def factory(args: CoschedulingArgs | None, handle: Handle) -> Coscheduling:
        plugin = Coscheduling(args, handle)
        plugin.topology.enable_manager()
        return plugin

    def controllers(plugins: Sequence[object]) -> Sequence[Controller]:
        own = list(base_controllers(plugins)) if base_controllers is not None else []
        return [*own, *_topology_controllers(plugins)]

    kinds = (
        spec.kinds if CLUSTER_NETWORK_TOPOLOGIES in spec.kinds else (*spec.kinds, CLUSTER_NETWORK_TOPOLOGIES)
    )
    enabled = dataclasses.replace(spec, factory=factory, kinds=kinds, controllers=controllers)
    return Registry([enabled if s.name == NAME else s for s in registry])
