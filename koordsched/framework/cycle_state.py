"""Per-cycle scratch space shared by the plugins that schedule one pod."""

from __future__ import annotations

import copy
from typing import Any, TypeVar

T = TypeVar("T")


class StateData:
    """Base for values stored in CycleState; ``clone`` is used when the state is forked."""

    def clone(self) -> StateData:
        return copy.copy(self)


class CycleState:
    __slots__ = (
        "_data",
        "record_plugin_metrics",
        "same_job_nominees",
        "skip_binding",
        "skip_filter",
        "skip_score",
        "started",
    )

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        #: Plugins whose PreFilter returned Skip: their Filter is not called this cycle.
        self.skip_filter: set[str] = set()
        #: Plugins whose PreScore returned Skip: their Score is not called this cycle.
        self.skip_score: set[str] = set()
        #: Plugins that said at PreFilter they have nothing to record or write for this pod: their
        #: Reserve, Unreserve, Permit, PreBind and PostBind would return Success having done
        #: nothing, and their Bind would return Skip, so they are not called this cycle (not an
        #: upstream Skip: a plain pod's saving).
        self.skip_binding: set[str] = set()
        #: Whether this cycle is one of the sampled ones for per-plugin metrics.
        self.record_plugin_metrics = False
        #: perf_counter() when the scheduling cycle began; the attempt's latency runs to the bind.
        self.started = 0.0
        #: Uids of pods whose nominations do not count against this pod (Koordinator's same-job
        #: nominees: the pending members of its gang group, nominated by its own job preemption).
        self.same_job_nominees: frozenset[str] = frozenset()

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str, kind: type[T]) -> T:
        """The value under ``key``; KeyError if absent, TypeError if of another type."""
        value = self._data[key]
        if isinstance(value, kind):
            return value
        raise _wrong_type(key, value, kind)

    def read_optional(self, key: str, kind: type[T]) -> T | None:
        """The value under ``key``, or None if absent (e.g. its PreFilter/PreScore did not run);
        TypeError if of another type."""
        # Plugins read their state a dozen times per cycle: the check stays inline.
        value = self._data.get(key)
        if value is None or isinstance(value, kind):
            return value
        raise _wrong_type(key, value, kind)

    def get(self, key: str) -> Any:
        """Untyped lookup, None if absent; prefer ``read``/``read_optional``."""
        return self._data.get(key)

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def clone(self) -> CycleState:
        new = CycleState()
        new._data = {k: v.clone() if isinstance(v, StateData) else v for k, v in self._data.items()}
        new.skip_filter = set(self.skip_filter)
        new.skip_score = set(self.skip_score)
        new.skip_binding = set(self.skip_binding)
        new.record_plugin_metrics = self.record_plugin_metrics
        new.started = self.started
        new.same_job_nominees = self.same_job_nominees
        return new


def _wrong_type(key: str, value: object, kind: type) -> TypeError:
    return TypeError(f"cycle state {key!r} holds {type(value).__name__}, not {kind.__name__}")
