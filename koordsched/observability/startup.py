"""How long start-up took, phase by phase, counted from the moment the process started.

``koordsched run`` must answer /livez within about a second of starting and /readyz soon after
its caches sync; these marks say where the time went (in the log: ``start-up: <phase> after
1.23s (cpu 0.98s)``), which is what bench/coldstart.py reads. The clock starts when the kernel
started the process (``/proc/self/stat``), so interpreter start-up and imports count too.
"""

from __future__ import annotations

import logging
import os
import time

log = logging.getLogger("koordsched.startup")

#: The phases ``koordsched run`` marks, in order.
SERVING = "serving"
PLUGINS_LOADED = "plugins loaded"
KERNELS_WARM = "kernels warm"
CACHES_SYNCED = "caches synced"
READY = "ready"


def _process_start_wall() -> float | None:
    """When the process started, as Unix time; None where /proc cannot say."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        with open("/proc/stat", "rb") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    # Field 22 (starttime, in clock ticks since boot) counts from after the command name, which
    # may itself hold spaces and parentheses: split after its closing parenthesis.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        ticks = int(fields[19])
    except (IndexError, ValueError):
        return None
    return btime + ticks / os.sysconf("SC_CLK_TCK")


# Read at import, which ``koordsched run`` does first: "now" is the fallback when /proc cannot say.
_STARTED = _process_start_wall() or time.time()


def since_process_start() -> float:
    """Seconds since this process started (to the clock tick, 10 ms)."""
    return max(0.0, time.time() - _STARTED)


class StartupTimeline:
    """The start-up phases reached so far: name -> (seconds since the process started, CPU seconds)."""

    def __init__(self) -> None:
        self.marks: dict[str, tuple[float, float]] = {}

    def mark(self, phase: str) -> None:
        """Record (and log) ``phase`` the first time it is reached."""
        if phase in self.marks:
            return
        wall, cpu = since_process_start(), time.process_time()
        self.marks[phase] = (wall, cpu)
        log.info("start-up: %s after %.2fs (cpu %.2fs)", phase, wall, cpu)

    def reached(self, phase: str) -> bool:
        return phase in self.marks
