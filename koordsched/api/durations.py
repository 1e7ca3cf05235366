"""Go ``time.Duration`` strings (``"15s"``, ``"1m30s"``, ``"500ms"``) as float seconds.

kube-scheduler's leader-election fields are ``metav1.Duration``, which only accepts
Go's syntax; a bare number such as ``15`` is an error there, and so it is here.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Final

#: ``time.Duration`` is int64 nanoseconds: Go's ParseDuration refuses anything longer.
MAX_DURATION_NS: Final = 2**63 - 1
#: The whole seconds a ``time.Duration`` holds (for int fields Go multiplies by ``time.Second``).
MAX_DURATION_SECONDS: Final = MAX_DURATION_NS // 10**9
_UNIT_NS: Final = {
    "ns": 1,
    "us": 10**3,
    "\u00b5s": 10**3,
    "\u03bcs": 10**3,
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}

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
    terms = _TERM.findall(text)
    # Exact nanoseconds first: Go refuses a duration past int64 ("99999999999h"), and a float
    # would not notice.
    limit = MAX_DURATION_NS + (1 if text.startswith("-") else 0)  # -2**63 itself fits
    if sum(_exact(number) * _UNIT_NS[unit] for number, unit in terms) > limit:
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise DurationError(
            f'invalid duration "{shown}": overflows time.Duration (int64 nanoseconds, about 292 years)'
        )
    sign = -1.0 if text.startswith("-") else 1.0
    return sign * sum(float(number) * _UNIT_SECONDS[unit] for number, unit in terms)


def _exact(number: str) -> Fraction:
    """``number`` exactly, bounded in cost: more than 30 whole digits is over any limit anyway, and
    digits past the 30th after the point are below a nanosecond."""
    whole, _, frac = number.partition(".")
    whole = whole.lstrip("0")
    if len(whole) > 30:
        return Fraction(10**30)
    return Fraction(f"{whole or 0}.{frac[:30] or 0}")


def duration_ns(text: str | None) -> int:
    """A Go duration as whole nanoseconds (0 when unset); raises DurationError when malformed.

    Durations are compared for equality (args against a NodeMetric's windows), so they are
    kept as integers, not floats.
    """
    if not text:
        return 0
    return round(parse_duration(text) * 1e9)


def format_duration(seconds: float) -> str:
    """Go's ``time.Duration.String``: ``"10m0s"``, ``"1.5s"``, ``"300ms"``, ``"0s"``."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < 10**3:
        return f"{sign}{ns}ns"
    if ns < 10**6:
        return f"{sign}{_fraction(ns, 10**3)}\u00b5s"
    if ns < 10**9:
        return f"{sign}{_fraction(ns, 10**6)}ms"
    hours, rest = divmod(ns, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    text = f"{_fraction(rest, 10**9)}s"
    if hours:
        text = f"{hours}h{minutes}m{text}"
    elif minutes:
        text = f"{minutes}m{text}"
    return sign + text


def _fraction(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = str(frac).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"
