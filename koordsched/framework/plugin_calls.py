"""Calling one plugin at one extension point: the one place that times a plugin and names it when
it fails.

Every extension point's loop calls its plugins through :class:`PluginCalls`. On a sampled cycle
(``CycleState.record_plugin_metrics``) the call is timed into
``scheduler_plugin_execution_duration_seconds``; a plain cycle makes no clock call. A plugin that
raises, or returns an Error status, fails the call with a :class:`PluginError` whose status names
the plugin and the point in kube-scheduler's words (v1.28 ``framework.go``, e.g.
``running PreFilter plugin "NAME": ERR``), so the pod's condition says who failed where. A
plugin's rejection (Unschedulable, Wait, Skip) is its answer, not a failure, and is returned.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, TypeVarTuple

from koordsched.framework.status import SUCCESS, Code, PluginError, Status
from koordsched.observability.metrics import FrameworkMetrics

log = logging.getLogger(__name__)

_now = time.perf_counter

Ts = TypeVarTuple("Ts")
R = TypeVar("R")

#: How kube-scheduler words a plugin's error at each point ({} is the plugin). Points it does not
#: word (PreEnqueue logs only; PostFilter, Unreserve and PostBind pass the error on or drop it)
#: get the same form as their neighbours. Keys are the point names its metrics use.
_WORDING: dict[str, str] = {
    "PreEnqueue": 'running PreEnqueue plugin "{}"',
    "PreFilter": 'running PreFilter plugin "{}"',
    "PreFilterExtensionAddPod": 'running AddPod on PreFilter plugin "{}"',
    "PreFilterExtensionRemovePod": 'running RemovePod on PreFilter plugin "{}"',
    "Filter": 'running "{}" filter plugin',
    "PostFilter": 'running PostFilter plugin "{}"',
    "PreScore": 'running PreScore plugin "{}"',
    "Score": 'running Score plugins: plugin "{}" failed with',
    "ScoreExtensionNormalize": 'running Normalize on Score plugins: plugin "{}" failed with',
    "Reserve": 'running Reserve plugin "{}"',
    "Unreserve": 'running Unreserve plugin "{}"',
    "Permit": 'running Permit plugin "{}"',
    "PreBind": 'running PreBind plugin "{}"',
    "Bind": 'running Bind plugin "{}"',
    "PostBind": 'running PostBind plugin "{}"',
}

#: Points where kube-scheduler hands a returned Error on in the plugin's own words (it wraps
#: nothing at PostFilter): only a raised exception gets the point's wording there.
_OWN_WORDS = frozenset({"PostFilter"})


def failure(point: str, plugin: str, cause: Status | BaseException) -> Status:
    """The Error status of ``plugin`` failing at ``point``, from what it raised or returned."""
    err: BaseException | None
    if isinstance(cause, BaseException):
        # An exception with no text (``raise KeyError()``) still says what it was.
        message, err = str(cause) or type(cause).__name__, cause
    elif point in _OWN_WORDS:
        return Status(Code.ERROR, *cause.reasons, plugin=plugin, error=cause.error)
    else:
        message, err = cause.message(), cause.error
    return Status(Code.ERROR, f"{_WORDING[point].format(plugin)}: {message}", plugin=plugin, error=err)


def first(result: tuple[Status, object]) -> Status:
    """The verdict of an answer that leads with its Status (Permit's ``(status, timeout)``)."""
    return result[0]


def second(result: tuple[object, Status]) -> Status:
    """The verdict of an answer that ends with its Status (PreFilter's, PostFilter's ``(result, status)``)."""
    return result[1]


class PluginCalls:
    """Calls plugins for one framework, timing them into its metrics.

    The methods take the call's arguments positionally (no keyword packing): the per-node Filter
    loop calls them once per node and plugin.
    """

    __slots__ = ("metrics",)

    def __init__(self, metrics: FrameworkMetrics) -> None:
        self.metrics = metrics

    def status(
        self, point: str, plugin: str, sampled: bool, fn: Callable[[*Ts], Status], /, *args: *Ts
    ) -> Status:
        """``fn(*args)`` for a point whose plugins answer a Status; raises PluginError on a failure."""
        p0 = _now() if sampled else 0.0
        try:
            status = fn(*args)
        except Exception as err:  # a plugin bug fails this pod's attempt, never the scheduler
            raise self._raised(point, plugin, sampled, p0, err) from err
        return self._answered(point, plugin, sampled, p0, status)

    def call(
        self,
        point: str,
        plugin: str,
        sampled: bool,
        verdict: Callable[[R], Status] | None,
        fn: Callable[[*Ts], R],
        /,
        *args: *Ts,
    ) -> R:
        """``fn(*args)``, timed when ``sampled``; ``verdict`` reads the Status out of what it returns
        (None: it returns no Status, as a batch Filter's codes). Raises PluginError on a failure."""
        p0 = _now() if sampled else 0.0
        try:
            result = fn(*args)
        except Exception as err:
            raise self._raised(point, plugin, sampled, p0, err) from err
        self._answered(point, plugin, sampled, p0, SUCCESS if verdict is None else verdict(result))
        return result

    async def status_async(
        self, point: str, plugin: str, sampled: bool, fn: Callable[[*Ts], Awaitable[Status]], /, *args: *Ts
    ) -> Status:
        """As :meth:`status`, for the binding cycle's coroutines (PreBind, Bind)."""
        p0 = _now() if sampled else 0.0
        try:
            status = await fn(*args)
        except Exception as err:
            raise self._raised(point, plugin, sampled, p0, err) from err
        return self._answered(point, plugin, sampled, p0, status)

    def _answered(self, point: str, plugin: str, sampled: bool, p0: float, status: Status) -> Status:
        """A returned Status: timed when sampled; an Error fails the call as a raise does."""
        if sampled:
            self._observe(plugin, point, status, p0)
        if status.code is Code.ERROR:
            raise PluginError(failure(point, plugin, status))
        return status

    def _raised(self, point: str, plugin: str, sampled: bool, p0: float, err: Exception) -> PluginError:
        """The PluginError for what a plugin raised. One that already names a plugin comes from an
        inner call (a per-node Score loop's row): its status is passed on as it is."""
        if isinstance(err, PluginError) and err.status.plugin:
            raised = PluginError(err.status)
        else:
            # The pod's condition carries the message; the stack is for whoever debugs the plugin.
            log.debug("Plugin %s failed at %s", plugin, point, exc_info=err)
            raised = PluginError(failure(point, plugin, err))
        if sampled:
            self._observe(plugin, point, raised.status, p0)
        return raised

    def _observe(self, plugin: str, point: str, status: Status, p0: float) -> None:
        self.metrics.observe_plugin(plugin, point, status.code.label, _now() - p0)
