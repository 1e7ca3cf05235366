"""The simulator's stand-in for the PV controller and the external provisioner.

In a cluster the scheduler only records its volume decisions (a PV's ``claimRef``, a claim's
``volume.kubernetes.io/selected-node``) and the PV controller (with a provisioner for new
volumes) completes the binding, which the scheduler waits for in PreBind. The simulator has
no such controllers, so this module plays them, at once and always successfully:

* on input, bindings a PV and its claim already agree on (the claim names the PV, or the PV's
  ``claimRef`` names the claim) are completed as the PV controller would (``bind-completed``,
  phases); an unclaimed PV without a phase is ``Available``;
* a PV the scheduler gave a ``claimRef`` binds its claim;
* a claim the scheduler gave a selected node gets a new PV (``pvc-<claim uid>``, the size asked)
  bound to it;
* a pending pod's ephemeral volume gets its claim (``<pod>-<volume>``, owned by the pod) from the
  volume's template, as the ephemeral-volume controller makes it.

Claims of an Immediate class that are unbound in the input stay unbound (the PV controller,
not the scheduler, binds them, and pods using them are reported unschedulable, as they are
until then in a cluster). The result's ``volumes`` lists every claim at the end of the run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from koordsched.api.core import ObjectMeta, Pod
from koordsched.api.storage import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    ClaimReference,
    PersistentVolume,
    PersistentVolumeClaim,
    PersistentVolumeSpec,
    PersistentVolumeStatus,
    claim_class,
    ephemeral_claim_name,
    is_bound_to_claim,
)
from koordsched.backends.sim.loader import Cluster, LoadedObject

PV_KIND = "PersistentVolume"
PVC_KIND = "PersistentVolumeClaim"

#: Called with (kind, key, object) to hand an object to the scheduler, as a watch event would.
Deliver = Callable[[str, str, Any], None]


@dataclass
class VolumeResult:
    """A claim at the end of the run: the PV it is bound to and the node of the pod using it."""

    claim: str
    pv: str | None
    node: str | None
    status: str  # "Bound" | "Pending"
    #: The PV was made for the claim during the run (dynamic provisioning).
    provisioned: bool = False


def _bound_claim(pvc: PersistentVolumeClaim, pv_name: str) -> PersistentVolumeClaim:
    meta = pvc.metadata
    annotations = {**meta.annotations, ANN_BIND_COMPLETED: "yes"}
    annotations.setdefault(ANN_BOUND_BY_CONTROLLER, "yes")
    return msgspec.structs.replace(
        pvc,
        metadata=msgspec.structs.replace(meta, annotations=annotations),
        spec=msgspec.structs.replace(pvc.spec, volume_name=pv_name),
        status=msgspec.structs.replace(pvc.status, phase="Bound"),
    )


def _claim_ref(pvc: PersistentVolumeClaim) -> ClaimReference:
    m = pvc.metadata
    return ClaimReference(kind=PVC_KIND, namespace=m.namespace, name=m.name, uid=m.uid, api_version="v1")


def _with_phase(pv: PersistentVolume, phase: str) -> PersistentVolume:
    if pv.status.phase == phase:
        return pv
    return msgspec.structs.replace(pv, status=PersistentVolumeStatus(phase=phase))


def _ephemeral_claims(cluster: Cluster) -> None:
    """The ephemeral-volume controller's part: a claim ``<pod>-<volume>`` from each pending pod's
    ``ephemeral.volumeClaimTemplate``, owned by the pod, unless the input has one by that name."""
    have = {o.key for o in cluster.objects if o.kind == PVC_KIND}
    for o in list(cluster.objects):
        if o.kind != "Pod" or o.obj.spec.node_name:
            continue
        pod: Pod = o.obj
        for v in pod.spec.volumes:
            template = v.ephemeral.volume_claim_template if v.ephemeral is not None else None
            if template is None:
                continue
            ns, name = pod.metadata.namespace, ephemeral_claim_name(pod.metadata.name, v.name)
            if f"{ns}/{name}" in have:
                continue
            meta = template.get("metadata") or {}
            try:
                claim = msgspec.convert(
                    {
                        "metadata": {
                            "name": name,
                            "namespace": ns,
                            "uid": f"uid-{ns}-{name}",
                            "labels": meta.get("labels") or {},
                            "annotations": meta.get("annotations") or {},
                            "ownerReferences": [
                                {
                                    "apiVersion": "v1",
                                    "kind": "Pod",
                                    "name": pod.metadata.name,
                                    "uid": pod.metadata.uid,
                                    "controller": True,
                                }
                            ],
                        },
                        "spec": template.get("spec") or {},
                    },
                    PersistentVolumeClaim,
                )
            except msgspec.ValidationError as exc:
                cluster.warnings.append(
                    f"{o.origin} (Pod {o.key}): volumes[{v.name}].ephemeral.volumeClaimTemplate: {exc}; "
                    "no claim is made for it"
                )
                continue
            have.add(f"{ns}/{name}")
            claim_key = f"{ns}/{name}"
            cluster.objects.append(LoadedObject(PVC_KIND, claim_key, claim, "object", o.source, o.position))


def settle_input(cluster: Cluster) -> None:
    """Complete, in place, the bindings the input's PVs and claims already agree on (after making
    the claims of pods' ephemeral volumes, as the ephemeral-volume controller would)."""
    _ephemeral_claims(cluster)
    pvs = {o.key: o for o in cluster.objects if o.kind == PV_KIND}
    claims = {o.key: o for o in cluster.objects if o.kind == PVC_KIND}
    for o in claims.values():
        pvc: PersistentVolumeClaim = o.obj
        pv_obj = pvs.get(pvc.spec.volume_name) if pvc.spec.volume_name else None
        if pv_obj is None:
            continue
        pv: PersistentVolume = pv_obj.obj
        if pv.spec.claim_ref is None:
            pv = msgspec.structs.replace(pv, spec=msgspec.structs.replace(pv.spec, claim_ref=_claim_ref(pvc)))
        if is_bound_to_claim(pv, pvc):
            pv_obj.obj = _with_phase(pv, "Bound")
            if ANN_BIND_COMPLETED not in pvc.metadata.annotations or pvc.status.phase != "Bound":
                o.obj = _bound_claim(pvc, pv.metadata.name)
    for pv_obj in pvs.values():
        pv = pv_obj.obj
        ref = pv.spec.claim_ref
        if ref is None:
            if not pv.status.phase:
                pv_obj.obj = _with_phase(pv, "Available")
            continue
        claim_obj = claims.get(f"{ref.namespace}/{ref.name}")
        if claim_obj is None:
            continue  # reserved for a claim that does not exist (yet): stays as it is
        pvc = claim_obj.obj
        if not pvc.spec.volume_name and is_bound_to_claim(pv, pvc):
            claim_obj.obj = _bound_claim(pvc, pv.metadata.name)
            pv_obj.obj = _with_phase(pv, "Bound")


