"""Field errors worded as the Kubernetes API server words them, and the error for a refused object.

The API server reports each problem as ``<field path>: <type>: <value>: <detail>``
(``k8s.io/apimachinery/pkg/util/validation/field``), and a refused object as
``Pod "web-1" is invalid: <error>`` (or ``[<error>, <error>]`` for several). koordsched
uses the same words, so a message reads the same whether the API server or the scheduler
caught the problem.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

__all__ = [
    "Refused",
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


def _quote(value: str) -> str:
    # Go's %q; JSON's escaping is the same for everything a manifest holds.
    return json.dumps(value, ensure_ascii=False)


def _value(value: object) -> str:
    """A bad value as ``field.Error`` prints it: strings quoted, numbers and booleans bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _quote(value)
    return str(value)


def invalid(path: str, value: object, detail: str) -> str:
    """``field.Invalid``: ``spec.containers[0].ports[0].hostPort: Invalid value: 70000: ...``."""
    return f"{path}: Invalid value: {_value(value)}: {detail}"


def not_supported(path: str, value: object, supported: Iterable[str]) -> str:
    """``field.NotSupported``: ``...operator: Unsupported value: "Bogus": supported values: "Equal", ...``."""
    values = ", ".join(_quote(v) for v in supported)
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
    return f"{kind} {_quote(name)} is invalid: {body}"
