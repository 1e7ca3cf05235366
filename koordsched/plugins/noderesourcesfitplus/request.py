"""What NodeResourcesFitPlus (and ScarceResourceAvoidance) read from a pod.

Two different sums, as Koordinator computes them:

* which resources the pod requests: the names with a value > 0 in ``PodRequests`` (plain
  requests: a container without a cpu request does not make cpu a requested name), kept to
  the names the scheduler tracks (cpu, memory, ephemeral-storage, scalar resources);
* how much of each the pod adds to a node: containers summed with the non-zero defaults
  (100m cpu, 200Mi memory when a container names none), the larger of that and each init
  container alone (sidecars included: v1.6 predates their special case), plus overhead.
  Koordinator adds overhead as ``Quantity.Value()``, so its cpu overhead "250m" adds 1
  millicore; here cpu overhead counts in millicores like every cpu amount (docs/compatibility.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Mapping
from typing import Final

from koordsched.api.core import Container, Pod
from koordsched.api.priority import resources_key
from koordsched.api.quantity import QuantityError
from koordsched.api.resources import container_requests, is_scalar_resource_name, to_canonical
from koordsched.framework.shared_memo import IdentityMemo
from koordsched.framework.snapshot import CPU, EPHEMERAL_STORAGE, MEMORY
from koordsched.framework.types import PodInfo
from koordsched.plugins.noderesources.nonzero import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST

#: Per (spec, requests) object pair, which pods of one template share (``framework.shared_memo``).
_MEMO: IdentityMemo[dict[str, int]] = IdentityMemo()
#: pod_request's answers by resources as written; a pure function's memo, bounded.
_BY_SPEC: dict[Hashable, dict[str, int]] = {}
_MAX_SPECS: Final = 4096


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
    return _pod_amounts(pod, [name])[name]


def _pod_amounts(pod: Pod, names: list[str]) -> dict[str, int]:
    """:func:`pod_amount` for each of ``names``, parsing each container's requests once."""
    spec = pod.spec
    containers = [_requests(c) for c in spec.containers]
    inits = [_requests(c) for c in spec.init_containers]
    out: dict[str, int] = {}
    for name in names:
        total = sum(_nonzero(name, reqs) for reqs in containers)
        for reqs in inits:
            total = max(total, _nonzero(name, reqs))
        q = spec.overhead.get(name)
        if q is not None:
            # Canonical units, cpu overhead in millicores too (see the module docstring).
            with contextlib.suppress(QuantityError):
                total += to_canonical(name, q)
        out[name] = total
    return out


def pod_request(pod: PodInfo) -> dict[str, int]:
    """Requested name -> the amount it adds to a node, cached per spec and requests object
    and per resources as written (a workload's pods are worked out once). Shared: do not modify."""
    spec = pod.pod.spec
    cached = _MEMO.get(spec, pod.requests)
    if cached is None:
        # The requests are PodInfo's (derived from the same fields), keyed too so that they rule.
        key = (resources_key(pod.pod), tuple(pod.requests.items()))
        cached = _BY_SPEC.get(key)
        if cached is None:
            cached = _pod_amounts(pod.pod, requested_names(pod))
            if len(_BY_SPEC) >= _MAX_SPECS:
                _BY_SPEC.clear()
            _BY_SPEC[key] = cached
        _MEMO.put(spec, cached, pod.requests)
    return cached
