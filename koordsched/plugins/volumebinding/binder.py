"""Upstream's volume binder, the decision half: what a pod's claims need on a node, and the
assumptions Reserve makes (``FindPodVolumes``, ``AssumePodVolumes``, ``RevertAssumedPodVolumes``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import msgspec

from koordsched.api.field_errors import Refused
from koordsched.api.kinds import (
    CSI_DRIVERS,
    CSI_STORAGE_CAPACITIES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
)
from koordsched.api.quantity import QuantityError
from koordsched.api.storage import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    ClaimReference,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    check_persistent_volume_claim,
    claim_class,
    claim_fully_bound,
    claim_request_bytes,
    is_bound_to_claim,
    pv_node_affinity_matches,
)
from koordsched.framework.interface import Handle
from koordsched.framework.objects import version_of
from koordsched.plugins.volumebinding.assume import AssumeCache
from koordsched.plugins.volumebinding.claims import PodClaims
from koordsched.plugins.volumebinding.matching import ClassIndex, PVIndex, find_matching, only_local_pvs_serve
from koordsched.plugins.volumebinding.provisioning import (
    NOT_SUPPORTED_PROVISIONER,
    Provision,
    check_provision,
)

ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"


@dataclass
class Binding:
    pv: PersistentVolume
    pvc: PersistentVolumeClaim


@dataclass
class PodVolumes:
    """What the pod's delayed claims need on one node."""

    static: list[Binding] = field(default_factory=list)
    provisions: list[PersistentVolumeClaim] = field(default_factory=list)


@dataclass
class Prepared:
    """A pod's claims as Filter reads them on every node (worked out once per cycle)."""

    claims: PodClaims
    #: The PVs of the bound claims, None for one that does not exist.
    bound_pvs: list[PersistentVolume | None] = field(default_factory=list)
    #: Delayed claims a provisioner is working on, with the node it was given.
    selected: list[tuple[PersistentVolumeClaim, str]] = field(default_factory=list)
    #: Delayed claims to find a static PV for, smallest request first, with their class's PVs.
    to_match: list[tuple[PersistentVolumeClaim, int, ClassIndex | None]] = field(default_factory=list)
    #: Whether every claim can only be served by local PVs (and nothing else can fail on a node):
    #: a node's hostname then decides (see ``hosts.py``); otherwise every node needs :meth:`find`.
    local_only: bool = False


