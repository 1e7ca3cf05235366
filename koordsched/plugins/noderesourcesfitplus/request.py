"""What NodeResourcesFitPlus (and ScarceResourceAvoidance) read from a pod.

Two different sums, as Koordinator computes them:

* which resources the pod requests: the names with a value > 0 in ``PodRequests`` (plain
  requests: a container without a cpu request does not make cpu a requested name), kept to
  the names the scheduler tracks (cpu, memory, ephemeral-storage, scalar resources);
* how much of each the pod adds to a node: containers summed with the non-zero defaults
  (100m cpu, 200Mi memory when a container names none), the larger of that and each init
  container alone (sidecars included: v1.6 predates their special case), plus overhead.
  Overhead is added as ``Quantity.Value()``, so a cpu overhead counts whole cores, rounded
  up, as millicores ("250m" adds 1): reproduced as is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from koordsched.api.core import Container, Pod
from koordsched.api.quantity import QuantityError, int_value, milli_value
from koordsched.api.resources import container_requests, is_scalar_resource_name
from koordsched.framework.snapshot import CPU, EPHEMERAL_STORAGE, MEMORY
from koordsched.framework.types import PodInfo
from koordsched.plugins.noderesources.nonzero import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST

_EXTRA_KEY = "noderesourcesfitplus/request"


def is_tracked(name: str) -> bool:
    """A resource the scheduler's ``framework.Resource`` keeps (``pods`` aside)."""
    return name in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource_name(name)


def requested_names(pod: PodInfo) -> list[str]:
    """``fitsPodRequestName``: tracked resources with a value > 0 in the pod's requests."""
    return [name for name, amount in pod.requests.items() if amount > 0 and is_tracked(name)]


def _requests(c: Container) -> dict[str, int]:
    try:
        return container_requests(c)
    except QuantityError:
        return {}


def _nonzero(name: str, reqs: Mapping[str, int]) -> int:
    """``GetNonzeroRequestForResource``: a missing cpu or memory gets the default, an explicit 0 stays."""
    if name == CPU:
        return reqs.get(CPU, DEFAULT_MILLI_CPU_REQUEST)
    if name == MEMORY:
        return reqs.get(MEMORY, DEFAULT_MEMORY_REQUEST)
    return reqs.get(name, 0)


def pod_amount(pod: Pod, name: str) -> int:
    """``calculatePodResourceRequest`` for one resource."""
    spec = pod.spec
    total = sum(_nonzero(name, _requests(c)) for c in spec.containers)
    for c in spec.init_containers:
        total = max(total, _nonzero(name, _requests(c)))
    q = spec.overhead.get(name)
    if q is not None:
        # Koordinator adds overhead with Quantity.Value() for every resource, so a cpu overhead
        # of 250m counts as 1 millicore; cpu is counted in millicores here (docs/compatibility.md).
        with contextlib.suppress(QuantityError):
            total += milli_value(q) if name == CPU else int_value(q)
    return total


def pod_request(pod: PodInfo) -> dict[str, int]:
    """Requested name -> the amount it adds to a node, cached on the PodInfo (its spec does not change)."""
    cached: dict[str, int] | None = pod.extra.get(_EXTRA_KEY)
    if cached is None:
        cached = {name: pod_amount(pod.pod, name) for name in requested_names(pod)}
        pod.extra[_EXTRA_KEY] = cached
    return cached
