"""The output port: where the core's decisions go (the API server, or the simulator's memory)."""

from __future__ import annotations

from typing import Protocol

from koordsched.api.core import Pod
from koordsched.framework.types import BindingPlan


class OutputPort(Protocol):
    async def bind(self, pod: Pod, node_name: str, plan: BindingPlan) -> None:
        """Bind ``pod`` to ``node_name`` carrying ``plan``'s annotations; raise BindError on failure."""

    def scheduled(self, pod: Pod, node_name: str) -> None:
        """The pod was bound: a ``Scheduled`` event."""

    def unschedulable(self, pod: Pod, reason: str, message: str) -> None:
        """The attempt failed: PodScheduled=False with ``reason`` and a ``FailedScheduling`` event."""

    def invalid_pod(self, pod: Pod, message: str) -> None:
        """The pod cannot be scheduled as written (bad quantity, bad annotation): say so on the pod."""

    def preempt(self, preemptor: Pod, node_name: str, victims: list[Pod], *, message: str = "") -> None:
        """Evict ``victims`` from ``node_name`` for ``preemptor``: delete each (its uid as a
        precondition) with a ``Preempted`` event on it, as kube-scheduler does; ``message`` is
        the ``DisruptionTarget`` condition's ("" for kube-scheduler's own)."""

    def nominate(self, pod: Pod, node_name: str) -> None:
        """Set the pending pod's ``status.nominatedNodeName`` (``""`` clears it)."""
