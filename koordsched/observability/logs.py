"""Logging as kube-scheduler does it: klog's formats, ``--v`` levels and ``--vmodule``.

Every module logs through the standard library (``logging.getLogger(__name__)``); this module
sets up the one stderr handler (:func:`configure`, called by the CLI) and adds klog's
structured, verbosity-gated calls on top:

* ``log_v(log, 2, "Successfully bound pod to node", pod=ObjectRef(ns, name), node=n)`` is
  ``klog.V(2).InfoS``: written only when the caller's file runs at verbosity 2 or more;
* ``info_s(log, msg, **kv)`` and ``error_s(log, err, msg, **kv)`` are ``klog.InfoS`` and
  ``klog.ErrorS``; a plain ``log.info("%s ...", x)`` is ``klog.Infof``;
* a ``log.debug`` line stands for V(4), kube-scheduler's debug level.

Verbosity: ``--v=N`` (:func:`set_verbosity` at run time, from ``/debug/flags/v``) enables V(N)
and below everywhere; ``--vmodule=pattern=N,...`` raises it for the files whose name (without
``.py``) matches a glob pattern (or whose path does, for a pattern with a ``/``), as klog does:
the first matching pattern wins, and it can only raise the level ``--v`` gives. ``--log-level``,
when given, sets the Python level and wins over what ``--v`` would set (V lines are info lines).
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koordsched.observability.log_format import (
    DEBUG_V,
    ERR_ATTR,
    KV_ATTR,
    STRUCTURED_ATTR,
    V_ATTR,
    ComponentJsonFormatter,
    KlogTextFormatter,
    ObjectRef,
)
from koordsched.observability.log_handler import FlushingStderrHandler

__all__ = [
    "FORMATS",
    "LogConfigError",
    "ObjectRef",
    "configure",
    "error_s",
    "flush",
    "info_s",
    "log_v",
    "parse_vmodule",
    "set_verbosity",
    "v_enabled",
    "verbosity",
    "vmodule_pairs",
]

#: ``--logging-format`` values, as component-base registers them.
FORMATS = ("text", "json")


class LogConfigError(ValueError):
    """A logging option the scheduler cannot run with (the CLI exits 2 with this message)."""


@dataclass(frozen=True, slots=True)
class VmodulePattern:
    pattern: str
    level: int
    full: bool  # matched against the path (without .py) rather than the module name
    regex: re.Pattern[str]


def vmodule_pairs(text: str) -> tuple[tuple[str, int], ...]:
    """``--vmodule`` (``pattern=N,...``) as component-base reads it: (pattern, level) pairs.

    Empty items (a trailing comma) are skipped; a level is a base-10 uint that fits an int32.
    Raises :class:`LogConfigError` with component-base's message for a malformed item.
    """
    out: list[tuple[str, int]] = []
    for item in text.split(","):
        if not item:
            continue
        parts = item.split("=")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise LogConfigError(f'"{item}" does not have the pattern=N format')
        level_text = parts[1]
        if not level_text.isascii() or not level_text.isdigit():
            why = "invalid syntax"
        elif int(level_text) >= 2**31:
            why = "value out of range"
        else:
            out.append((parts[0], int(level_text)))
            continue
        raise LogConfigError(
            f'parsing verbosity in "{item}": strconv.ParseUint: parsing "{level_text}": {why}'
        )
    return tuple(out)


def parse_vmodule(value: str) -> tuple[VmodulePattern, ...]:
    """``--vmodule``'s patterns, compiled; raises :class:`LogConfigError` as :func:`vmodule_pairs`."""
    out: list[VmodulePattern] = []
    for pattern, level in vmodule_pairs(value):
        if level == 0:
            continue  # klog drops these: they cannot raise anything
        # Go's [^...] is fnmatch's [!...].
        glob = pattern.replace("[^", "[!")
        out.append(VmodulePattern(pattern, level, "/" in pattern, re.compile(fnmatch.translate(glob))))
    return tuple(out)


@dataclass(slots=True)
class _State:
    verbosity: int = 0
    vmodule: tuple[VmodulePattern, ...] = ()
    #: The Python level --log-level asked for; None: derived from the verbosity.
    explicit_level: int | None = None
    #: Level of each source file under vmodule (klog caches per call site, we per file).
    by_file: dict[str, int] = field(default_factory=dict)


_state = _State()
_lock = threading.Lock()
_handler: FlushingStderrHandler | None = None


def _file_level(path: str) -> int:
    level = _state.by_file.get(path)
    if level is None:
        stem = os.path.splitext(path)[0]
        module = os.path.basename(stem)
        level = _state.verbosity
        for pat in _state.vmodule:
            if pat.regex.match(stem if pat.full else module):
                level = max(level, pat.level)
                break
        _state.by_file[path] = level
    return level


def _enabled(level: int, path: str) -> bool:
    if _state.verbosity >= level:
        return True
    return bool(_state.vmodule) and _file_level(path) >= level


