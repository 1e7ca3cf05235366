"""Field errors worded as the Kubernetes API server words them, and the error for a refused object.

The API server reports each problem as ``<field path>: <type>: <value>: <detail>``
(``k8s.io/apimachinery/pkg/util/validation/field``), and a refused object as
``Pod "web-1" is invalid: <error>`` (or ``[<error>, <error>]`` for several). koordsched
uses the same words, so a message reads the same whether the API server or the scheduler
caught the problem.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from koordsched.api.quantity import describe_int

__all__ = [
    "Refused",
    "go_quote",
    "invalid",
    "invalid_object",
    "not_supported",
    "required",
]


class Refused(ValueError):
    """A well-formed object, or annotation, that the scheduler refuses.

    Raised by the checks that run where objects enter (the simulator's loader, the plugins'
    decode paths): the object is set aside with this message and everything else goes on.
    The simulator reports it as a warning, not as an unusable file: a cluster can hold it.
    """


_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def go_quote(value: str) -> str:
    """Go's ``strconv.Quote`` (``%q``): printable characters as they are, the rest escaped."""
    out = ['"']
    for c in value:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif c.isprintable():
            out.append(c)
        elif ord(c) < 0x80:
            out.append(f"\\x{ord(c):02x}")
        elif ord(c) <= 0xFFFF:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    out.append('"')
    return "".join(out)


#: A bad value longer than this is shortened in messages (a hostile one can be 256 KiB).
_MAX_SHOWN = 200


def _value(value: object) -> str:
    """A bad value as ``field.Error`` prints it: strings quoted, numbers and booleans bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        shown = go_quote(value[:_MAX_SHOWN])
        return shown if len(value) <= _MAX_SHOWN else shown + "..."
    if isinstance(value, int):
        return describe_int(value)
    return str(value)


def invalid(path: str, value: object, detail: str) -> str:
    """``field.Invalid``: ``spec.containers[0].ports[0].hostPort: Invalid value: 70000: ...``."""
    return f"{path}: Invalid value: {_value(value)}: {detail}"


def not_supported(path: str, value: object, supported: Iterable[str]) -> str:
    """``field.NotSupported``: ``...operator: Unsupported value: "Bogus": supported values: "Equal", ...``."""
    values = ", ".join(go_quote(v) for v in supported)
    return f"{path}: Unsupported value: {_value(value)}: supported values: {values}"


def required(path: str, detail: str = "") -> str:
    """``field.Required``."""
    return f"{path}: Required value" + (f": {detail}" if detail else "")


#: Field errors listed in one message; the rest are counted (a hostile object can have thousands).
MAX_LISTED = 10


def invalid_object(kind: str, name: str, errors: Sequence[str]) -> str:
    """The API server's ``<Kind> "<name>" is invalid: ...`` for one or more field errors."""
    listed = list(errors[:MAX_LISTED])
    if len(errors) > MAX_LISTED:
        listed.append(f"and {len(errors) - MAX_LISTED} more")
    body = listed[0] if len(listed) == 1 else "[" + ", ".join(listed) + "]"
    return f"{kind} {go_quote(name)} is invalid: {body}"
