"""The plugins' controllers in the simulator: their writes applied to the in-memory cluster at once.

The simulator runs every controller a plugin declared with ``simulated`` set
(:mod:`koordsched.framework.controllers`), one round each whenever its loop has nothing left to
schedule, and moves virtual time to the next round that would write something
(:meth:`SimControllers.next_due`). An Eviction deletes the pod as the Eviction API would (uid as
precondition, :meth:`SimPort.revoke`); an object write merges its patches into the stored object,
and a status write stores its object as it is, which the scheduler then sees as a watch event.

A controller that follows moments (:class:`~koordsched.framework.controllers.FollowsMoments`) is
also called right after each delivery of pods' watch events (:attr:`SimPort.after_delivery`) and
at the moments the runner names (:meth:`SimControllers.at`); what it writes then reaches the
scheduler at once. Nothing here names a kind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from koordsched.api.core import Pod, to_builtins
from koordsched.backends.sim.port import SimPort
from koordsched.framework.controllers import (
    Controller,
    Eviction,
    FollowsMoments,
    MergePatch,
    Moment,
    ObjectWrite,
    StatusWrite,
    Write,
    WriteResult,
)
from koordsched.scheduler.scheduler import Scheduler

#: What a write of an object or pod that is not there gets, as from the API server.
NOT_FOUND = 404


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: ``patch`` merged into ``target`` (null removes a key)."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class SimControllers:
    """The simulated side of every simulated controller (see the module docstring)."""

    def __init__(self, controllers: Iterable[Controller], sched: Scheduler, port: SimPort) -> None:
        watched = [c for c in controllers if all(k.kind in sched.kinds for k in c.watches)]
        #: Those whose rounds run.
        self.controllers = [c for c in watched if c.simulated]
        #: Those called at moments (and after deliveries), as a controller and as a follower.
        self.followers: list[tuple[Controller, FollowsMoments]] = [
            (c, c) for c in watched if isinstance(c, FollowsMoments)
        ]
        self.sched = sched
        self.port = port
        port.after_delivery = self.after_pods if self.followers else None

    def __bool__(self) -> bool:
        return bool(self.controllers)

    def round(self) -> int:
        """One round of each controller; returns how many writes were applied (then delivered)."""
        done = 0
        for c in self.controllers:
            for write in c.reconcile():
                result = self._apply(write)
                c.applied(write, result)
                done += result.ok
        if done:
            self.port.deliver()
        return done

    def at(self, moment: Moment) -> None:
        """Each follower's work at ``moment``, applied at once."""
        for c, f in self.followers:
            self._apply_now(c, f.at(moment, self.port.start_wall))

    def after_pods(self, pods: Sequence[Pod]) -> None:
        """Each follower's work after these pods' watch events were delivered, applied at once."""
        for c, f in self.followers:
            self._apply_now(c, f.after_pods(pods))

    def next_due(self) -> float | None:
        return min((d for c in self.controllers if (d := c.next_due()) is not None), default=None)

    def _apply_now(self, c: Controller, writes: Sequence[Write]) -> None:
        for write in writes:
            c.applied(write, self._apply(write, now=True))

    def _apply(self, write: Write, *, now: bool = False) -> WriteResult:
        if isinstance(write, Eviction):
            if self.port.revoke(write.pod, write.message):
                return WriteResult()
            return WriteResult(NOT_FOUND, f"pod {write.pod.key} not found")
        if isinstance(write, StatusWrite):
            kind = write.kind
            if write.key not in self.sched.objects.get(kind.kind, {}):
                return WriteResult(NOT_FOUND, f"{kind.kind} {write.key} not found")
            self._store(kind.kind, write.key, write.obj, now)
            return WriteResult()
        return self._write_object(write, now)

    def _store(self, kind: str, key: str, obj: Any, now: bool) -> None:
        if now:
            self.sched.on_object(kind, key, obj)
        else:
            self.port.write_object(kind, key, obj)

    def _write_object(self, write: ObjectWrite, now: bool) -> WriteResult:
        new: Any = None
        patch: MergePatch | None = None
        for patch in write.patches:
            kind = patch.kind
            key = kind.key_of(patch.namespace, patch.name)
            current = new if new is not None else self.sched.objects.get(kind.kind, {}).get(key)
            if current is None:
                return WriteResult(NOT_FOUND, f"{kind.kind} {key} not found")
            # The simulated cluster has no subresources: a status patch is a patch of the object.
            merged = merge_patch(to_builtins(current), patch.body)
            try:
                new = msgspec.convert(merged, kind.type)
            except msgspec.ValidationError as err:
                return WriteResult(422, f"{kind.kind} {key}: {err}")
        if new is not None and patch is not None:
            self._store(patch.kind.kind, patch.kind.key_of(patch.namespace, patch.name), new, now)
        return WriteResult()
