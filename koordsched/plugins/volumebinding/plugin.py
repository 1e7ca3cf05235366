"""VolumeBinding (kube-scheduler v1.28): a pod's claims bound, or bindable, on the node.

* PreFilter sorts the pod's claims (``claims.py``); a missing, lost, deleted or foreign
  ephemeral claim makes the pod unresolvable, an unbound claim of an Immediate class makes it
  wait for the PV controller; bound claims' local PVs narrow the nodes to their hostnames.
* Filter checks bound claims' PV node affinity and finds, per node, a static PV or a way to
  provision for each claim that waits for its first consumer (``binder.py``).
* Reserve records the decisions in the assume caches (the next pod sees the PV taken);
  Unreserve takes them back.
* PreBind writes them through the output port (PV ``claimRef``; a claim's
  ``volume.kubernetes.io/selected-node``) and waits, up to ``bindTimeoutSeconds``, for the PV
  controller to complete the binding.

Score needs the alpha VolumeCapacityPriority gate upstream; without it PreScore skips, so the
plugin scores nothing, as upstream by default. Pods without claims pay one look at their volumes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from koordsched.api.kinds import PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES
from koordsched.api.storage import (
    ANN_SELECTED_NODE,
    claim_fully_bound,
    claim_not_found,
    pv_node_affinity_matches,
    pv_not_found,
)
from koordsched.framework.cycle_state import CycleState, StateData
from koordsched.framework.interface import (
    BatchFilterPlugin,
    ClusterEventWithHint,
    Codes,
    EnqueueExtensions,
    Handle,
    PreBindPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    Rows,
    ScorePlugin,
)
from koordsched.framework.pod_topology import TopologyDomains
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SKIP, SUCCESS, Code, Status
from koordsched.framework.types import (
    NODE_ADD,
    NODE_UPDATE,
    ActionType,
    BindingPlan,
    ClusterEvent,
    PodInfo,
    PreFilterResult,
)
from koordsched.plugins.volumebinding.args import VolumeBindingArgs
from koordsched.plugins.volumebinding.binder import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
    PodVolumes,
    Prepared,
    VolumeBinder,
)
from koordsched.plugins.volumebinding.claims import ClaimError, PodClaims, claim_names, pod_claims
from koordsched.plugins.volumebinding.hosts import HostAnswers
from koordsched.plugins.volumebinding.matching import HOSTNAME_LABEL
from koordsched.plugins.volumebinding.provisioning import ProvisionError
from koordsched.plugins.volumebinding.writer import VolumeBindingWriter

_STATE_KEY = "PreFilterVolumeBinding"
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
#: Filter codes: one bit per upstream reason, in the order upstream lists them.
_NODE_CONFLICT, _BIND_CONFLICT, _NO_SPACE, _PV_MISSING, _ERROR = 1, 2, 4, 8, 16
_REASON_BITS = (
    (_NODE_CONFLICT, ERR_REASON_NODE_CONFLICT),
    (_BIND_CONFLICT, ERR_REASON_BIND_CONFLICT),
    (_NO_SPACE, ERR_REASON_NOT_ENOUGH_SPACE),
    (_PV_MISSING, ERR_REASON_PV_NOT_EXIST),
)
#: The message upstream's poll gives up with.
ERR_TIMEOUT = "timed out waiting for the condition"


@dataclass
class _State(StateData):
    claims: PodClaims
    prepared: Prepared
    #: node -> what the claims need there, for the nodes Filter admitted.
    by_node: dict[str, PodVolumes] = field(default_factory=dict)
    all_bound: bool = False
    #: The assumed decisions Reserve made (what PreBind writes).
    assumed: PodVolumes | None = None
    #: The error a node's search ended with (a claim's class is missing).
    error: str = ""


class _BindingError(Exception):
    pass


def _events(kind: str, *actions: ActionType) -> list[ClusterEventWithHint]:
    return [ClusterEventWithHint(ClusterEvent(kind, a, f"{kind}{a.value}")) for a in actions]


class VolumeBinding:
    name = "VolumeBinding"

    def __init__(self, args: VolumeBindingArgs | None, handle: Handle) -> None:
        self._handle = handle
        self.args = args if args is not None else VolumeBindingArgs()
        self.binder = VolumeBinder(handle)
        self._hosts = HostAnswers()

    # --- PreFilter -------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        names = claim_names(pod.pod)
        if not names:
            return None, SKIP
        try:
            claims = pod_claims(
                pod.pod, names, self.binder.pvcs.get, self.binder.classes(), self.binder.refusal
            )
        except ClaimError as exc:
            return None, Status.unresolvable(str(exc))
        if claims.immediate:
            # The PV controller binds these; the claim's update brings the pod back.
            return None, Status.unresolvable(ERR_UNBOUND_IMMEDIATE)
        state.write(_STATE_KEY, _State(claims, self.binder.prepare(claims)))
        eligible = self._eligible_nodes(claims)
        return (PreFilterResult(eligible) if eligible is not None else None), SUCCESS

    def _eligible_nodes(self, claims: PodClaims) -> set[str] | None:
        """``GetEligibleNodes``: the hostnames every bound claim's local PV is pinned to."""
        out: set[str] | None = None
        for pvc in claims.bound:
            pv = self.binder.pvs.get(pvc.spec.volume_name)
            if pv is None:
                return None
            na = pv.spec.node_affinity
            hosts = _pinned_hostnames(na.required if na is not None else None)
            if hosts:
                out = set(hosts) if out is None else out & hosts
        return out

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    # --- Filter ----------------------------------------------------------------------------------

    def filter_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Codes:
        """Per node, a bitmask of upstream's reasons (0: it fits). When only local PVs can serve the
        claims, a node is judged by its hostname (``hosts.py``); with one such claim what it gets
        on the chosen node is worked out at Reserve, for that node only."""
        s = state.read_optional(_STATE_KEY, _State)
        if s is None:
            return np.zeros(len(rows), dtype=np.int64)
        prep = s.prepared
        infos = self._handle.snapshot.infos
        if not prep.local_only:
            return np.fromiter(
                (self._find(s, (info := infos[r]).name, info.labels) for r in rows.tolist()),
                dtype=np.int64,
                count=len(rows),
            )
        domains = TopologyDomains.of(self._handle.snapshot)
        ids = domains.column(HOSTNAME_LABEL)[rows]
        ok = np.ones(len(rows), dtype=np.bool_)
        index = self.binder.index()
        for pvc, size, idx in prep.to_match:
            good = self._hosts.good_rows(index, idx, pvc, size, domains)
            ok &= good[ids]
        out = np.where(ok, 0, _BIND_CONFLICT).astype(np.int64)
        if len(prep.to_match) > 1:
            # Several claims may compete for one node's PVs: the full search on the candidates.
            for i in np.flatnonzero(ok).tolist():
                info = infos[int(rows[i])]
                out[i] = self._find(s, info.name, info.labels)
        return out

    def _find(self, s: _State, node_name: str, labels: dict[str, str]) -> int:
        try:
            volumes, reasons = self.binder.find(s.prepared, node_name, labels)
        except ProvisionError as exc:
            s.error = str(exc)
            # FindPodVolumes returned an error (not a reason): upstream counts it per node.
            self._handle.metrics.observe_volume_stage_error("predicate")
            return _ERROR
        if reasons:
            return sum(bit for bit, reason in _REASON_BITS if reason in reasons)
        s.by_node[node_name] = volumes
        return 0

    def explain(self, state: CycleState, pod: PodInfo, code: int) -> Status:
        if code & _ERROR:
            s = state.read_optional(_STATE_KEY, _State)
            return Status(Code.ERROR, s.error if s is not None else "volume binding failed")
        return Status.unresolvable(*(reason for bit, reason in _REASON_BITS if code & bit))

    # --- Score (VolumeCapacityPriority is off) -----------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        return SKIP

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        return 0, SUCCESS

    # --- Reserve / Unreserve ------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        s = state.read_optional(_STATE_KEY, _State)
        if s is None:
            return SUCCESS
        volumes = s.by_node.get(node_name)
        if volumes is None:
            # Admitted by hostname alone (filter_batch): the claims' PVs on it, as Filter would find them.
            info = self._handle.snapshot.by_name.get(node_name)
            code = self._find(s, node_name, info.labels) if info is not None else _ERROR
            if code:
                return self.explain(state, pod, code)
            volumes = s.by_node[node_name]
        s.all_bound = self.binder.all_bound(s.claims)
        if not s.all_bound:
            s.assumed = self.binder.assume(volumes, node_name)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        s = state.read_optional(_STATE_KEY, _State)
        if s is not None and s.assumed is not None:
            self.binder.revert(s.assumed)
            s.assumed = None

    # --- PreBind -----------------------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str, plan: BindingPlan) -> Status:
        s = state.read_optional(_STATE_KEY, _State)
        if s is None or s.all_bound:
            return SUCCESS
        volumes = s.assumed
        if volumes is None:
            return Status(Code.ERROR, f'no pod volumes found for node "{node_name}"')
        # BindPodVolumes: every way it fails (a refused write included) counts once as "bind".
        try:
            status = await self._bind_volumes(pod, node_name, volumes)
        except Exception:
            self._handle.metrics.observe_volume_stage_error("bind")
            raise
        if not status.ok:
            self._handle.metrics.observe_volume_stage_error("bind")
        return status

    async def _bind_volumes(self, pod: PodInfo, node_name: str, volumes: PodVolumes) -> Status:
        writer = self._handle.binder
        if not isinstance(writer, VolumeBindingWriter):
            return Status(
                Code.ERROR, "binding volumes: this scheduler's output cannot write PersistentVolumes"
            )
        pvs, pvcs = self.binder.pvs, self.binder.pvcs
        # bindAPIUpdate: the PVs first, then the claims to provision; each written object is assumed.
        pv_store = self._handle.objects(PERSISTENT_VOLUMES)
        pvc_store = self._handle.objects(PERSISTENT_VOLUME_CLAIMS)
        for b in volumes.static:
            name = b.pv.metadata.name
            before = pv_store.get(name)
            written = await writer.update_persistent_volume(b.pv)
            pvs.assume(name, written, made_from=before)
        for claim in volumes.provisions:
            key = f"{claim.metadata.namespace}/{claim.metadata.name}"
            before_claim = pvc_store.get(key)
            written_claim = await writer.update_persistent_volume_claim(claim)
            pvcs.assume(key, written_claim, made_from=before_claim)
        try:
            done = await writer.wait_for_volume_binding(
                lambda: self._bindings_done(pod, node_name, volumes), float(self.args.bind_timeout_seconds)
            )
        except _BindingError as exc:
            return Status(Code.ERROR, f"binding volumes: {exc}")
        if not done:
            return Status(Code.ERROR, f"binding volumes: {ERR_TIMEOUT}")
        return SUCCESS

    def _bindings_done(self, pod: PodInfo, node_name: str, volumes: PodVolumes) -> bool:
        """``checkBindings``: False to wait on, True when the PV controller finished, raises when it
        undid the scheduler's decision (the pod is then retried) or the pod is gone."""
        info = self._handle.snapshot.by_name.get(node_name)
        if info is None:
            raise _BindingError(f'failed to get node "{node_name}": node "{node_name}" not found')
        if pod.uid not in info.pods:
            # Deleted while we wait: the cache forgot the assumed pod.
            raise _BindingError(f'pod does not exist any more: pods "{pod.pod.metadata.name}" not found')
        labels = info.labels
        pv_store = self._handle.objects(PERSISTENT_VOLUMES)
        pvc_store = self._handle.objects(PERSISTENT_VOLUME_CLAIMS)
        for b in volumes.static:
            name = b.pv.metadata.name
            if name not in pv_store:
                raise _BindingError(f"failed to check binding: {pv_not_found(name)}")
            pv = self.binder.pvs.latest_watched(name)
            if pv is None:
                return False  # our write has not come back through the watch yet
            key = f"{b.pvc.metadata.namespace}/{b.pvc.metadata.name}"
            pvc = pvc_store.get(key)
            if pvc is None:
                raise _BindingError(f"failed to check binding: {claim_not_found(b.pvc.metadata.name)}")
            ref = pv.spec.claim_ref
            if ref is None or not ref.uid:
                raise _BindingError(f'ClaimRef got reset for pv "{name}"')
            if not pv_node_affinity_matches(pv, labels):
                raise _BindingError(
                    f'pv "{name}" node affinity doesn\'t match node "{node_name}": '
                    "no matching NodeSelectorTerms"
                )
            if not claim_fully_bound(pvc):
                return False
        for claim in volumes.provisions:
            key = f"{claim.metadata.namespace}/{claim.metadata.name}"
            if key not in pvc_store:
                raise _BindingError(f"failed to check binding: {claim_not_found(claim.metadata.name)}")
            current = self.binder.pvcs.latest_watched(key)
            if current is None:
                return False
            annotations = current.metadata.annotations
            if not annotations:
                raise _BindingError(f'selectedNode annotation reset for PVC "{key}"')
            if annotations.get(ANN_SELECTED_NODE) != node_name:
                # The provisioner removes the annotation when it cannot provision: try again.
                raise _BindingError(f'provisioning failed for PVC "{key}"')
            if current.spec.volume_name:
                pv = pv_store.get(current.spec.volume_name)
                if pv is None:
                    return False  # not seen yet
                if not pv_node_affinity_matches(pv, labels):
                    raise _BindingError(
                        f'pv "{pv.metadata.name}" node affinity doesn\'t match node "{node_name}": '
                        "no matching NodeSelectorTerms"
                    )
            if not claim_fully_bound(current):
                return False
        return True

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            *_events("StorageClass", ActionType.ADD, ActionType.UPDATE),
            *_events("PersistentVolumeClaim", ActionType.ADD, ActionType.UPDATE),
            *_events("PersistentVolume", ActionType.ADD, ActionType.UPDATE),
            ClusterEventWithHint(NODE_ADD),
            ClusterEventWithHint(NODE_UPDATE),
            *_events("CSINode", ActionType.ADD, ActionType.UPDATE),
            *_events("CSIDriver", ActionType.ADD, ActionType.UPDATE),
            *_events("CSIStorageCapacity", ActionType.ADD, ActionType.UPDATE),
        ]


def _pinned_hostnames(required: Any) -> frozenset[str] | None:
    """``GetLocalPersistentVolumeNodeNames``: per term the intersection of its ``hostname In`` values,
    united over the terms (other requirements are left to Filter)."""
    if required is None:
        return None
    hosts: set[str] = set()
    for term in required.node_selector_terms:
        term_hosts: set[str] | None = None
        for req in term.match_expressions:
            if req.key == "kubernetes.io/hostname" and req.operator == "In":
                term_hosts = set(req.values) if term_hosts is None else term_hosts & set(req.values)
        hosts |= term_hosts or set()
    return frozenset(hosts)


if TYPE_CHECKING:
    _pre_filter: type[PreFilterPlugin] = VolumeBinding
    _filter: type[BatchFilterPlugin] = VolumeBinding
    _pre_score: type[PreScorePlugin] = VolumeBinding
    _score: type[ScorePlugin] = VolumeBinding
    _reserve: type[ReservePlugin] = VolumeBinding
    _pre_bind: type[PreBindPlugin] = VolumeBinding
    _enqueue_extensions: type[EnqueueExtensions] = VolumeBinding
