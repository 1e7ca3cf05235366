"""Timestamps as the API server parses them.

``metav1.MicroTime`` (Event ``eventTime``, Lease ``acquireTime``/``renewTime``) is parsed with a
fixed layout that needs exactly six fractional digits (kubernetes#89156), and ``isoformat()``
drops the fraction whenever the microseconds happen to be 0, so both formats are spelled out.
"""

from __future__ import annotations

from datetime import UTC, datetime

_MICRO = "%Y-%m-%dT%H:%M:%S.%fZ"
_SECONDS = "%Y-%m-%dT%H:%M:%SZ"


def utcnow() -> datetime:
    return datetime.now(UTC)


def micro_time(dt: datetime | None = None) -> str:
    """A ``MicroTime``: UTC with exactly six fractional digits, ``2024-05-01T10:00:00.000000Z``."""
    return (dt or utcnow()).astimezone(UTC).strftime(_MICRO)


def rfc3339(dt: datetime | None = None) -> str:
    """A ``metav1.Time`` (condition ``lastTransitionTime``): UTC, whole seconds."""
    return (dt or utcnow()).astimezone(UTC).strftime(_SECONDS)