class VolumeBinder:
    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self.pvs: AssumeCache[PersistentVolume] = AssumeCache(lambda: handle.objects(PERSISTENT_VOLUMES))
        self.pvcs: AssumeCache[PersistentVolumeClaim] = AssumeCache(
            lambda: handle.objects(PERSISTENT_VOLUME_CLAIMS)
        )
        self._index = PVIndex()
        self._index_version: tuple[int | None, int] | None = None
        #: claim key -> (the claim object, why it is refused or None), checked once per object.
        self._refusals: dict[str, tuple[PersistentVolumeClaim, str | None]] = {}

    # --- reading ---------------------------------------------------------------------------------

    def classes(self) -> Mapping[str, StorageClass]:
        return self._handle.objects(STORAGE_CLASSES)

    def refusal(self, pvc: PersistentVolumeClaim) -> str | None:
        key = f"{pvc.metadata.namespace}/{pvc.metadata.name}"
        known = self._refusals.get(key)
        if known is not None and known[0] is pvc:
            return known[1]
        why: str | None = None
        try:
            check_persistent_volume_claim(pvc)
        except (Refused, QuantityError) as exc:
            why = str(exc)
        self._refusals[key] = (pvc, why)
        return why

    def index(self) -> PVIndex:
        """The PVs by class, in step with the store and the assumptions: key by key when the
        changes since the last look are known, else by a walk over every PV."""
        store = self._handle.objects(PERSISTENT_VOLUMES)
        version = version_of(store)
        now = (version, self.pvs.version)
        last = self._index_version
        if version is not None and now == last:
            return self._index
        keys: set[str] | None = None
        if last is not None and version is not None and last[0] is not None:
            changed = getattr(store, "changed_since", None)
            in_store = changed(last[0]) if changed is not None else None
            assumed = self.pvs.changed_since(last[1])
            if in_store is not None and assumed is not None:
                keys = in_store | assumed
        if keys is None:
            self._index.sync(self.pvs.items(), store.__contains__, len(store))
        else:
            for key in keys:
                self._index.resync(key, self.pvs.get(key))
        # Reading the assumed objects may itself drop stale assumptions: key on the result.
        self._index_version = (version_of(store), self.pvs.version)
        return self._index

    def prepare(self, claims: PodClaims) -> Prepared:
        """What Filter reads on every node, worked out once per cycle."""
        prep = Prepared(claims)
        for pvc in claims.bound:
            prep.bound_pvs.append(self.pvs.get(pvc.spec.volume_name))
        to_match = []
        for pvc in claims.delayed:
            selected = pvc.metadata.annotations.get(ANN_SELECTED_NODE)
            if selected is not None:
                prep.selected.append((pvc, selected))
            else:
                to_match.append(pvc)
        if to_match:
            classes = self.index().classes
            # Smallest requests first, so each gets the smallest PV that fits (stable among equals).
            sized = sorted(
                ((claim_request_bytes(c), i, c) for i, c in enumerate(to_match)), key=lambda t: t[:2]
            )
            prep.to_match = [(c, size, classes.get(claim_class(c))) for size, _, c in sized]
            if not prep.bound_pvs and not prep.selected:
                prep.local_only = self._local_only(prep.to_match)
        return prep

    def _local_only(self, to_match: list[tuple[PersistentVolumeClaim, int, ClassIndex | None]]) -> bool:
        for pvc, size, idx in to_match:
            sc = self.classes().get(claim_class(pvc))
            # Without a PV the claim falls to provisioning, node by node, unless its class has no
            # provisioner (then "no PV to bind" wherever it is); a missing class is an error there.
            if sc is None or (sc.provisioner and sc.provisioner != NOT_SUPPORTED_PROVISIONER):
                return False
            if not only_local_pvs_serve(idx, pvc, size):
                return False
        return True

    # --- FindPodVolumes -----------------------------------------------------------------------------

    def find(self, prep: Prepared, node_name: str, labels: dict[str, str]) -> tuple[PodVolumes, list[str]]:
        """What the delayed claims need on the node, and the reasons it does not fit (none: it does).

        Raises ProvisionError for a claim whose class is missing (an error, as upstream).
        """
        out = PodVolumes()
        bound_ok, pvs_found, unbound_ok, space_ok = True, True, True, True
        for pv in prep.bound_pvs:
            if pv is None:
                pvs_found = False
                break
            if not pv_node_affinity_matches(pv, labels):
                bound_ok = False
                break
        if prep.selected or prep.to_match:
            unbound_ok, space_ok = self._find_unbound(prep, node_name, labels, out)
        reasons = []
        if not bound_ok:
            reasons.append(ERR_REASON_NODE_CONFLICT)
        if not unbound_ok:
            reasons.append(ERR_REASON_BIND_CONFLICT)
        if not space_ok:
            reasons.append(ERR_REASON_NOT_ENOUGH_SPACE)
        if not pvs_found:
            reasons.append(ERR_REASON_PV_NOT_EXIST)
        return out, reasons

    def _find_unbound(
        self, prep: Prepared, node_name: str, labels: dict[str, str], out: PodVolumes
    ) -> tuple[bool, bool]:
        to_provision: list[PersistentVolumeClaim] = []
        for pvc, selected in prep.selected:
            if selected != node_name:
                return False, True  # being provisioned for another node
            to_provision.append(pvc)
        satisfied = True
        if prep.to_match:
            chosen: set[str] = set()
            for pvc, size, idx in prep.to_match:
                pv = find_matching(idx, pvc, size, labels, chosen)
                if pv is None:
                    satisfied = False
                    to_provision.append(pvc)
                    continue
                chosen.add(pv.metadata.name)
                out.static.append(Binding(pv, pvc))
        if to_provision:
            h = self._handle
            for pvc in to_provision:
                verdict = check_provision(
                    pvc, labels, self.classes(), h.objects(CSI_DRIVERS), h.objects(CSI_STORAGE_CAPACITIES)
                )
                if verdict is Provision.UNSATISFIED:
                    return False, True
                if verdict is Provision.NO_SPACE:
                    return True, False
            out.provisions.extend(to_provision)
            # Provisioning's verdict replaces the matching's, as upstream.
            satisfied = True
        return satisfied, True

    # --- AssumePodVolumes / Revert ------------------------------------------------------------------

    def all_bound(self, claims: PodClaims) -> bool:
        for pvc in (*claims.bound, *claims.delayed, *claims.immediate):
            current = self.pvcs.get(f"{pvc.metadata.namespace}/{pvc.metadata.name}")
            if current is None or not claim_fully_bound(current):
                return False
        return True

    def assume(self, volumes: PodVolumes, node_name: str) -> PodVolumes:
        """Record the decisions in the assume caches; the objects PreBind will write."""
        out = PodVolumes()
        for b in volumes.static:
            pv = bind_volume_to_claim(b.pv, b.pvc)
            if pv is not b.pv:
                self.pvs.assume(pv.metadata.name, pv)
            out.static.append(Binding(pv, b.pvc))
        for pvc in volumes.provisions:
            meta = pvc.metadata
            claim = msgspec.structs.replace(
                pvc,
                metadata=msgspec.structs.replace(
                    meta, annotations={**meta.annotations, ANN_SELECTED_NODE: node_name}
                ),
            )
            self.pvcs.assume(f"{meta.namespace}/{meta.name}", claim)
            out.provisions.append(claim)
        return out

    def revert(self, volumes: PodVolumes) -> None:
        for b in volumes.static:
            self.pvs.restore(b.pv.metadata.name)
        for pvc in volumes.provisions:
            self.pvcs.restore(f"{pvc.metadata.namespace}/{pvc.metadata.name}")


def bind_volume_to_claim(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> PersistentVolume:
    """``GetBindVolumeToClaim``: the PV with a claimRef naming the claim, marked bound by a controller
    unless a person pre-bound it; the same object when nothing changes."""
    pre_bound = is_bound_to_claim(pv, pvc)
    meta, ref = pv.metadata, pv.spec.claim_ref
    cm = pvc.metadata
    new_ref = ref
    if ref is None or ref.name != cm.name or ref.namespace != cm.namespace or ref.uid != cm.uid:
        new_ref = ClaimReference(
            kind="PersistentVolumeClaim",
            namespace=cm.namespace,
            name=cm.name,
            uid=cm.uid,
            api_version="v1",
            resource_version=cm.resource_version,
        )
    annotations = meta.annotations
    if not pre_bound and ANN_BOUND_BY_CONTROLLER not in annotations:
        annotations = {**annotations, ANN_BOUND_BY_CONTROLLER: "yes"}
    if new_ref is ref and annotations is meta.annotations:
        return pv
    return msgspec.structs.replace(
        pv,
        metadata=msgspec.structs.replace(meta, annotations=annotations),
        spec=msgspec.structs.replace(pv.spec, claim_ref=new_ref),
    )
