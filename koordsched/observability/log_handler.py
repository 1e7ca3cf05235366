"""The stderr handler behind ``--log-flush-frequency``.

klog writes stderr as it logs and flushes what it buffers every ``--log-flush-frequency`` (5 s
by default). Here each record is formatted when it is logged (in the logging thread, so the
klog header carries that thread's id), and:

* a V(0) line (start-up, leader election, cache sync), a warning or an error is written at
  once, after whatever is buffered, so the order holds and nothing an operator waits for is late;
* the high-volume lines, V(1) and above (kube-scheduler's per-pod V(2) lines, debug), are
  buffered and written at the latest ``flush_frequency`` seconds later (a daemon thread's
  tick), or sooner when the buffer holds more than :data:`MAX_BUFFERED` characters;
* on :func:`logging.shutdown` (run at interpreter exit) and whenever :meth:`flush` is called
  everything is written: the CLI flushes before it returns, so nothing logged is lost on exit.

``flush_frequency <= 0`` writes every record at once, as Python's StreamHandler does.
"""

from __future__ import annotations

import logging
import sys
import threading

from koordsched.observability.log_format import v_of

#: Write the buffer out once it holds this many characters, whatever the clock says.
MAX_BUFFERED = 64 * 1024


class FlushingStderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is at flush time (test runners swap it per test)."""

    def __init__(self, flush_frequency: float = 5.0) -> None:
        super().__init__()
        self._buffer: list[str] = []
        self._size = 0
        self._frequency = 0.0
        self._wake = threading.Event()
        self._ticker: threading.Thread | None = None
        self.set_flush_frequency(flush_frequency)

    @property
    def flush_frequency(self) -> float:
        return self._frequency

    def set_flush_frequency(self, seconds: float) -> None:
        self._frequency = seconds
        if seconds > 0 and self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="log-flush", daemon=True)
            self._ticker.start()
        self._wake.set()  # the ticker picks up the new period (or flushes what is held)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + "\n"
        except Exception:
            self.handleError(record)
            return
        self._buffer.append(line)
        self._size += len(line)
        if self._frequency <= 0 or v_of(record) == 0 or self._size > MAX_BUFFERED:
            self._write_out()

    def flush(self) -> None:
        self.acquire()
        try:
            self._write_out()
        finally:
            self.release()

    def close(self) -> None:
        self.flush()
        super().close()

    @property
    def pending(self) -> int:
        """Characters logged but not yet written (for tests)."""
        return self._size

    def _write_out(self) -> None:
        """Write what is buffered; the caller holds the handler's lock."""
        if not self._buffer:
            return
        text = "".join(self._buffer)
        self._buffer.clear()
        self._size = 0
        stream = sys.stderr
        if stream is None:  # pythonw, or stderr closed: nowhere to write
            return
        try:
            stream.write(text)
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr must not break the caller
            pass

    def _tick(self) -> None:
        while True:
            period = self._frequency
            self._wake.wait(period if period > 0 else None)
            self._wake.clear()
            self.flush()
