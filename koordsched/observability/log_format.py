"""The two log formats kube-scheduler writes: klog's text lines and component-base's JSON.

Text (klog v2's header, then its structured ``InfoS`` body)::

    I1202 05:05:37.392000   12345 schedule_one.py:123] "Successfully bound pod to node" pod="ns/p" node="n1"

The header is ``Lmmdd hh:mm:ss.uuuuuu threadid file:line] ``: the severity letter (I, W, E, F),
the local time to the microsecond, the thread id right-aligned in 7 columns, the file's base
name and line. A structured message is quoted as Go's ``strconv.Quote`` does and followed by
``key=value`` pairs (strings quoted, numbers and booleans bare, multi-line strings as
``key=<`` + tab-indented lines + `` >``); a plain ``logger.info("...%s", x)`` line with no
pairs (no ``extra=``, no exception) is written as ``klog.Infof`` writes it, unquoted. No
library writes klog's format, so this one is written here.

JSON (component-base's zap encoder, one object per line, through python-json-logger)::

    {"ts":1701490737392.0,"caller":"scheduler/schedule_one.py:123","msg":"...","v":2,"pod":{...}}

``ts`` is milliseconds since the epoch (component-base's ``epochMillisTimeEncoder``), ``caller``
the last directory and the file, ``v`` the verbosity of an info line (warnings are info lines
at v=0 there; errors carry no ``v``), then the key/value pairs, then ``err`` for an error.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.msgspec import MsgspecFormatter

#: Record attributes the structured API (:mod:`koordsched.observability.logs`) sets.
KV_ATTR = "klog_kv"  # tuple of (key, value) pairs, in call order
ERR_ATTR = "klog_err"  # the error of an ErrorS-style line
V_ATTR = "klog_v"  # the V level of a verbosity-gated info line
STRUCTURED_ATTR = "klog_structured"  # the message is a constant to quote, not a %-format

#: What a Python DEBUG record stands for in klog's terms: kube-scheduler's --v=4 is "debug".
DEBUG_V = 4

_OWN_ATTRS = (KV_ATTR, ERR_ATTR, V_ATTR, STRUCTURED_ATTR)
#: Attributes every LogRecord has (and ours): anything else on a record came from ``extra=``.
_SKIP = frozenset((*RESERVED_ATTRS, *_OWN_ATTRS, "message", "asctime"))


class ObjectRef:
    """klog's ``KObj``: ``ns/name`` in text, ``{"name": ..., "namespace": ...}`` in JSON."""

    __slots__ = ("name", "namespace")

    def __init__(self, namespace: str, name: str) -> None:
        self.namespace = namespace
        self.name = name

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def log_json(self) -> dict[str, str]:
        return {"name": self.name, "namespace": self.namespace} if self.namespace else {"name": self.name}


def severity_letter(levelno: int) -> str:
    if levelno >= logging.CRITICAL:
        return "F"
    if levelno >= logging.ERROR:
        return "E"
    if levelno >= logging.WARNING:
        return "W"
    return "I"  # klog has no debug severity: V(n) lines are info


def v_of(record: logging.LogRecord) -> int:
    """The V level a record stands for: its own, 4 for DEBUG, 0 for info and warnings."""
    level = getattr(record, V_ATTR, None)
    if level is not None:
        return int(level)
    return DEBUG_V if record.levelno < logging.INFO else 0


def go_quote(text: str) -> str:
    """Go's ``strconv.Quote``: printable runes as they are, the rest escaped."""
    out = ['"']
    for ch in text:
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        else:
            cp = ord(ch)
            if cp < 0x20 or cp == 0x7F:
                out.append(f"\\x{cp:02x}")
            elif cp < 0x10000:
                out.append(f"\\u{cp:04x}")
            else:
                out.append(f"\\U{cp:08x}")
    out.append('"')
    return "".join(out)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_float(value: float) -> str:
    """A float as Go's ``%v`` prints it (``strconv.FormatFloat(f, 'g', -1, 64)``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digits, exp = Decimal(repr(value)).as_tuple()
    assert isinstance(exp, int)
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    exp += len("".join(map(str, digits))) - len(ds)
    point = len(ds) + exp  # digits before the decimal point
    x = point - 1  # the decimal exponent
    minus = "-" if sign else ""
    if x < -4 or x >= 6:  # shortest %g switches to an exponent from 1e+06 on
        mantissa = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{minus}{mantissa}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{ds}"
    if point >= len(ds):
        return minus + ds + "0" * (point - len(ds))
    return f"{minus}{ds[:point]}.{ds[point:]}"


def _plain(value: Any) -> str:
    """A value inside a Go ``%+v`` composite: strings bare."""
    if isinstance(value, str):
        return value
    return _bare(value) or str(value)


def _bare(value: Any) -> str | None:
    """The unquoted text of a value klog writes bare (numbers, booleans, nil, slices, maps)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return "[" + " ".join(_plain(v) for v in items) + "]"
    if isinstance(value, dict):
        pairs = sorted(value.items(), key=lambda kv: str(kv[0]))
        return "map[" + " ".join(f"{_plain(k)}:{_plain(v)}" for k, v in pairs) + "]"
    return None


