"""VolumeZone (kube-scheduler v1.28).

A PersistentVolume labelled with a zone or region (GA or beta label; several zones joined by
``__``) may only be used on a node in one of them. Claims not bound yet are skipped when their
class waits for the first consumer (VolumeBinding picks a PV for the node then) and refused
otherwise, with upstream's messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from koordsched.api.core import Pod
from koordsched.api.kinds import PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES
from koordsched.api.storage import (
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    claim_class,
    claim_not_found,
    pv_not_found,
    storage_class_not_found,
)
from koordsched.framework.cycle_state import CycleState, StateData
from koordsched.framework.interface import (
    ClusterEventWithHint,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    PreFilterExtensions,
    PreFilterPlugin,
)
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SKIP, SUCCESS, Status
from koordsched.framework.types import (
    NODE_ADD,
    NODE_UPDATE,
    ActionType,
    ClusterEvent,
    PodInfo,
    PreFilterResult,
)

ERR_REASON_CONFLICT = "node(s) had no available volume zone"
_STATE_KEY = "PreFilterVolumeZone"

ZONE_BETA: Final = "failure-domain.beta.kubernetes.io/zone"
REGION_BETA: Final = "failure-domain.beta.kubernetes.io/region"
ZONE: Final = "topology.kubernetes.io/zone"
REGION: Final = "topology.kubernetes.io/region"
#: Upstream's ``topologyLabels``, in its order.
TOPOLOGY_LABELS: Final = (ZONE_BETA, REGION_BETA, ZONE, REGION)
_GA: Final = {ZONE_BETA: ZONE, REGION_BETA: REGION}


@dataclass(frozen=True)
class _Topology:
    pv: str
    key: str
    values: frozenset[str]


@dataclass
class _State(StateData):
    topologies: list[_Topology]


def _pv_topologies(pv: PersistentVolume) -> list[_Topology]:
    out = []
    for key in TOPOLOGY_LABELS:
        value = pv.metadata.labels.get(key)
        if value is not None:
            # ``LabelZonesToSet``: zones joined by "__".
            out.append(_Topology(pv.metadata.name, key, frozenset(v for v in value.split("__") if v)))
    return out


def _has_claims(pod: Pod) -> bool:
    return any(v.persistent_volume_claim is not None for v in pod.spec.volumes)


class VolumeZone:
    name = "VolumeZone"

    def __init__(self, args: Any, handle: Handle) -> None:
        self._handle = handle

    def _topologies(self, pod: Pod) -> list[_Topology] | Status:
        claims: Mapping[str, PersistentVolumeClaim] = self._handle.objects(PERSISTENT_VOLUME_CLAIMS)
        pvs: Mapping[str, PersistentVolume] = self._handle.objects(PERSISTENT_VOLUMES)
        classes: Mapping[str, StorageClass] = self._handle.objects(STORAGE_CLASSES)
        out: list[_Topology] = []
        for v in pod.spec.volumes:
            if v.persistent_volume_claim is None:
                continue
            name = v.persistent_volume_claim.claim_name
            if not name:
                return Status.unresolvable("PersistentVolumeClaim had no name")
            pvc = claims.get(f"{pod.metadata.namespace}/{name}")
            if pvc is None:
                return Status.unresolvable(claim_not_found(name))
            pv_name = pvc.spec.volume_name
            if not pv_name:
                class_name = claim_class(pvc)
                if not class_name:
                    return Status.unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
                sc = classes.get(class_name)
                if sc is None:
                    return Status.unresolvable(storage_class_not_found(class_name))
                if sc.volume_binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER:
                    continue  # VolumeBinding chooses the PV for the node
                return Status.unresolvable("PersistentVolume had no name")
            pv = pvs.get(pv_name)
            if pv is None:
                return Status.unresolvable(pv_not_found(pv_name))
            out.extend(_pv_topologies(pv))
        return out

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        if not _has_claims(pod.pod):
            return None, SKIP
        found = self._topologies(pod.pod)
        if isinstance(found, Status):
            return None, found
        if not found:
            return None, SKIP
        state.write(_STATE_KEY, _State(found))
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        s = state.read_optional(_STATE_KEY, _State)
        if s is None:
            found = self._topologies(pod.pod)
            if isinstance(found, Status):
                return found
            s = _State(found)
        if not s.topologies:
            return SUCCESS
        labels = node.labels
        if not any(k in labels for k in TOPOLOGY_LABELS):
            return SUCCESS  # a node without zone labels accepts any volume
        for t in s.topologies:
            value = labels.get(t.key)
            if value is None:
                # A PV with the beta label matches a node with the GA one.
                ga = _GA.get(t.key)
                value = labels.get(ga) if ga is not None else None
            if value is None or value not in t.values:
                return Status.unresolvable(ERR_REASON_CONFLICT)
        return SUCCESS

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent("StorageClass", ActionType.ADD, "StorageClassAdd")),
            ClusterEventWithHint(NODE_ADD),
            ClusterEventWithHint(NODE_UPDATE),
            ClusterEventWithHint(
                ClusterEvent("PersistentVolumeClaim", ActionType.ADD, "PersistentVolumeClaimAdd")
            ),
            ClusterEventWithHint(
                ClusterEvent("PersistentVolumeClaim", ActionType.UPDATE, "PersistentVolumeClaimUpdate")
            ),
            ClusterEventWithHint(ClusterEvent("PersistentVolume", ActionType.ADD, "PersistentVolumeAdd")),
            ClusterEventWithHint(
                ClusterEvent("PersistentVolume", ActionType.UPDATE, "PersistentVolumeUpdate")
            ),
        ]


if TYPE_CHECKING:
    _pre_filter: type[PreFilterPlugin] = VolumeZone
    _filter: type[FilterPlugin] = VolumeZone
    _enqueue_extensions: type[EnqueueExtensions] = VolumeZone
