"""Koordinator QoS and priority classes of a pod (spec 1.1), shared by NodeNUMAResource and LoadAware.

CPU binding is only for pods labelled ``LSE``/``LSR`` whose priority class (with its
default) is ``koord-prod`` (``AllowUseCPUSet``). The class comes from the
``koordinator.sh/priority-class`` label, else from ``spec.priority`` bands, else from the
QoS class: the ``koordinator.sh/qosClass`` label, else the Kubernetes QoS class.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from functools import lru_cache

from koordsched.api.core import Container, Pod, Quantity
from koordsched.api.koordinator import LABEL_PRIORITY_CLASS, LABEL_QOS_CLASS
from koordsched.api.quantity import QuantityError, parse_quantity

QOS_LSE = "LSE"
QOS_LSR = "LSR"
QOS_LS = "LS"
QOS_BE = "BE"
QOS_SYSTEM = "SYSTEM"
QOS_NONE = ""
_QOS = frozenset((QOS_LSE, QOS_LSR, QOS_LS, QOS_BE, QOS_SYSTEM))

PRIORITY_PROD = "koord-prod"
PRIORITY_MID = "koord-mid"
PRIORITY_BATCH = "koord-batch"
PRIORITY_FREE = "koord-free"
PRIORITY_NONE = ""
_PRIORITIES = frozenset((PRIORITY_PROD, PRIORITY_MID, PRIORITY_BATCH, PRIORITY_FREE))
_BANDS = (
    (9000, 9999, PRIORITY_PROD),
    (7000, 7999, PRIORITY_MID),
    (5000, 5999, PRIORITY_BATCH),
    (3000, 3999, PRIORITY_FREE),
)

K8S_GUARANTEED = "Guaranteed"
K8S_BURSTABLE = "Burstable"
K8S_BEST_EFFORT = "BestEffort"
_COMPUTE = ("cpu", "memory")


def qos_class_raw(pod: Pod) -> str:
    """The ``koordinator.sh/qosClass`` label if it names a known class, else none."""
    value = pod.metadata.labels.get(LABEL_QOS_CLASS, "")
    return value if value in _QOS else QOS_NONE


def _sum(into: dict[str, Fraction], rl: Iterable[tuple[str, Quantity]]) -> None:
    for name, q in rl:
        if name not in _COMPUTE:
            continue
        value = parse_quantity(q)
        if value > 0:
            into[name] = into.get(name, Fraction(0)) + value


_Items = tuple[tuple[str, Quantity], ...]
#: One container's requests, limits and restart policy, as written.
_ContainerKey = tuple[_Items, _Items, str | None]
#: See :func:`resources_key`.
ResourcesKey = tuple[tuple[_ContainerKey, ...], tuple[_ContainerKey, ...], _Items]


def _container_key(c: Container) -> _ContainerKey:
    res = c.resources
    return tuple(res.requests.items()), tuple(res.limits.items()), c.restart_policy


def resources_key(pod: Pod) -> ResourcesKey:
    """A pod's resources as written, hashable: containers, init containers (with their restart
    policy) and overhead. Whatever follows from them alone (requests, limits, the Kubernetes QoS
    class) is equal for pods with equal keys, so it can be worked out once per workload."""
    spec = pod.spec
    return (
        tuple(_container_key(c) for c in spec.containers),
        tuple(_container_key(c) for c in spec.init_containers),
        tuple(spec.overhead.items()),
    )


def k8s_qos_class(pod: Pod) -> str:
    """Kubernetes ``GetPodQOS`` (1.28): cpu and memory over all containers, requests defaulted from limits.

    Remembered per :func:`resources_key` (parsing the quantities costs tens of microseconds)."""
    return _qos_of(resources_key(pod))


@lru_cache(maxsize=4096)
def _qos_of(key: ResourcesKey) -> str:
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    try:
        for c_requests, c_limits, _ in (*key[0], *key[1]):
            reqs = dict(c_limits)
            reqs.update(c_requests)  # the API server defaults requests from limits
            _sum(requests, reqs.items())
            found = set()
            for name, q in c_limits:
                if name in _COMPUTE and parse_quantity(q) > 0:
                    found.add(name)
            _sum(limits, c_limits)
            if not found.issuperset(_COMPUTE):
                guaranteed = False
    except QuantityError:
        return K8S_BURSTABLE
    if not requests and not limits:
        return K8S_BEST_EFFORT
    if guaranteed:
        for name, value in requests.items():
            if limits.get(name) != value:
                guaranteed = False
                break
    if guaranteed and len(requests) == len(limits):
        return K8S_GUARANTEED
    return K8S_BURSTABLE


def qos_class_with_default(pod: Pod) -> str:
    raw = qos_class_raw(pod)
    if raw:
        return raw
    return {K8S_GUARANTEED: QOS_LSR, K8S_BURSTABLE: QOS_LS, K8S_BEST_EFFORT: QOS_BE}[k8s_qos_class(pod)]


def priority_class_raw(pod: Pod, resolved_priority: int = 0) -> str:
    """From the label, else the ``spec.priority`` band (``resolved_priority`` when the spec has none,
    e.g. resolved from a PriorityClass by the scheduler)."""
    label = pod.metadata.labels.get(LABEL_PRIORITY_CLASS, "")
    if label in _PRIORITIES:
        return label
    priority = pod.spec.priority if pod.spec.priority is not None else resolved_priority
    for low, high, name in _BANDS:
        if low <= priority <= high:
            return name
    return PRIORITY_NONE


def priority_class_with_default(pod: Pod, resolved_priority: int = 0) -> str:
    raw = priority_class_raw(pod, resolved_priority)
    if raw:
        return raw
    qos = qos_class_with_default(pod)
    if qos in (QOS_SYSTEM, QOS_LSE, QOS_LSR, QOS_LS):
        return PRIORITY_PROD
    if qos == QOS_BE:
        return PRIORITY_BATCH
    return PRIORITY_NONE


def allow_use_cpuset(pod: Pod, resolved_priority: int = 0) -> bool:
    """``AllowUseCPUSet``: QoS label LSE or LSR and priority class (with default) koord-prod."""
    return (
        qos_class_raw(pod) in (QOS_LSE, QOS_LSR)
        and priority_class_with_default(pod, resolved_priority) == PRIORITY_PROD
    )
