"""A pod's claims, sorted as upstream's ``podHasPVCs`` and ``GetPodVolumeClaims`` sort them.

* bound: the PV controller completed the binding (a volume name and ``bind-completed``);
* delayed: not bound, the class waits for the first consumer and no volume is named: the
  scheduler picks a PV for the chosen node, or has one provisioned there;
* immediate: not bound otherwise (an Immediate class, no class, a claim pre-bound to a PV by
  name): the PV controller binds those, and the pod waits for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from koordsched.api.core import Pod
from koordsched.api.storage import (
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    PersistentVolumeClaim,
    StorageClass,
    claim_class,
    claim_fully_bound,
    claim_not_found,
    ephemeral_claim_name,
)


@dataclass
class PodClaims:
    bound: list[PersistentVolumeClaim] = field(default_factory=list)
    delayed: list[PersistentVolumeClaim] = field(default_factory=list)
    immediate: list[PersistentVolumeClaim] = field(default_factory=list)


class ClaimError(Exception):
    """The pod cannot be scheduled because of one of its claims (UnschedulableAndUnresolvable)."""


def claim_names(pod: Pod) -> list[tuple[str, bool]]:
    """(claim name, is ephemeral) for each of the pod's volumes backed by a claim."""
    out = []
    for v in pod.spec.volumes:
        if v.persistent_volume_claim is not None:
            out.append((v.persistent_volume_claim.claim_name, False))
        elif v.ephemeral is not None:
            out.append((ephemeral_claim_name(pod.metadata.name, v.name), True))
    return out


def _owner_error(pod: Pod, pvc: PersistentVolumeClaim) -> str | None:
    for ref in pvc.metadata.owner_references:
        if ref.controller and ref.uid == pod.metadata.uid:
            return None
    return (
        f"PVC {pvc.metadata.namespace}/{pvc.metadata.name} was not created for pod "
        f"{pod.metadata.namespace}/{pod.metadata.name} (pod is not owner)"
    )


def pod_claims(
    pod: Pod,
    names: list[tuple[str, bool]],
    get_claim: Callable[[str], PersistentVolumeClaim | None],
    classes: Mapping[str, StorageClass],
    refusal: Callable[[PersistentVolumeClaim], str | None],
) -> PodClaims:
    """The pod's claims by kind; :class:`ClaimError` with upstream's message for an unusable one.

    ``get_claim`` reads the assume cache (a claim given a selected node by an earlier pod is
    seen with it); ``refusal`` is the claim's own check (a malformed request, say), reported
    on the pod rather than skipped.
    """
    ns = pod.metadata.namespace
    found: list[PersistentVolumeClaim] = []
    for name, ephemeral in names:
        pvc = get_claim(f"{ns}/{name}")
        if pvc is None:
            if ephemeral:
                # Normal right after the pod was created: the ephemeral-volume controller is slower.
                raise ClaimError(
                    f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
                )
            raise ClaimError(claim_not_found(name))
        if pvc.status.phase == "Lost":
            raise ClaimError(
                f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume '
                f'"{pvc.spec.volume_name}"'
            )
        if pvc.metadata.deletion_timestamp is not None:
            raise ClaimError(f'persistentvolumeclaim "{name}" is being deleted')
        if ephemeral:
            err = _owner_error(pod, pvc)
            if err is not None:
                raise ClaimError(err)
        why = refusal(pvc)
        if why is not None:
            raise ClaimError(why)
        found.append(pvc)
    out = PodClaims()
    for pvc in found:
        if claim_fully_bound(pvc):
            out.bound.append(pvc)
            continue
        class_name = claim_class(pvc)
        sc = classes.get(class_name) if class_name else None
        # A class that does not exist binds immediately (upstream's IsDelayBindingMode).
        delayed = sc is not None and sc.volume_binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER
        if delayed and not pvc.spec.volume_name:
            out.delayed.append(pvc)
        else:
            out.immediate.append(pvc)
    return out
