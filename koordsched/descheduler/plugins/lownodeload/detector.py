"""Koordinator's anomaly ``BasicDetector`` and the per-node cache LowNodeLoad keeps of them.

A detector starts OK. Each over-threshold round marks it abnormal; once the consecutive
abnormal count is *more than* ``consecutiveAbnormalities`` it turns Anomaly (6 rounds with
the default 5), and the counters start afresh. Anomaly lasts ``timeout`` (1m), or until a
normal mark. A normal mark in OK resets the abnormal streak. Detectors not touched for
``detectorCacheTimeout`` (5m) are forgotten, as the go-cache entries are.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

OK: Final = "OK"
ANOMALY: Final = "Anomaly"


@dataclass
class Detector:
    timeout: float
    abnormalities: int
    state: str = OK
    consecutive_abnormal: int = 0
    consecutive_normal: int = 0
    #: When an Anomaly state ends by itself (wall seconds); None in OK.
    expires: float | None = None

    def current(self, now: float) -> str:
        if self.state == ANOMALY and self.expires is not None and self.expires < now:
            self._set(OK, now)
        return self.state

    def mark(self, normal: bool, now: float) -> str:
        state = self.current(now)
        if normal:
            self.consecutive_normal += 1
            self.consecutive_abnormal = 0
            if state == ANOMALY:
                self._set(OK, now)
        elif state == OK:
            self.consecutive_abnormal += 1
            self.consecutive_normal = 0
            if self.consecutive_abnormal > self.abnormalities:
                self._set(ANOMALY, now)
        return self.current(now)

    def marks_to_anomaly(self) -> int | None:
        """Abnormal marks still needed to turn Anomaly (None unless counting a streak in OK)."""
        if self.state != OK or self.consecutive_abnormal == 0:
            return None
        return self.abnormalities + 1 - self.consecutive_abnormal

    def reset(self) -> None:
        self.state = OK
        self.consecutive_abnormal = self.consecutive_normal = 0
        self.expires = None

    def _set(self, state: str, now: float) -> None:
        if state == self.state:
            return
        self.state = state
        self.consecutive_abnormal = self.consecutive_normal = 0
        self.expires = now + self.timeout if state == ANOMALY else None


@dataclass
class DetectorCache:
    #: Seconds an untouched detector is kept.
    ttl: float
    _entries: dict[str, tuple[Detector, float]] = field(default_factory=dict)

    def get(self, node: str, now: float) -> Detector | None:
        entry = self._entries.get(node)
        if entry is None:
            return None
        if entry[1] < now:
            del self._entries[node]
            return None
        return entry[0]

    def put(self, node: str, detector: Detector, now: float) -> None:
        self._entries[node] = (detector, now + self.ttl)

    def __len__(self) -> int:
        return len(self._entries)

    def detectors(self) -> Iterator[Detector]:
        for detector, _ in self._entries.values():
            yield detector
