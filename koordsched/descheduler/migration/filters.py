"""Which pods the MigrationController may migrate (spec 7.2 "Filters").

Non-retryable rules, checked when a plugin asks (``Evictor.filter``) and again at arbitration
(a job failing one is marked Failed): the eviction-cost annotation, Koordinator's default
evictor rules (DaemonSet and mirror pods, bare pods, system-critical pods, the priority
threshold, the label selector), the namespaces, and the expected-replicas rule. Pods whose
``koordinator.sh/evict-*`` annotations ask for eviction bypass them, as in Koordinator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from koordsched.api.core import Pod
from koordsched.api.selectors import match_label_selector
from koordsched.descheduler.migration.args import MigrationControllerArgs, scaled
from koordsched.descheduler.migration.node_selector import parse_node_selector, selector_matches

#: ``SystemCriticalPriority``: pods at or above it are system-critical.
SYSTEM_CRITICAL_PRIORITY: Final = 2_000_000_000
MAX_INT32: Final = 2**31 - 1
ANNOTATION_EVICTION_COST: Final = "scheduling.koordinator.sh/eviction-cost"
ANNOTATION_MIRROR: Final = "kubernetes.io/config.mirror"
#: Pods asking to be evicted (``descheduler.alpha.kubernetes.io/evict``) bypass the filters.
ANNOTATION_EVICT: Final = "descheduler.alpha.kubernetes.io/evict"


@dataclass(frozen=True)
class Workload:
    kind: str
    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


def workload_of(pod: Pod) -> Workload | None:
    """The pod's controller (the ownerReference with ``controller: true``, else the first)."""
    refs = pod.metadata.owner_references
    if not refs:
        return None
    ref = next((r for r in refs if r.controller), refs[0])
    return Workload(ref.kind, pod.metadata.namespace, ref.name, ref.uid)


def default_max_migrating(replicas: int) -> int:
    """Unset per-workload limits: >10 replicas 10 %, 4-10 replicas 2, else 1; never 0."""
    if replicas > 10:
        return max(1, replicas * 10 // 100)
    if replicas >= 4:
        return 2
    return 1


class PodFilter:
    """The non-retryable rules of one MigrationController's args."""

    def __init__(
        self,
        args: MigrationControllerArgs,
        priority_of_class: Callable[[str], int | None],
        replicas_of: Callable[[Workload], int | None],
        node_labels: Callable[[str], dict[str, str] | None] | None = None,
        fits_elsewhere: Callable[[Pod], bool] | None = None,
    ) -> None:
        self.args = args
        self.replicas_of = replicas_of
        self.node_labels = node_labels
        self.fits_elsewhere = fits_elsewhere
        # Validation parsed it once already; an error here cannot happen.
        self._node_terms = parse_node_selector(args.node_selector) if args.node_selector else []
        self._threshold: int | None = None
        pt = args.priority_threshold
        if pt is not None:
            self._threshold = (
                pt.value if pt.value is not None else (priority_of_class(pt.name) if pt.name else None)
            )

    def refusal(self, pod: Pod) -> str | None:
        """Why ``pod`` may not be migrated, or None when it may."""
        if ANNOTATION_EVICT in pod.metadata.annotations:
            return None
        a = self.args
        cost = pod.metadata.annotations.get(ANNOTATION_EVICTION_COST)
        if cost is not None and cost.strip() == str(MAX_INT32):
            return f"pod has annotation {ANNOTATION_EVICTION_COST}={MAX_INT32}"
        if ANNOTATION_MIRROR in pod.metadata.annotations:
            return "pod is a mirror pod"
        w = workload_of(pod)
        if w is not None and w.kind == "DaemonSet":
            return "pod is a DaemonSet pod"
        if (
            w is None
            and not a.evict_all_bare_pods
            and not (a.evict_failed_bare_pods and pod.status.phase == "Failed")
        ):
            return "pod does not have any ownerRefs"
        volumes = pod.spec.volumes
        if not a.evict_local_storage_pods and any(v.empty_dir or v.host_path for v in volumes):
            return "pod has local storage and descheduler is not configured with evictLocalStoragePods"
        if a.ignore_pvc_pods and any(v.persistent_volume_claim for v in volumes):
            return "pod has a PVC and descheduler is configured to ignore PVC pods"
        priority = pod.spec.priority or 0
        if not a.evict_system_critical_pods:
            if priority >= SYSTEM_CRITICAL_PRIORITY:
                return "pod has system critical priority"
            if self._threshold is not None and priority >= self._threshold:
                return f"pod has higher priority than specified priority class threshold ({self._threshold})"
        if a.label_selector is not None and not match_label_selector(a.label_selector, pod.metadata.labels):
            return "pod labels do not match the labelSelector filter"
        if a.namespaces is not None and not a.namespaces.admits(pod.metadata.namespace):
            return f"namespace {pod.metadata.namespace} is not allowed"
        if self._node_terms and self.node_labels is not None:
            labels = self.node_labels(pod.spec.node_name)
            if labels is None or not selector_matches(self._node_terms, labels):
                return f"node {pod.spec.node_name} does not match nodeSelector {a.node_selector!r}"
        if w is not None and not a.skip_check_expected_replicas:
            replicas = self.replicas_of(w)
            if replicas is not None:
                if replicas <= 1:
                    return f"workload {w.key} has only {replicas} replica"
                if replicas == self.max_migrating(w, replicas) or replicas == self.max_unavailable(
                    w, replicas
                ):
                    return f"workload {w.key} would have every replica migrating or unavailable"
        return None

    def fit_refusal(self, pod: Pod) -> str | None:
        """``nodeFit``: the pod must fit some other node now (asked when a plugin evicts)."""
        if self.args.node_fit and self.fits_elsewhere is not None and not self.fits_elsewhere(pod):
            return "pod does not fit on any other node"
        return None

    def max_migrating(self, w: Workload, replicas: int) -> int:
        v = self.args.max_migrating_per_workload
        if v is None:
            return default_max_migrating(replicas)
        n = scaled(v, replicas, round_up=True)
        return n if n > 0 or isinstance(v, int) else 1

    def max_unavailable(self, w: Workload, replicas: int) -> int:
        v = self.args.max_unavailable_per_workload
        if v is None:
            return default_max_migrating(replicas)
        n = scaled(v, replicas, round_up=True)
        return n if n > 0 or isinstance(v, int) else 1