class SimVolumeController:
    """Plays the API server's PV/PVC updates and the controllers that answer them."""

    def __init__(self, deliver: Deliver, objects: Callable[[str], Mapping[str, Any]]) -> None:
        self._deliver = deliver
        self._objects = objects
        #: PVs this run provisioned.
        self.provisioned: set[str] = set()
        self.writes = 0

    def update_pv(self, pv: PersistentVolume) -> PersistentVolume:
        name = pv.metadata.name
        if name not in self._objects(PV_KIND):
            raise LookupError(f'persistentvolumes "{name}" not found')
        self.writes += 1
        ref = pv.spec.claim_ref
        claim = self._objects(PVC_KIND).get(f"{ref.namespace}/{ref.name}") if ref is not None else None
        if claim is None or not is_bound_to_claim(pv, claim):
            self._deliver(PV_KIND, name, pv)
            return pv
        pv = _with_phase(pv, "Bound")
        self._deliver(PV_KIND, name, pv)
        self._deliver(PVC_KIND, f"{ref.namespace}/{ref.name}", _bound_claim(claim, name))  # type: ignore[union-attr]
        return pv

    def update_pvc(self, pvc: PersistentVolumeClaim) -> PersistentVolumeClaim:
        key = f"{pvc.metadata.namespace}/{pvc.metadata.name}"
        if key not in self._objects(PVC_KIND):
            raise LookupError(f'persistentvolumeclaims "{pvc.metadata.name}" not found')
        self.writes += 1
        self._deliver(PVC_KIND, key, pvc)
        if ANN_SELECTED_NODE not in pvc.metadata.annotations or pvc.spec.volume_name:
            return pvc
        # The provisioner makes a volume of the size asked; the PV controller binds the two.
        name = f"pvc-{pvc.metadata.uid or key.replace('/', '-')}"
        pv = PersistentVolume(
            metadata=ObjectMeta(name=name, annotations={ANN_BOUND_BY_CONTROLLER: "yes"}),
            spec=PersistentVolumeSpec(
                capacity=dict(pvc.spec.resources.requests),
                access_modes=list(pvc.spec.access_modes),
                claim_ref=_claim_ref(pvc),
                storage_class_name=claim_class(pvc),
                volume_mode=pvc.spec.volume_mode,
            ),
            status=PersistentVolumeStatus(phase="Bound"),
        )
        self.provisioned.add(name)
        self._deliver(PV_KIND, name, pv)
        self._deliver(PVC_KIND, key, _bound_claim(pvc, name))
        return pvc


def volume_results(
    claims: Mapping[str, PersistentVolumeClaim], pods: Mapping[str, Pod], provisioned: set[str]
) -> list[VolumeResult]:
    """Every claim, sorted by key, with its PV and the node of a bound pod using it."""
    node_of: dict[str, str] = {}
    for pod in pods.values():
        if not pod.spec.node_name:
            continue
        ns = pod.metadata.namespace
        for v in pod.spec.volumes:
            if v.persistent_volume_claim is not None:
                node_of.setdefault(f"{ns}/{v.persistent_volume_claim.claim_name}", pod.spec.node_name)
            elif v.ephemeral is not None:
                node_of.setdefault(
                    f"{ns}/{ephemeral_claim_name(pod.metadata.name, v.name)}", pod.spec.node_name
                )
    out = []
    for key in sorted(claims):
        pvc = claims[key]
        pv = pvc.spec.volume_name or None
        bound = pv is not None and ANN_BIND_COMPLETED in pvc.metadata.annotations
        out.append(
            VolumeResult(
                claim=key,
                pv=pv,
                node=node_of.get(key),
                status="Bound" if bound else "Pending",
                provisioned=pv is not None and pv in provisioned,
            )
        )
    return out