def text_value(value: Any) -> str:
    """``=value`` as klog's text serializer writes it, the ``=`` included."""
    bare = _bare(value)
    if bare is not None:
        return "=" + bare
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    if "\n" not in text:
        return "=" + go_quote(text)
    # klog's multi-line form: tab-indented lines, the end marker indented with a space.
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return "=<\n" + "".join(f"\t{line}\n" for line in lines) + " >"


def json_value(value: Any) -> Any:
    """A value as zap's ``Any`` encodes it: JSON scalars as they are, errors and others as text."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else go_float(value)  # zap writes "NaN", "+Inf"
    if isinstance(value, ObjectRef):
        return value.log_json()
    if isinstance(value, list | tuple | set | frozenset):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    return str(value)


def _exception_text(record: logging.LogRecord, formatter: logging.Formatter) -> tuple[str, str] | None:
    """``(err, stacktrace)`` of a record logged with ``exc_info``."""
    if not record.exc_info or record.exc_info[1] is None:
        return None
    exc = record.exc_info[1]
    if not record.exc_text:
        record.exc_text = formatter.formatException(record.exc_info)
    return f"{type(exc).__name__}: {exc}", record.exc_text


def key_values(record: logging.LogRecord) -> Iterator[tuple[str, Any]]:
    """The record's key/value pairs: the structured API's, then anything passed as ``extra=``."""
    yield from getattr(record, KV_ATTR, ())
    for key, value in record.__dict__.items():
        if key not in _SKIP and not key.startswith("_"):
            yield key, value


class KlogTextFormatter(logging.Formatter):
    """klog's text format (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        t = record.created
        lt = time.localtime(t)
        micros = int((t - math.floor(t)) * 1_000_000)
        # Formatted by the handler in the thread that logged (FlushingStderrHandler formats in
        # emit), so the native id is the logging thread's; the main thread's equals the pid,
        # which is what klog writes there.
        tid = threading.get_native_id()
        parts = [
            f"{severity_letter(record.levelno)}{lt.tm_mon:02d}{lt.tm_mday:02d} "
            f"{lt.tm_hour:02d}:{lt.tm_min:02d}:{lt.tm_sec:02d}.{micros:06d} {tid:7d} "
            f"{record.filename}:{record.lineno}] "
        ]
        structured = getattr(record, STRUCTURED_ATTR, False)
        err = getattr(record, ERR_ATTR, None)
        exc = _exception_text(record, self)
        if err is None and exc is not None:
            err = exc[0]
        pairs = [f" {k}{text_value(v)}" for k, v in key_values(record)]
        if err is not None:
            pairs.insert(0, " err" + text_value(str(err)))
        if exc is not None:
            pairs.append(" stacktrace" + text_value(exc[1]))
        if structured or pairs:
            # InfoS: the message quoted, so a parser finds where the pairs start.
            parts.append(go_quote(str(record.msg) if structured else record.getMessage()))
        else:
            parts.append(record.getMessage())  # Infof: the text as it is
        parts.extend(pairs)
        return "".join(parts)


def _caller(record: logging.LogRecord) -> str:
    """zap's ShortCallerEncoder: the file's directory and name, and the line."""
    parent = os.path.basename(os.path.dirname(record.pathname))
    return f"{parent}/{record.filename}:{record.lineno}" if parent else f"{record.filename}:{record.lineno}"


class ComponentJsonFormatter(MsgspecFormatter):
    """component-base's JSON format (see the module docstring) on python-json-logger."""

    def __init__(self) -> None:
        super().__init__(reserved_attrs=sorted(_SKIP))

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        log_data["ts"] = record.created * 1000.0
        log_data["caller"] = _caller(record)
        log_data["msg"] = str(record.msg) if getattr(record, STRUCTURED_ATTR, False) else record.message
        if record.levelno < logging.ERROR:
            log_data["v"] = v_of(record)
        for key, value in key_values(record):
            log_data[key] = json_value(value)
        for key, value in message_dict.items():  # logger.info({...}): python-json-logger's dict message
            if key not in ("exc_info", "stack_info"):
                log_data[key] = json_value(value)
        err = getattr(record, ERR_ATTR, None)
        exc = _exception_text(record, self)
        if err is None and exc is not None:
            err = exc[0]
        if err is not None:
            log_data["err"] = str(err)
        if exc is not None:
            log_data["stacktrace"] = exc[1]
        if record.stack_info:
            log_data["stack"] = self.formatStack(record.stack_info)
