"""Decoding JSON annotations that people write by hand.

Koordinator's own documentation shows a device hint with a ``// apply VF`` comment inside
the JSON; Go's encoding/json refuses it, so the published example pod never schedules
there. koordsched decodes strictly first and, only when that fails on syntax, once more
with ``//`` and ``/* */`` comments removed (outside strings). Valid JSON is therefore
read exactly as Koordinator reads it; commented JSON is read as its author meant.

Every annotation is decoded through :func:`decode_json`, which bounds what a hostile value
can cost: no more than Kubernetes allows for all of an object's annotations together
(256 KiB), and no deeper nesting than Python's recursion (msgspec raises RecursionError,
not a DecodeError, past it; here it is a DecodeError naming the problem).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

__all__ = ["MAX_ANNOTATION_BYTES", "decode_annotation", "decode_json", "strip_json_comments"]

#: ``TotalAnnotationSizeLimitB``: the API server refuses objects whose annotations exceed it.
MAX_ANNOTATION_BYTES: Final = 256 * 1024


def decode_json(raw: str | bytes, type_: Any = Any) -> Any:
    """``msgspec.json.decode(raw, type=type_)`` with a size bound; a value too large or nested too
    deeply raises :class:`msgspec.DecodeError`, like any other unreadable value."""
    if len(raw) > MAX_ANNOTATION_BYTES:
        raise msgspec.DecodeError(
            f"value of {len(raw)} bytes is larger than the {MAX_ANNOTATION_BYTES} bytes "
            "Kubernetes allows for all of an object's annotations"
        )
    try:
        return msgspec.json.decode(raw, type=type_)
    except RecursionError:
        raise msgspec.DecodeError("JSON nested too deeply") from None


def strip_json_comments(text: str) -> str:
    """``text`` without ``//`` line comments and ``/* */`` block comments outside JSON strings."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def decode_annotation(raw: str | bytes, type_: Any) -> Any:
    """``msgspec.json.decode(raw, type=type_)``, tolerating comments as described above.

    Raises the strict decode's error when the text without comments does not decode either,
    so messages name the real problem.
    """
    try:
        return decode_json(raw, type_)
    except msgspec.DecodeError as strict_error:
        if isinstance(strict_error, msgspec.ValidationError):
            raise
        text = raw.decode() if isinstance(raw, bytes) else raw
        lenient = strip_json_comments(text)
        if lenient == text:
            raise
        try:
            return decode_json(lenient, type_)
        except msgspec.DecodeError:
            raise strict_error from None
