"""Orders: source nodes by weighted usage, pods on a source node by what evicting them costs.

Pods are ordered as Koordinator's ``PodSorter``: lower koord priority class first (free, batch,
mid, prod, then none), lower priority, lower Kubernetes QoS, lower Koordinator QoS, lower
``pod-deletion-cost``, lower ``eviction-cost``; then higher usage of the over-used resources
(weighted, ``ResourceUsageScorerPod``: the pod closest to the excess first; pods without a metric
last); then the newest pod first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from koordsched.api.core import Pod
from koordsched.api.priority import (
    PRIORITY_BATCH,
    PRIORITY_FREE,
    PRIORITY_MID,
    PRIORITY_PROD,
    QOS_BE,
    QOS_LS,
    QOS_LSE,
    QOS_LSR,
    QOS_SYSTEM,
    k8s_qos_class,
    priority_class_with_default,
    qos_class_with_default,
)

ANNOTATION_DELETION_COST: Final = "controller.kubernetes.io/pod-deletion-cost"
ANNOTATION_EVICTION_COST: Final = "scheduling.koordinator.sh/eviction-cost"

_PRIORITY_ORDER: Final = {PRIORITY_PROD: 4, PRIORITY_MID: 3, PRIORITY_BATCH: 2, PRIORITY_FREE: 1}
_KOORD_QOS_ORDER: Final = {QOS_SYSTEM: 4, QOS_LSE: 4, QOS_LSR: 3, QOS_LS: 2, QOS_BE: 1}
_K8S_QOS_ORDER: Final = {"Guaranteed": 3, "Burstable": 2, "BestEffort": 1}


def most_requested(used: int, total: int) -> int:
    if total == 0:
        return 0
    return min(used, total) * 1000 // total


def usage_score(usage: Mapping[str, int], total: Mapping[str, int], weights: Mapping[str, int]) -> int:
    """``ResourceUsageScorer``: the weighted mean of used/total per mille."""
    score = weight_sum = 0
    for name, used in usage.items():
        w = weights.get(name, 0)
        score += most_requested(used, total.get(name, 0)) * w
        weight_sum += w
    return score // weight_sum if weight_sum else 0


def pod_usage_score(
    usage: Mapping[str, int], exceeded: Mapping[str, int], weights: Mapping[str, int]
) -> float:
    """``ResourceUsageScorerPod``: per over-used resource, used/excess when below 1, else
    1 + excess/used, so the pod whose usage just covers the excess scores highest (2)."""
    score = 0.0
    weight_sum = 0
    for name, used in usage.items():
        w = weights.get(name, 0)
        excess = exceeded.get(name, 0)
        if excess:
            ratio = used / excess
            score += (1 / ratio + 1 if ratio >= 1 else ratio) * w
        weight_sum += w
    return score / weight_sum if weight_sum else 0.0


def cost(pod: Pod, annotation: str) -> int:
    """An int32 cost annotation; 0 when absent or unreadable (as Go's helpers return)."""
    text = pod.metadata.annotations.get(annotation)
    if text is None:
        return 0
    try:
        value = int(text.strip())
    except ValueError:
        return 0
    return value if -(2**31) <= value < 2**31 else 0


def _created(pod: Pod) -> str:
    return pod.metadata.creation_timestamp or ""


def sort_pods(
    pods: Sequence[Pod],
    metrics: Mapping[tuple[str, str], Mapping[str, int]],
    exceeded: Mapping[str, int],
    weights: Mapping[str, int],
) -> list[Pod]:
    """The eviction order on one over-used node. ``exceeded``: resource -> usage above the
    threshold; only those resources weigh in the usage score."""

    def usage_key(pod: Pod) -> tuple[int, float]:
        m = metrics.get((pod.metadata.namespace, pod.metadata.name))
        if m is None:
            return (1, 0.0)  # no metric: after every pod that has one
        return (0, -pod_usage_score(m, exceeded, weights))

    def key(pod: Pod) -> tuple[object, ...]:
        prio = pod.spec.priority or 0
        return (
            _PRIORITY_ORDER.get(priority_class_with_default(pod, prio), 5),
            prio,
            _K8S_QOS_ORDER.get(k8s_qos_class(pod), 0),
            _KOORD_QOS_ORDER.get(qos_class_with_default(pod), 5),
            cost(pod, ANNOTATION_DELETION_COST),
            cost(pod, ANNOTATION_EVICTION_COST),
            usage_key(pod),
        )

    # Newest first among equals: sort by creation time descending first (stable sorts).
    by_age = sorted(pods, key=_created, reverse=True)
    return sorted(by_age, key=key)
