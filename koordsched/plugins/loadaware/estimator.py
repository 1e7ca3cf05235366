"""LoadAware's default estimator (spec 4.6 "Estimator"): what a pod will probably use.

For each weighted resource R the pod's priority class (with its default, spec 1.1) picks
the name the pod asks under: ``cpu`` becomes ``kubernetes.io/batch-cpu`` for koord-batch and
``kubernetes.io/mid-cpu`` for koord-mid (memory likewise). With q = max(limit, request) of
that name, the estimate is ``round(q * factor_R / 100)`` (Go's ``math.Round``, halves away
from zero), capped at a positive limit; a pod asking nothing gets 250m cpu or 200Mi memory
(batch names too), any other resource 0. Estimates are keyed by R, so a batch pod's
batch-cpu estimate counts as cpu. Amounts are canonical integers: millicores for ``cpu``,
``Value()`` otherwise (batch-cpu is already an integer of millicores).
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Hashable, Mapping
from typing import Any, Final

from koordsched.api.core import Pod
from koordsched.api.koordinator import BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY
from koordsched.api.priority import PRIORITY_BATCH, PRIORITY_MID, priority_class_with_default, resources_key
from koordsched.api.quantity import QuantityError
from koordsched.api.resources import pod_limits
from koordsched.framework.types import PodInfo

log = logging.getLogger(__name__)

#: ``DefaultMilliCPURequest``: 0.25 core.
DEFAULT_MILLI_CPU: Final = 250
#: ``DefaultMemoryRequest``: 200Mi.
DEFAULT_MEMORY: Final = 200 * 1024 * 1024

_TRANSLATIONS: Final[Mapping[str, Mapping[str, str]]] = {
    PRIORITY_BATCH: {"cpu": BATCH_CPU, "memory": BATCH_MEMORY},
    PRIORITY_MID: {"cpu": MID_CPU, "memory": MID_MEMORY},
}
_INSTANCES = itertools.count()
_PRIORITY_KEY: Final = "LoadAwareScheduling/priorityClass"


def pod_priority_class(pod: PodInfo) -> str:
    """The pod's priority class with its default, computed once per pod object (its labels
    and spec may change when a bound pod is updated, and the new object is a new key)."""
    cached: tuple[Any, str] | None = pod.extra.get(_PRIORITY_KEY)
    if cached is not None and cached[0] is pod.pod:
        return cached[1]
    pc = priority_class_with_default(pod.pod, pod.priority)
    pod.extra[_PRIORITY_KEY] = (pod.pod, pc)
    return pc


def go_round(x: float) -> int:
    """Go's ``math.Round``: the nearest integer, halves away from zero."""
    t = math.trunc(x)
    if abs(x - t) >= 0.5:
        t += 1 if x > 0 else -1
    return t


def translate(priority_class: str, name: str) -> str:
    """``TranslateResourceNameByPriorityClass``: the name a pod of the class asks ``name`` under."""
    return _TRANSLATIONS.get(priority_class, {}).get(name, name)


def estimate_resource(requests: Mapping[str, int], limits: Mapping[str, int], name: str, factor: int) -> int:
    """``estimatedUsedByResource`` for the (already translated) resource ``name``."""
    limit = limits.get(name, 0)
    q = max(limit, requests.get(name, 0))
    if q == 0:
        if name in ("cpu", BATCH_CPU):
            return DEFAULT_MILLI_CPU
        if name in ("memory", BATCH_MEMORY):
            return DEFAULT_MEMORY
        return 0
    estimated = go_round(float(q) * float(factor) / 100)
    if limit > 0 and estimated > limit:
        estimated = limit
    return estimated


#: Distinct (priority class, resources) estimates an Estimator keeps before starting afresh.
MAX_ESTIMATES: Final = 4096
#: The most one pod is estimated at (2**53: a thousand such pods on a node still sum within int64).
_MAX_ESTIMATE: Final = 2**53


class Estimator:
    """Estimates per pod, kept on the PodInfo so a pod is estimated once per object, and per
    priority class and resources as written, so a workload's pods are estimated once."""

    def __init__(self, weights: Mapping[str, int], factors: Mapping[str, int]) -> None:
        # Validation guarantees a factor for every weighted resource.
        self._factors = {name: factors[name] for name in weights}
        self._key = f"LoadAwareScheduling/estimate/{next(_INSTANCES)}"
        self._by_spec: dict[Hashable, dict[str, int]] = {}

    def estimate(self, pod: PodInfo) -> dict[str, int]:
        """Resource (as weighted, untranslated) -> estimated usage. Shared: do not modify."""
        cached: tuple[Pod, dict[str, int]] | None = pod.extra.get(self._key)
        if cached is not None and cached[0] is pod.pod:
            return cached[1]
        pc = pod_priority_class(pod)
        # The requests are PodInfo's (derived from the same fields), keyed too so that they rule.
        spec_key = (pc, resources_key(pod.pod), tuple(pod.requests.items()))
        out = self._by_spec.get(spec_key)
        if out is None:
            out = self._compute(pod, pc)
            if len(self._by_spec) >= MAX_ESTIMATES:
                self._by_spec.clear()
            self._by_spec[spec_key] = out
        pod.extra[self._key] = (pod.pod, out)
        return out

    def _compute(self, pod: PodInfo, pc: str) -> dict[str, int]:
        try:
            limits = pod_limits(pod.pod)
        except QuantityError as err:
            # PodInfo parsed the same quantities already, so this is not expected; be safe anyway.
            log.error("pod %s: invalid limits, estimated from requests only: %s", pod.key, err)
            limits = {}
        # A bound pod's limit may be beyond int64 (requests are held within it, limits are not):
        # its estimate is held to a range whose per-node sums stay within the int64 rows.
        return {
            name: min(estimate_resource(pod.requests, limits, translate(pc, name), factor), _MAX_ESTIMATE)
            for name, factor in self._factors.items()
        }
