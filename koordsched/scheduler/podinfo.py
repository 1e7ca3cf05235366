"""Building PodInfo from a Pod: requests parsed once, priority resolved from PriorityClasses."""

from __future__ import annotations

from koordsched.api.core import Pod, PriorityClass
from koordsched.api.quantity import QuantityError
from koordsched.api.resources import pod_requests
from koordsched.framework.types import PodInfo


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


def new_pod_info(pod: Pod, priorities: PriorityClasses) -> PodInfo:
    try:
        requests = pod_requests(pod)
    except QuantityError as err:
        raise InvalidPodError(f"invalid resource quantity: {err}") from err
    return PodInfo(pod, requests, priorities.priority_of(pod))
