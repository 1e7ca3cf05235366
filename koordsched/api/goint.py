"""Integers as Go's ``strconv`` reads them, for values Koordinator parses with ``strconv.Atoi`` or
``strconv.ParseInt(s, 10, bits)``.

Python's ``int()`` is more lenient: it strips whitespace (" 2"), reads any Unicode decimal digit
("२" is 2) and skips underscores ("2_0" is 20). Go accepts an optional sign and ASCII digits
only, within the type's range; anything else is an error there, so it is here.
"""

from __future__ import annotations

_DIGITS = frozenset("0123456789")


class GoIntError(ValueError):
    """Not an integer Go's ``strconv`` would read; the message says why, as Go's does."""


def parse_int(text: str, bits: int = 64) -> int:
    """``strconv.ParseInt(text, 10, bits)`` (``strconv.Atoi`` is ``bits=64`` on 64-bit Go)."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not _DIGITS.issuperset(body):
        raise GoIntError(f'strconv.ParseInt: parsing "{text}": invalid syntax')
    value = int(text)
    limit = 1 << (bits - 1)
    if not -limit <= value < limit:
        raise GoIntError(f'strconv.ParseInt: parsing "{text}": value out of range')
    return value
