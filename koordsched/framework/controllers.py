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

A controller whose cluster rounds stand for work that follows events (the Reservation
controller's owners follow binds, its expiry follows time) may also implement
:class:`FollowsMoments`: the simulator then calls it at those events instead of on rounds, so a
Reservation's owners are written right after the bind that made them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

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


class StatusWrite(msgspec.Struct, frozen=True):
    """The status of one object, as ``obj`` (the object as it should now be) has it.

    In a cluster: a JSON merge patch of the status subresource with the whole status; in the
    simulator, ``obj`` is stored as it is. Writes that carry a ``version`` are de-duplicated per
    object across every writer of the backend (a controller's rounds and the port's writes of an
    object a pod stands for, such as a Reservation's failed attempt): one write is sent per version
    of an object, as the watch brings its result; a write that fails or is dropped is forgotten,
    so the next one computed from that version is sent.
    """

    kind: ObjectKind[Any]
    #: The object's store key (``namespace/name``, or ``name``).
    key: str
    obj: Any
    #: The resourceVersion of the object the status was computed from ("" never de-duplicates).
    version: str = ""


#: What a controller may ask a backend to do.
Write = ObjectWrite | StatusWrite | Eviction


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
    #: Whether the simulator runs its rounds: False for write-backs that nothing in the scheduler
    #: reads, kept for the people and tools watching a cluster (a status the report already
    #: shows), and for a controller the simulator calls at moments instead (:class:`FollowsMoments`).
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


class Moment(enum.Enum):
    """When the simulator calls :meth:`FollowsMoments.at`."""

    #: The input is loaded, before the first pod is placed.
    LOADED = "loaded"
    #: Virtual time moved on to let pods out of backoff, before they are retried.
    BACKOFF_EXPIRED = "backoff-expired"
    #: Nothing more can be placed (the end of a run; a migration step's end).
    SETTLED = "settled"


@runtime_checkable
class FollowsMoments(Protocol):
    """What a :class:`Controller` may add: its work at the events its cluster rounds follow.

    The simulator runs no rounds of a controller that has these methods unless ``simulated`` is
    set; it calls them instead, and applies their writes at once (the scheduler sees an object
    write before anything else happens). A cluster runs only the rounds, which find the same work.
    """

    def after_pods(self, pods: Sequence[Pod]) -> Sequence[Write]:
        """Right after the watch events of ``pods``' binds, updates and deletions were delivered."""
        ...

    def at(self, moment: Moment, loaded_at: float) -> Sequence[Write]:
        """At ``moment``; ``loaded_at``: the wall time the input was loaded at, what an object
        without a creationTimestamp counts as created at."""
        ...


#: Builds a plugin's controllers from every instance of the plugin, one per profile that runs it,
#: in profile order (a controller serves the whole scheduler, as Koordinator's do); [] for none.
ControllerFactory = Callable[[Sequence[Any]], Sequence[Controller]]