def v_enabled(level: int, logger: logging.Logger | None = None, *, depth: int = 1) -> bool:
    """klog's ``V(level).Enabled()`` for the calling file (``depth`` frames up)."""
    if logger is not None and not logger.isEnabledFor(logging.INFO):
        return False
    if _state.verbosity >= level:
        return True
    if not _state.vmodule:
        return False
    return _file_level(sys._getframe(depth).f_code.co_filename) >= level


def _log(
    logger: logging.Logger,
    levelno: int,
    msg: str,
    err: object,
    v: int | None,
    kv: Mapping[str, Any],
    depth: int,
) -> None:
    extra = {STRUCTURED_ATTR: True, KV_ATTR: tuple(kv.items()), ERR_ATTR: err, V_ATTR: v}
    logger.log(levelno, msg, extra=extra, stacklevel=depth + 2)


def log_v(logger: logging.Logger, level: int, msg: str, /, *, depth: int = 1, **kv: Any) -> None:
    """``klog.V(level).InfoS(msg, kv...)``: cheap when the level is off (nothing is formatted).

    ``depth`` is how many frames up the call site is (1: the caller): it names the file and
    line in the header and is what ``--vmodule`` matches.
    """
    if not logger.isEnabledFor(logging.INFO):
        return
    if _state.verbosity < level and not (
        _state.vmodule and _file_level(sys._getframe(depth).f_code.co_filename) >= level
    ):
        return
    _log(logger, logging.INFO, msg, None, level, kv, depth)


def info_s(logger: logging.Logger, msg: str, /, *, depth: int = 1, **kv: Any) -> None:
    """``klog.InfoS(msg, kv...)``."""
    if logger.isEnabledFor(logging.INFO):
        _log(logger, logging.INFO, msg, None, None, kv, depth)


def error_s(logger: logging.Logger, err: object, msg: str, /, *, depth: int = 1, **kv: Any) -> None:
    """``klog.ErrorS(err, msg, kv...)``; ``err`` is an exception or its message (None: no ``err``)."""
    if logger.isEnabledFor(logging.ERROR):
        _log(logger, logging.ERROR, msg, err, None, kv, depth)


class _DebugIsV4(logging.Filter):
    """A DEBUG record passes where V(4) is on for its file (or --log-level debug asked for all)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.INFO or _state.explicit_level is not None:
            return True
        return _enabled(DEBUG_V, record.pathname)


def _python_level() -> int:
    if _state.explicit_level is not None:
        return _state.explicit_level
    top = max((p.level for p in _state.vmodule), default=0)
    return logging.DEBUG if max(_state.verbosity, top) >= DEBUG_V else logging.INFO


def verbosity() -> int:
    """The global ``--v`` level now."""
    return _state.verbosity


def set_verbosity(v: int) -> None:
    """Change ``--v`` at run time (kube-scheduler's ``PUT /debug/flags/v``)."""
    if v < 0:
        raise LogConfigError(f"verbosity must be 0 or more, not {v}")
    with _lock:
        _state.verbosity = v
        _state.by_file = {}
        logging.getLogger().setLevel(_python_level())


def configure(
    *,
    fmt: str = "text",
    verbosity: int = 0,
    vmodule: str = "",
    flush_frequency: float = 5.0,
    level: str | None = None,
) -> None:
    """Set up stderr logging: the format, ``--v``, ``--vmodule``, ``--log-flush-frequency`` and
    the ``--log-level`` that wins when given. May run again (tests): one handler, replaced settings."""
    global _handler
    if fmt not in FORMATS:
        raise LogConfigError(f'format: Invalid value: "{fmt}": Unsupported log format')
    if verbosity < 0:
        raise LogConfigError(f"verbosity must be 0 or more, not {verbosity}")
    patterns = parse_vmodule(vmodule)
    explicit = None
    if level is not None:
        explicit = logging.getLevelName(level.upper())
        if not isinstance(explicit, int):
            raise LogConfigError(f"unknown log level {level!r}")
        if explicit <= logging.DEBUG:
            verbosity = max(verbosity, DEBUG_V)  # debug has always meant what --v=4 shows
    with _lock:
        _state.verbosity, _state.vmodule, _state.explicit_level = verbosity, patterns, explicit
        _state.by_file = {}
        root = logging.getLogger()
        if _handler is None:
            _handler = FlushingStderrHandler(flush_frequency)
            _handler.addFilter(_DebugIsV4())
            root.addHandler(_handler)
        else:
            _handler.flush()
            _handler.set_flush_frequency(flush_frequency)
        _handler.setFormatter(ComponentJsonFormatter() if fmt == "json" else KlogTextFormatter())
        root.setLevel(_python_level())


def flush() -> None:
    """Write out what the stderr handler holds (the CLI calls this before it returns)."""
    if _handler is not None:
        _handler.flush()
