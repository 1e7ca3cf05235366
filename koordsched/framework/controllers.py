"""Controllers a plugin declares: what they read, what they compute, and the writes they want.

Koordinator lets a scheduler plugin bring its own controllers (``frameworkext``'s
``ControllerProvider.NewControllers``): the PodGroup status controller comes with Coscheduling,
the quota status and overuse revoke controllers with ElasticQuota. Here a controller does no I/O.
Each round it reads what its plugin holds (through the plugin's ``Handle``) and returns the
writes it wants as typed data (:data:`Write`); each backend has one runner that applies them (the
kube backend through the API server, the simulator to its in-memory cluster) and hands each
outcome back (:meth:`Controller.applied`). A plugin with a controller therefore touches no
backend file: its :class:`~koordsched.framework.registry.PluginSpec` names a
:data:`ControllerFactory`, and both runners build what ``Registry.controllers`` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import msgspec

from koordsched.api.core import Pod
from koordsched.api.kinds import ObjectKind

#: :attr:`WriteResult.code` of a write that was applied.
APPLIED = 0
#: ... of a write that got no answer (a transport error, or its timeout ran out).
NO_ANSWER = -1
#: ... of a write that was never sent (the runner's queue was full, or it was closing).
DROPPED = -2


class MergePatch(msgspec.Struct, frozen=True):
    """A JSON merge patch of one object, or of its ``subresource`` (``"status"``)."""

    kind: ObjectKind[Any]
    namespace: str
    name: str
    body: dict[str, Any]
    subresource: str = ""
    #: When the subresource answers 404, the same body is sent to the object itself: a CRD
    #: served without the status subresource keeps its status on the object.
    object_fallback: bool = False


class ObjectWrite(msgspec.Struct, frozen=True):
    """Patches of one object, sent in order; the first one refused ends the write."""

    #: The object's store key (``namespace/name``, or ``name``), for the controller's bookkeeping.
    key: str
    patches: tuple[MergePatch, ...]


class Eviction(msgspec.Struct, frozen=True):
    """Evict a bound pod through the Eviction API (so PodDisruptionBudgets are honoured), its
    uid as the precondition, so a new pod of the same name is never evicted in its place."""

    pod: Pod
    #: Why, as the controller logs it and the simulator reports it.
    message: str


#: What a controller may ask a backend to do.
Write = ObjectWrite | Eviction


class WriteResult(msgspec.Struct, frozen=True):
    """How one write went."""

    #: :data:`APPLIED`, the API server's status code when it refused the write, :data:`NO_ANSWER`
    #: or :data:`DROPPED`.
    code: int = APPLIED
    #: What went wrong, as a log line says it ("" when applied).
    error: str = ""
    #: How long the write took (0 in the simulator).
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.code == APPLIED


class Controller(Protocol):
    """One controller: a plugin builds it, a backend's runner calls it (see the module docstring).

    A round is :meth:`reconcile`, then the writes it returned, then :meth:`applied` once per
    write; the runners call nothing concurrently, as the whole scheduler runs on one event loop.
    """

    #: Names its task and writer (``"podgroup-status"``).
    name: str
    #: What a person reads in the logs (``"the PodGroup status controller"``).
    description: str
    #: The kinds it reads besides pods and nodes: a runner starts it only where all are watched.
    watches: tuple[ObjectKind[Any], ...]
    #: Seconds between rounds (the simulator runs rounds on its own schedule, see :meth:`next_due`).
    interval: float
    #: 0: a round's writes are applied in order, each awaited, before the round ends; n > 0: they
    #: are queued and applied up to n at once while the rounds go on (a slow API server never
    #: holds a round back).
    workers: int
    #: How long one write may go unanswered (a kube runner's request timeout).
    write_timeout: float
    #: Whether the simulator runs it: False for write-backs that nothing in the scheduler reads,
    #: kept for the people and tools watching a cluster (a status the report already shows).
    simulated: bool

    def reconcile(self) -> Sequence[Write]:
        """One round: the writes due now."""
        ...

    def applied(self, write: Write, result: WriteResult) -> None:
        """How a write of this controller's went (its bookkeeping, its log lines)."""
        ...

    def next_due(self) -> float | None:
        """``Clock.now`` time at which a round would next write something if nothing changed,
        None when none would: the simulator advances virtual time to it."""
        ...


#: Builds a plugin's controllers from every instance of the plugin, one per profile that runs it,
#: in profile order (a controller serves the whole scheduler, as Koordinator's do); [] for none.
ControllerFactory = Callable[[Sequence[Any]], Sequence[Controller]]
