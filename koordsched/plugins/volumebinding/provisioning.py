"""Whether a claim can be provisioned for a node: upstream's ``checkVolumeProvisions``.

The class must name a provisioner (not ``kubernetes.io/no-provisioner``), its
``allowedTopologies`` must admit the node, and, for a CSI driver that publishes storage
capacity (``CSIDriver.spec.storageCapacity``), some CSIStorageCapacity of the class that the
node can reach must hold the requested size.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from koordsched.api.selectors import match_label_selector
from koordsched.api.storage import (
    CSIDriver,
    CSIStorageCapacity,
    PersistentVolumeClaim,
    StorageClass,
    TopologySelectorTerm,
    capacity_bytes,
    claim_class,
    claim_request_bytes,
)

NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"


class Provision(Enum):
    OK = 0
    #: The class cannot provision for this node (no provisioner, topology): "didn't find available PVs".
    UNSATISFIED = 1
    #: No reachable capacity holds the claim: "did not have enough free storage".
    NO_SPACE = 2


class ProvisionError(Exception):
    """A claim without a usable class: the cycle fails with this error, as upstream."""


def topology_matches(terms: list[TopologySelectorTerm], labels: Mapping[str, str]) -> bool:
    """``MatchTopologySelectorTerms``: no terms admit every node; an empty term admits none."""
    if not terms:
        return True
    for term in terms:
        exprs = term.match_label_expressions
        if exprs and all(labels.get(r.key) in r.values for r in exprs):
            return True
    return False


def check_provision(
    pvc: PersistentVolumeClaim,
    labels: Mapping[str, str],
    classes: Mapping[str, StorageClass],
    drivers: Mapping[str, CSIDriver],
    capacities: Mapping[str, CSIStorageCapacity],
) -> Provision:
    name = f"{pvc.metadata.namespace}/{pvc.metadata.name}"
    class_name = claim_class(pvc)
    if not class_name:
        raise ProvisionError(f'no class for claim "{name}"')
    sc = classes.get(class_name)
    if sc is None:
        raise ProvisionError(f'failed to find storage class "{class_name}"')
    if not sc.provisioner or sc.provisioner == NOT_SUPPORTED_PROVISIONER:
        return Provision.UNSATISFIED
    if not topology_matches(sc.allowed_topologies, labels):
        return Provision.UNSATISFIED
    if "storage" not in pvc.spec.resources.requests:
        return Provision.OK
    driver = drivers.get(sc.provisioner)
    if driver is None or not driver.spec.storage_capacity:
        return Provision.OK  # not a CSI driver, or one that does not publish capacity
    size = claim_request_bytes(pvc)
    for cap in capacities.values():
        if cap.storage_class_name != sc.metadata.name or cap.node_topology is None:
            continue
        # maximumVolumeSize, when given, is the more precise limit.
        limit = capacity_bytes(
            cap.maximum_volume_size if cap.maximum_volume_size is not None else cap.capacity
        )
        if limit is not None and limit >= size and match_label_selector(cap.node_topology, labels):
            return Provision.OK
    return Provision.NO_SPACE
