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

#: Python 3.11's EnumType has a ``__getattr__``, which sends every ``Code.X`` through a slow
#: lookup (~0.15 µs): the per-call test reads the member from here.
_ERROR = Code.ERROR

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
    "FindOneNode": 'running FindOneNode plugin "{}"',
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
#: nothing at PostFilter, nor koord-scheduler at FindOneNode): only a raised exception gets the
#: point's wording there.
_OWN_WORDS = frozenset({"PostFilter", "FindOneNode"})


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


def _itself(status: Status) -> Status:
    return status


class PluginCalls:
    """Calls plugins for one framework, timing them into its metrics.

    The methods take the call's arguments positionally (no keyword packing), and an unsampled
    call is the plugin's own call inside one ``try`` plus one test of its answer's code. Each form
    names what the plugin answers: :meth:`value` no Status, :meth:`status` a Status,
    :meth:`pair` ``(result, Status)``, :meth:`call` what ``verdict`` reads the Status out of.

    The loops that call a plugin several times per pod (PreFilter, the batch Filters, PreScore,
    Score, Reserve) make an unsampled cycle's call themselves: a call through a method here costs
    about 0.5 µs, a few % of a pod's cycle over some fifty calls. They do what :meth:`status`
    does in place (the plugin's call and a test for Error in one ``try``) and leave a failure's
    Status to :func:`failure` and :meth:`raised`, so the words stay here; a sampled cycle calls
    through the methods, which time it.
    """

    __slots__ = ("metrics",)

    def __init__(self, metrics: FrameworkMetrics) -> None:
        self.metrics = metrics

    def value(self, point: str, plugin: str, sampled: bool, fn: Callable[[*Ts], R], /, *args: *Ts) -> R:
        """``fn(*args)`` for an answer that holds no Status (a batch Filter's codes, Score's scores);
        raises PluginError when it raises."""
        if sampled:
            return self._timed(point, plugin, None, fn, args)
        try:
            return fn(*args)
        except Exception as err:  # a plugin bug fails this pod's attempt, never the scheduler
            raise self._raised(point, plugin, False, 0.0, err) from err

    def status(
        self, point: str, plugin: str, sampled: bool, fn: Callable[[*Ts], Status], /, *args: *Ts
    ) -> Status:
        """``fn(*args)`` for a point whose plugins answer a Status; raises PluginError on a failure."""
        if sampled:
            return self._timed(point, plugin, _itself, fn, args)
        try:
            status = fn(*args)
        except Exception as err:
            raise self._raised(point, plugin, False, 0.0, err) from err
        if status.code is _ERROR:
            raise PluginError(failure(point, plugin, status))
        return status

    def pair(
        self, point: str, plugin: str, sampled: bool, fn: Callable[[*Ts], tuple[R, Status]], /, *args: *Ts
    ) -> tuple[R, Status]:
        """``fn(*args)`` for an answer that ends with its Status (PreFilter's, PostFilter's
        ``(result, status)``); raises PluginError on a failure."""
        if sampled:
            return self._timed(point, plugin, second, fn, args)
        try:
            result = fn(*args)
        except Exception as err:
            raise self._raised(point, plugin, False, 0.0, err) from err
        if result[1].code is _ERROR:
            raise PluginError(failure(point, plugin, result[1]))
        return result

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
        (None: it returns no Status, as :meth:`value`). Raises PluginError on a failure."""
        if sampled:
            return self._timed(point, plugin, verdict, fn, args)
        try:
            result = fn(*args)
        except Exception as err:
            raise self._raised(point, plugin, False, 0.0, err) from err
        if verdict is not None and (status := verdict(result)).code is _ERROR:
            raise PluginError(failure(point, plugin, status))
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
        if sampled:
            self._observe(plugin, point, status, p0)
        if status.code is _ERROR:
            raise PluginError(failure(point, plugin, status))
        return status

    def _timed(
        self,
        point: str,
        plugin: str,
        verdict: Callable[[R], Status] | None,
        fn: Callable[..., R],
        args: tuple[object, ...],
    ) -> R:
        """A sampled cycle's call: as the untimed forms, and its time and code observed."""
        p0 = _now()
        try:
            result = fn(*args)
        except Exception as err:
            raise self._raised(point, plugin, True, p0, err) from err
        status = SUCCESS if verdict is None else verdict(result)
        self._observe(plugin, point, status, p0)
        if status.code is _ERROR:
            raise PluginError(failure(point, plugin, status))
        return result

    def raised(self, point: str, plugin: str, err: Exception) -> PluginError:
        """The PluginError for what an untimed call raised (or a loop's own call, see the class). One
        that already names a plugin comes from an inner call (a per-node Score loop's row, or one
        of the methods here that failed it already): its status is passed on as it is."""
        return self._raised(point, plugin, False, 0.0, err)

    def _raised(self, point: str, plugin: str, sampled: bool, p0: float, err: Exception) -> PluginError:
        """As :meth:`raised`, observed when the call was timed."""
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
