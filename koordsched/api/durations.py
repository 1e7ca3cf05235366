"""Go ``time.Duration`` strings (``"15s"``, ``"1m30s"``, ``"500ms"``) as float seconds.

kube-scheduler's leader-election fields are ``metav1.Duration``, which only accepts
Go's syntax; a bare number such as ``15`` is an error there, and so it is here.
"""

from __future__ import annotations

import re

_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # micro sign
    "\u03bcs": 1e-6,  # Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_NUMBER = r"(?:\d+\.?\d*|\.\d+)"
# Longer units first, so "ms" is not read as "m" followed by a stray "s".
_UNIT = "|".join(sorted(map(re.escape, _UNIT_SECONDS), key=len, reverse=True))
_TERM = re.compile(rf"({_NUMBER})({_UNIT})")
_WHOLE = re.compile(rf"[-+]?(?:{_NUMBER}(?:{_UNIT}))+")


class DurationError(ValueError):
    """Text that Go's ``time.ParseDuration`` would reject."""


def parse_duration(text: str) -> float:
    """Seconds in ``text``; raises :class:`DurationError` on anything Go would not parse."""
    if text in ("0", "+0", "-0"):
        return 0.0
    if not _WHOLE.fullmatch(text):
        raise DurationError(
            f'invalid duration "{text}": want a Go duration such as "15s", "1m30s" or "500ms" '
            "(units ns, us, ms, s, m, h)"
        )
    sign = -1.0 if text.startswith("-") else 1.0
    return sign * sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _TERM.findall(text))


def duration_ns(text: str | None) -> int:
    """A Go duration as whole nanoseconds (0 when unset); raises DurationError when malformed.

    Durations are compared for equality (args against a NodeMetric's windows), so they are
    kept as integers, not floats.
    """
    if not text:
        return 0
    return round(parse_duration(text) * 1e9)
