"""Building PodInfo from a Pod: requests parsed once, priority resolved from PriorityClasses.

A pod still to be scheduled whose requests the scheduler cannot place (malformed, negative,
beyond int64) is refused here with a message naming the container, resource and value. A pod
already bound to a node is never refused: it runs whatever it asked for, so it is counted as
holding at least that (see :class:`~koordsched.api.resources.HeldRequests`), or the next pod
would be given what it holds.
"""

from __future__ import annotations

import logging

from koordsched.api.core import Container, Pod, PodSpec, PriorityClass, ResourceList
from koordsched.api.quantity import QuantityError
from koordsched.api.resources import HeldRequests, checked_pod_requests
from koordsched.framework.types import PodInfo

log = logging.getLogger(__name__)


class InvalidPodError(ValueError):
    """The pod cannot be scheduled as written; the message is shown on the pod."""


class PriorityClasses:
    """PriorityClass objects by name, to resolve a pod's priority where admission has not.

    In a cluster the Priority admission plugin has already set ``spec.priority``; pods
    given to the simulator usually have only ``priorityClassName``.
    """

    def __init__(self) -> None:
        self._classes: dict[str, PriorityClass] = {}

    def upsert(self, pc: PriorityClass) -> None:
        self._classes[pc.metadata.name] = pc

    def delete(self, name: str) -> None:
        self._classes.pop(name, None)

    def get(self, name: str) -> PriorityClass | None:
        return self._classes.get(name)

    def global_default(self) -> PriorityClass | None:
        return next((pc for pc in self._classes.values() if pc.global_default), None)

    def __len__(self) -> int:
        return len(self._classes)

    def priority_of(self, pod: Pod) -> int:
        if pod.spec.priority is not None:
            return pod.spec.priority
        name = pod.spec.priority_class_name
        if name:
            pc = self._classes.get(name)
            if pc is None:
                raise InvalidPodError(f"no PriorityClass with name {name} was found")
            return pc.value
        for pc in self._classes.values():
            if pc.global_default:
                return pc.value
        return 0


#: Specs whose requests a :class:`RequestsMemo` keeps before it starts again.
MEMO_LIMIT = 1024


class RequestsMemo:
    """Requests parsed once per containers list, shared by the PodInfos of pods that share it.

    Pods of one template are decoded with one spec object (``api.sharing``), and bound pods of
    one template with one spec per node that holds the template's containers, init containers
    and overhead, which are all requests are read from; so their requests are one dict too
    (nothing changes a PodInfo's requests in place). Keyed by the containers list's identity,
    holding the three parts so that it stays their own; bounded.
    """

    __slots__ = ("_held", "_pending")

    def __init__(self) -> None:
        self._pending: dict[int, tuple[_Parts, dict[str, int]]] = {}
        self._held: dict[int, tuple[_Parts, dict[str, int], tuple[str, ...]]] = {}

    def pending(self, pod: Pod) -> dict[str, int]:
        """:func:`checked_pod_requests` (a QuantityError is raised again for each pod)."""
        parts = _parts(pod.spec)
        found = self._pending.get(id(parts[0]))
        if found is not None and _same(found[0], parts):
            return found[1]
        requests = checked_pod_requests(pod)
        if len(self._pending) >= MEMO_LIMIT:
            self._pending.clear()
        self._pending[id(parts[0])] = (parts, requests)
        return requests

    def held(self, pod: Pod) -> tuple[dict[str, int], tuple[str, ...]]:
        """:class:`HeldRequests`' requests and problems."""
        parts = _parts(pod.spec)
        found = self._held.get(id(parts[0]))
        if found is not None and _same(found[0], parts):
            return found[1], found[2]
        held = HeldRequests(pod)
        problems = tuple(held.problems)
        if len(self._held) >= MEMO_LIMIT:
            self._held.clear()
        self._held[id(parts[0])] = (parts, held.requests, problems)
        return held.requests, problems


#: What a pod's requests are read from: containers, init containers, overhead.
_Parts = tuple[list[Container], list[Container], ResourceList]


def _parts(spec: PodSpec) -> _Parts:
    return (spec.containers, spec.init_containers, spec.overhead)


def _same(a: _Parts, b: _Parts) -> bool:
    return a[0] is b[0] and a[1] is b[1] and a[2] is b[2]


def new_pod_info(pod: Pod, priorities: PriorityClasses, memo: RequestsMemo | None = None) -> PodInfo:
    """The pod's PodInfo; raises InvalidPodError (the message shown on the pod) for a pod still to
    be scheduled that cannot be, never for a bound pod. ``memo`` shares parsed requests."""
    if pod.spec.node_name:
        return _bound_pod_info(pod, priorities, memo)
    try:
        requests = memo.pending(pod) if memo is not None else checked_pod_requests(pod)
    except QuantityError as err:
        raise InvalidPodError(f"invalid resource quantity: {err}") from err
    info = PodInfo(pod, requests, priorities.priority_of(pod))
    if info.preemption_policy is None and pod.spec.priority_class_name:
        pc = priorities.get(pod.spec.priority_class_name)
        if pc is not None:
            info.preemption_policy = pc.preemption_policy
    return info


def _bound_pod_info(pod: Pod, priorities: PriorityClasses, memo: RequestsMemo | None) -> PodInfo:
    key = f"{pod.metadata.namespace}/{pod.metadata.name}"
    if memo is not None:
        requests, problems = memo.held(pod)
    else:
        held = HeldRequests(pod)
        requests, problems = held.requests, tuple(held.problems)
    for problem in problems:
        log.warning("pod %s bound to node %s: %s", key, pod.spec.node_name, problem)
    try:
        priority = priorities.priority_of(pod)
    except InvalidPodError as err:
        # Leaving the pod out would hand its resources to the next pod: it is counted, with the
        # priority kube-scheduler reads from a pod admission did not resolve (spec.priority or 0).
        log.warning("pod %s bound to node %s: %s; its priority is taken as 0", key, pod.spec.node_name, err)
        priority = 0
    return PodInfo(pod, requests, priority)
