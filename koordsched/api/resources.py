"""Pod resource requests in canonical integer units, and resource-name classification.

Every quantity is turned into an integer once: CPU in millicores (``MilliValue``), every
other resource in its base unit rounded up (``Value``), the units the upstream scheduler
compares in. Integers keep the hot path free of Fractions and make sums exact.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Final

from koordsched.api.core import Container, Pod, PodSpec, Quantity
from koordsched.api.quantity import QuantityError, describe_int, int_value, milli_value, show_quantity
from koordsched.api.selectors import is_qualified_name

__all__ = [
    "ATTACHABLE_VOLUMES_PREFIX",
    "CPU",
    "DEFAULT_NAMESPACE_PREFIX",
    "EPHEMERAL_STORAGE",
    "HUGEPAGES_PREFIX",
    "INT64_MAX",
    "MEMORY",
    "PODS",
    "REQUESTS_PREFIX",
    "HeldRequests",
    "add_into",
    "checked_pod_requests",
    "container_requests",
    "is_extended_resource_name",
    "is_native_resource",
    "is_prefixed_native_resource",
    "is_scalar_resource_name",
    "max_into",
    "pod_limits",
    "pod_requests",
    "resource_list",
    "subtract_non_negative",
    "to_canonical",
    "too_large",
]

CPU: Final = "cpu"
MEMORY: Final = "memory"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"
PODS: Final = "pods"

HUGEPAGES_PREFIX: Final = "hugepages-"
ATTACHABLE_VOLUMES_PREFIX: Final = "attachable-volumes-"
DEFAULT_NAMESPACE_PREFIX: Final = "kubernetes.io/"
REQUESTS_PREFIX: Final = "requests."
#: The largest amount the scheduler's int64 columns (and Go's ``Quantity.Value``) can hold.
INT64_MAX: Final = 2**63 - 1


# --- names -----------------------------------------------------------------------------------------


def is_prefixed_native_resource(name: str) -> bool:
    """In the ``*kubernetes.io/`` namespace (``kubernetes.io/batch-cpu``).

    Upstream tests containment, not prefix, so ``foo.kubernetes.io/x`` counts too.
    """
    return DEFAULT_NAMESPACE_PREFIX in name


def is_native_resource(name: str) -> bool:
    """Unprefixed names (cpu, memory, hugepages-2Mi) and ``*kubernetes.io/`` names are native."""
    return "/" not in name or DEFAULT_NAMESPACE_PREFIX in name


@lru_cache(maxsize=1024)
def is_extended_resource_name(name: str) -> bool:
    """k8s ``IsExtendedResourceName``: a vendor-domain name such as ``nvidia.com/gpu``.

    Not native, not starting with ``requests.``, and ``requests.<name>`` must be a qualified
    name, so the domain has to be a lowercase DNS subdomain (quota names it that way).
    """
    if is_native_resource(name) or name.startswith(REQUESTS_PREFIX):
        return False
    return is_qualified_name(REQUESTS_PREFIX + name)


def is_scalar_resource_name(name: str) -> bool:
    """Resources the scheduler tracks in its scalar map: extended, hugepages, attachable volumes,
    and prefixed native names like ``kubernetes.io/batch-cpu``."""
    return (
        name.startswith(HUGEPAGES_PREFIX)
        or name.startswith(ATTACHABLE_VOLUMES_PREFIX)
        or DEFAULT_NAMESPACE_PREFIX in name
        or is_extended_resource_name(name)
    )


# --- quantities ------------------------------------------------------------------------------------


def to_canonical(name: str, q: Quantity) -> int:
    """CPU in millicores, anything else in base units; both rounded up as Go rounds them."""
    return milli_value(q) if name == CPU else int_value(q)


def resource_list(rl: Mapping[str, Quantity]) -> dict[str, int]:
    """A ResourceList in canonical integers; zero entries are kept (an allocatable of 0 still says "none")."""
    out: dict[str, int] = {}
    for name, q in rl.items():
        try:
            out[name] = milli_value(q) if name == CPU else int_value(q)
        except QuantityError as e:
            raise QuantityError(f"resource {name!r}: {e}") from None
    return out


def _request_list(c: Container) -> Mapping[str, Quantity]:
    res = c.resources
    if not res.limits:
        return res.requests
    merged = dict(res.limits)
    merged.update(res.requests)
    return merged


def container_requests(c: Container) -> dict[str, int]:
    """A container's requests, with each missing request taken from its limit.

    The API server applies that default when a pod is created; manifests handed to the
    simulator have not been through it, so a limits-only container would otherwise be
    scheduled as if it asked for nothing.
    """
    try:
        return resource_list(_request_list(c))
    except QuantityError as e:
        raise QuantityError(f"container {c.name!r}: {e}") from None


def add_into(into: dict[str, int], rl: Mapping[str, int]) -> None:
    """``into += rl`` per resource."""
    for k, v in rl.items():
        into[k] = into.get(k, 0) + v


def subtract_non_negative(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """``quotav1.SubtractWithNonNegativeResult``: the keys of both, each ``max(0, a - b)``."""
    out = {k: max(0, v - b.get(k, 0)) for k, v in a.items()}
    for k in b:
        out.setdefault(k, 0)
    return out


def max_into(into: dict[str, int], rl: Mapping[str, int]) -> None:
    """``into = max(into, rl)`` per resource."""
    for k, v in rl.items():
        if k not in into or v > into[k]:
            into[k] = v


def _pod_total(spec: PodSpec, of: Callable[[Container], dict[str, int]]) -> dict[str, int]:
    """The walk ``PodRequests`` and ``PodLimits`` share, over ``of(container)``.

    Regular containers and restartable (sidecar) init containers run together, so they
    add up. A regular init container runs alone beside the sidecars declared before it,
    so it needs its own amounts plus theirs; the pod needs the larger of the steady
    state and the worst init step.
    """
    total: dict[str, int] = {}
    for c in spec.containers:
        add_into(total, of(c))
    if spec.init_containers:
        sidecars: dict[str, int] = {}
        init_peak: dict[str, int] = {}
        for c in spec.init_containers:
            own = of(c)
            if c.restart_policy == "Always":
                add_into(total, own)
                add_into(sidecars, own)
                max_into(init_peak, sidecars)
            else:
                step = dict(own)
                add_into(step, sidecars)
                max_into(init_peak, step)
        max_into(total, init_peak)
    return total


def pod_requests(pod: Pod) -> dict[str, int]:
    """What a pod asks of a node, as ``resource.PodRequests`` (k8s 1.28) with default options:
    :func:`_pod_total` of the containers' requests, plus the runtime's ``spec.overhead``.
    Zeros are dropped.
    """
    spec = pod.spec
    reqs = _pod_total(spec, container_requests)
    if spec.overhead:
        try:
            add_into(reqs, resource_list(spec.overhead))
        except QuantityError as e:
            raise QuantityError(f"overhead: {e}") from None
    return {k: v for k, v in reqs.items() if v != 0}


def _container_limits(c: Container) -> dict[str, int]:
    return resource_list(c.resources.limits)


def pod_limits(pod: Pod) -> dict[str, int]:
    """``resource.PodLimits`` (k8s 1.28): :func:`_pod_total` of the containers' limits, then
    overhead added to the resources that have a limit."""
    spec = pod.spec
    limits = _pod_total(spec, _container_limits)
    if spec.overhead:
        overhead = resource_list(spec.overhead)
        for name in limits:
            limits[name] += overhead.get(name, 0)
    return limits


# --- requests the int64 columns can hold -----------------------------------------------------------

#: Turns one quantity of a pod into its amount: ``read(where, name, q)``, where ``where`` names the
#: container ("container 'app'") or "overhead"; it may raise QuantityError.
_Reader = Callable[[str, str, Quantity], int]


def too_large(name: str, q: object, amount: int) -> str:
    """Why ``q`` (resource ``name``, read as ``amount`` in canonical units) does not fit in int64;
    worded as the quantity module's range errors are."""
    what = f"{describe_int(amount)} milli-units" if name == CPU else describe_int(amount)
    return f"quantity {show_quantity(q)} is too large: {what} is above the int64 maximum {INT64_MAX}"


