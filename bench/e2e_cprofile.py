"""``koordsched`` under cProfile timed by the loop thread's CPU clock, for ``bench/e2e.py --cprofile``.

``python -m cProfile`` times with the wall clock: on a contended machine a ``socket.send`` that
wakes the API server on loopback is often preempted, and the wait is charged to the send. Timing
with ``time.thread_time`` charges each function only the CPU the scheduler's thread spent (its
asyncio loop runs the cycles, the watches and the writes), so the shares are of what it costs.

    python bench/e2e_cprofile.py OUT.prof run --config ...   # koordsched's own arguments follow
"""

from __future__ import annotations

import cProfile
import sys
import time


def main() -> int:
    out, argv = sys.argv[1], sys.argv[2:]
    from koordsched.cli import main as koordsched_main  # imported before profiling starts

    prof = cProfile.Profile(time.thread_time)
    rc: object = 0
    try:
        rc = prof.runcall(koordsched_main, argv)
    except SystemExit as exc:
        rc = exc.code
    finally:
        prof.dump_stats(out)
    return rc if isinstance(rc, int) else 1


if __name__ == "__main__":
    sys.exit(main())
