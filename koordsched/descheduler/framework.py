"""What descheduler plugins see (Koordinator's descheduler ``framework.Handle``), as Protocols.

A Balance plugin gets the nodes of one round and a :class:`Handle`: the pods on each node,
the NodeMetrics, the wall clock, the profile's Evictor (filter + evict) and the node-fit
check, which asks the scheduler's own filters (:mod:`koordsched.descheduler.nodefit`). The
backends implement the Handle; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from koordsched.api.core import Node, Pod
from koordsched.api.slo import NodeMetric


@dataclass(frozen=True)
class EvictOptions:
    #: The plugin that asked (``LowNodeLoad``), written to the PodMigrationJob and the events.
    plugin: str
    #: Why, in the plugin's words (``node is overutilized, node cpu usage(80.00%)>threshold(75.00%)``).
    reason: str
    #: Where the pod should go, when the plugin planned it (GPU balance): a ReservationFirst
    #: job's Reservation is restricted to these nodes. Empty: wherever the scheduler picks.
    nodes: tuple[str, ...] = ()


class Evictor(Protocol):
    """The profile's Evict and Filter plugins (MigrationController by default)."""

    def filter(self, pod: Pod) -> bool:
        """Whether ``pod`` may be evicted at all (the non-retryable rules)."""
        ...

    def evict(self, pod: Pod, options: EvictOptions) -> bool:
        """Ask for ``pod`` to be migrated; False when it was refused (a limit, a duplicate)."""
        ...


class NodeFit(Protocol):
    def fits(self, pod: Pod, nodes: Sequence[str]) -> list[str]:
        """Those of ``nodes`` (in order) where the scheduler would place ``pod`` now."""
        ...


class Handle(Protocol):
    def pods_on(self, node: str) -> list[Pod]: ...
    def node_metric(self, node: str) -> NodeMetric | None: ...
    def wall(self) -> float:
        """Unix seconds (virtual in the simulator), for NodeMetric expiry and the detectors."""
        ...

    @property
    def evictor(self) -> Evictor: ...
    @property
    def node_fit(self) -> NodeFit: ...


class BalancePlugin(Protocol):
    @property
    def name(self) -> str: ...
    def balance(self, nodes: Sequence[Node]) -> None: ...