def _read_requests(pod: Pod, read: _Reader) -> dict[str, int]:
    """:func:`pod_requests` with each quantity turned into an amount by ``read``; a QuantityError
    it raises is prefixed with the container (or overhead) and the resource."""

    def read_list(where: str, rl: Mapping[str, Quantity]) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, q in rl.items():
            try:
                out[name] = read(where, name, q)
            except QuantityError as e:
                raise QuantityError(f"{where}: resource {name!r}: {e}") from None
        return out

    spec = pod.spec
    reqs = _pod_total(spec, lambda c: read_list(f"container {c.name!r}", _request_list(c)))
    if spec.overhead:
        add_into(reqs, read_list("overhead", spec.overhead))
    return {k: v for k, v in reqs.items() if v != 0}


def _checked_amount(where: str, name: str, q: Quantity) -> int:
    value = to_canonical(name, q)
    if value < 0:
        raise QuantityError(f"invalid quantity {show_quantity(q)}: must be greater than or equal to 0")
    if value > INT64_MAX:
        raise QuantityError(too_large(name, q, value))
    return value


def checked_pod_requests(pod: Pod) -> dict[str, int]:
    """:func:`pod_requests` of a pod still to be scheduled, refusing what the scheduler cannot place.

    A negative request (the API server refuses one: "must be greater than or equal to 0"), a
    request beyond int64 and a total beyond int64 raise :class:`QuantityError` naming the
    container, resource and value, so the pod is reported instead of breaking a cycle.
    """
    reqs = _read_requests(pod, _checked_amount)
    for name, total in reqs.items():
        if total > INT64_MAX:
            amount = f"{describe_int(total)} milli-units" if name == CPU else describe_int(total)
            raise QuantityError(
                f"resource {name!r}: the pod's total request of {amount} is above the int64 maximum "
                f"{INT64_MAX}"
            )
    return reqs


class HeldRequests:
    """What a pod already bound to a node holds, counted so that it never frees capacity.

    A bound pod runs whatever its requests say, so nothing may be handed out on the strength
    of a request that cannot be read: a negative amount counts as 0 (never as capacity given
    back), and an amount that is malformed or beyond int64 counts as ``INT64_MAX``, which is
    at least any node's allocatable (the node is full for that resource while the pod is
    there); so does a total beyond int64. Each such amount is described in :attr:`problems`.
    """

    __slots__ = ("problems", "requests")

    def __init__(self, pod: Pod) -> None:
        self.problems: list[str] = []
        reqs = _read_requests(pod, self._amount)
        self.requests = {name: min(total, INT64_MAX) for name, total in reqs.items()}

    def _amount(self, where: str, name: str, q: Quantity) -> int:
        try:
            value = to_canonical(name, q)
        except QuantityError as e:
            self.problems.append(f"{where}: resource {name!r}: {e}: counted as the node's whole allocatable")
            return INT64_MAX
        if value < 0:
            self.problems.append(
                f"{where}: resource {name!r}: negative quantity {show_quantity(q)} counted as 0"
            )
            return 0
        if value > INT64_MAX:
            problem = too_large(name, q, value)
            self.problems.append(
                f"{where}: resource {name!r}: {problem}: counted as the node's whole allocatable"
            )
            return INT64_MAX
        return value
