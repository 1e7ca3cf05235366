"""VolumeRestrictions (kube-scheduler v1.28).

Two checks:

* in-tree disks (GCE PD, AWS EBS, RBD, iSCSI) a pod mounts must not be mounted read-write by a
  pod already on the node (``node(s) had no available disk``);
* a claim with the ReadWriteOncePod access mode may be used by one pod in the cluster: while
  any scheduled pod uses it, the pod fits no node (the preemption path removes that pod through
  ``remove_pod``).

Pods with neither (almost all) are skipped at PreFilter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from koordsched.api.kinds import PERSISTENT_VOLUME_CLAIMS
from koordsched.api.storage import PersistentVolumeClaim, claim_not_found
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
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    ActionType,
    ClusterEvent,
    PodInfo,
    PreFilterResult,
)
from koordsched.plugins.volumerestrictions.conflicts import conflicts, is_conflict_volume

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_RWOP_CONFLICT = (
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
)
_STATE_KEY = "PreFilterVolumeRestrictions"
_RWOP = "ReadWriteOncePod"


@dataclass
class _State(StateData):
    #: ``namespace/name`` of the pod's ReadWriteOncePod claims.
    rwop_claims: frozenset[str]
    #: How many scheduled pods use one of them.
    conflicting: int


def _claim_keys(pod: PodInfo) -> set[str]:
    ns = pod.pod.metadata.namespace
    return {
        f"{ns}/{v.persistent_volume_claim.claim_name}"
        for v in pod.pod.spec.volumes
        if v.persistent_volume_claim is not None
    }


class VolumeRestrictions:
    name = "VolumeRestrictions"

    def __init__(self, args: Any, handle: Handle) -> None:
        self._handle = handle

    def _claims(self) -> Mapping[str, PersistentVolumeClaim]:
        return self._handle.objects(PERSISTENT_VOLUME_CLAIMS)

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        volumes = pod.pod.spec.volumes
        if not volumes:
            return None, SKIP
        needs_disk_check = any(is_conflict_volume(v) for v in volumes)
        claims = self._claims()
        rwop: set[str] = set()
        for v in volumes:
            if v.persistent_volume_claim is None:
                continue
            name = v.persistent_volume_claim.claim_name
            pvc = claims.get(f"{pod.pod.metadata.namespace}/{name}")
            if pvc is None:
                return None, Status.unresolvable(claim_not_found(name))
            if _RWOP in pvc.spec.access_modes:
                rwop.add(pvc.key)
        conflicting = self._users(rwop) if rwop else 0
        if not needs_disk_check and conflicting == 0:
            return None, SKIP
        state.write(_STATE_KEY, _State(frozenset(rwop), conflicting))
        return None, SUCCESS

    def _users(self, keys: set[str]) -> int:
        """Scheduled (or assumed) pods using one of these claims, counted once per claim use."""
        n = 0
        for info in self._handle.snapshot.infos:
            for p in info.pods.values():
                if p.pod.spec.volumes:
                    n += len(_claim_keys(p) & keys)
        return n

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        s = state.read_optional(_STATE_KEY, _State)
        if s is not None and s.rwop_claims:
            s.conflicting += len(_claim_keys(to_add) & s.rwop_claims)
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status:
        s = state.read_optional(_STATE_KEY, _State)
        if s is not None and s.rwop_claims:
            s.conflicting -= len(_claim_keys(to_remove) & s.rwop_claims)
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        for v in pod.pod.spec.volumes:
            if not is_conflict_volume(v):
                continue
            for other in node.pods.values():
                if conflicts(v, other.pod):
                    return Status.unschedulable(ERR_REASON_DISK_CONFLICT)
        s = state.read_optional(_STATE_KEY, _State)
        if s is not None and s.conflicting > 0:
            return Status.unschedulable(ERR_REASON_RWOP_CONFLICT)
        return SUCCESS

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A pod's disk or claim freed; a new node may have no conflicting pod.
            ClusterEventWithHint(ASSIGNED_POD_DELETE),
            ClusterEventWithHint(NODE_ADD),
            # A claim the pod names was created or changed access modes.
            ClusterEventWithHint(
                ClusterEvent("PersistentVolumeClaim", ActionType.ADD, "PersistentVolumeClaimAdd")
            ),
            ClusterEventWithHint(
                ClusterEvent("PersistentVolumeClaim", ActionType.UPDATE, "PersistentVolumeClaimUpdate")
            ),
        ]


if TYPE_CHECKING:
    # The extension points VolumeRestrictions implements; mypy checks each line, nothing runs.
    _pre_filter: type[PreFilterPlugin] = VolumeRestrictions
    _filter: type[FilterPlugin] = VolumeRestrictions
    _enqueue_extensions: type[EnqueueExtensions] = VolumeRestrictions
