"""What ``/debug/pprof/*`` serves: a sampled profile of the event loop, a heap view and every stack.

**CPU** (``/debug/pprof/profile``): pyinstrument samples the thread that starts it, the event
loop's, where every scheduling cycle runs (the only other threads are start-up's compile and
warm-up). Its samples are wall-clock time: a busy loop shows the code that keeps it busy, an idle
one shows the selector's poll, which is what a blocked or slow loop needs to be told apart by.
The sample types are therefore ``samples/count`` and ``wall/nanoseconds``. Sampling runs only
while a profile is asked for; one profile at a time (pyinstrument's hook is per thread).

**Heap** (``/debug/pprof/heap``): tracemalloc, off until asked, because tracing every allocation
costs the scheduler time and memory. A request traces for a window (``seconds``, default 30 s)
and answers what was allocated in it and is still alive at its end, per allocating stack, as
``inuse_objects/count`` and ``inuse_space/bytes``; tracing stops with the window, unless it was
already on when the window began (``PYTHONTRACEMALLOC``), in which case the answer is a snapshot
of everything traced so far, at once.

**Stacks** (``/debug/pprof/goroutine``): every thread's stack and every asyncio task's await chain.
"""

from __future__ import annotations

import ast
import asyncio
import gc
import linecache
import sys
import threading
import time
import tracemalloc
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from koordsched.observability.pprof import Frame, ProfileBuilder

#: pyinstrument's default, and Go's rate is 100 Hz: 1 ms keeps short cycles visible.
SAMPLE_INTERVAL = 0.001
#: Frames kept per allocation while tracing the heap (tracemalloc's cost grows with it).
HEAP_FRAMES = 64


class ProfilerBusy(Exception):
    """A profile of this kind is being taken already; Go's message for it is the text."""


# --- CPU ------------------------------------------------------------------------------------------


class CpuProfiler:
    """Samples the event loop's thread for a while; one profile at a time."""

    def __init__(self, interval: float = SAMPLE_INTERVAL) -> None:
        self.interval = interval
        self._busy = False

    @property
    def busy(self) -> bool:
        return self._busy

    async def profile(self, seconds: float) -> bytes:
        """Sample for ``seconds`` (the loop keeps running meanwhile); the gzipped pprof profile.

        Must run on the event loop's thread. Raises :class:`ProfilerBusy` when another is running.
        """
        if self._busy:
            raise ProfilerBusy("cpu profiling already in use")
        # Imported when first asked: it would add tens of milliseconds to start-up.
        from pyinstrument import Profiler

        self._busy = True
        try:
            profiler = Profiler(interval=self.interval, async_mode="disabled")
            started = time.time_ns()
            profiler.start()
            try:
                await asyncio.sleep(seconds)
            finally:
                session = profiler.stop()
            return cpu_profile(session.frame_records, self.interval, started, time.time_ns() - started)
        finally:
            self._busy = False


def cpu_profile(
    records: Sequence[tuple[list[str], float]], interval: float, time_nanos: int, duration_nanos: int
) -> bytes:
    """pyinstrument's frame records (root first, seconds since the last sample) as a pprof profile."""
    builder = ProfileBuilder(
        sample_types=(("samples", "count"), ("wall", "nanoseconds")),
        period_type=("wall", "nanoseconds"),
        period=round(interval * 1e9),
        time_nanos=time_nanos,
        duration_nanos=duration_nanos,
    )
    for stack, seconds in records:
        # The root entry is pyinstrument's thread marker, not a frame.
        frames = [_pyinstrument_frame(s) for s in stack if "\x00<thread>\x00" not in s]
        frames.reverse()
        builder.add(frames, (1, round(seconds * 1e9)))
    return builder.gzipped()


@lru_cache(maxsize=65536)
def _pyinstrument_frame(info: str) -> Frame:
    """``function\\0file\\0first_line`` with ``\\1``-separated attributes (``l<line>``, ``c<class>``)."""
    from pyinstrument.frame_info import parse_frame_info

    identifier, attributes = parse_frame_info(info)
    name, _, rest = identifier.partition("\x00")
    filename, _, first = rest.partition("\x00")
    line = 0
    for attribute in attributes:
        if attribute.startswith("l"):
            line = int(attribute[1:])
        elif attribute.startswith("c") and "." not in name:
            name = f"{attribute[1:]}.{name}"
    start = int(first) if first.isdigit() else 0
    return Frame(name, filename, line or start, start)


# --- heap -----------------------------------------------------------------------------------------


class HeapProfiler:
    """tracemalloc for a window; one window at a time."""

    def __init__(self, frames: int = HEAP_FRAMES) -> None:
        self.frames = frames
        self._busy = False

    @property
    def busy(self) -> bool:
        return self._busy

    async def profile(self, seconds: float, *, collect: bool = False) -> bytes:
        """What the window allocated and is still alive at its end (everything traced when
        tracing was on already), as a gzipped pprof profile; ``collect`` runs the garbage
        collector before the snapshot (Go's ``gc=1``)."""
        if tracemalloc.is_tracing() and not self._busy:
            return heap_profile(_snapshot(collect))
        if self._busy:
            raise ProfilerBusy("heap profiling already in use")
        self._busy = True
        try:
            tracemalloc.start(self.frames)
            try:
                await asyncio.sleep(seconds)
                snapshot = _snapshot(collect)
            finally:
                tracemalloc.stop()  # frees the traces
            return heap_profile(snapshot)
        finally:
            self._busy = False


def _snapshot(collect: bool) -> tracemalloc.Snapshot:
    if collect:
        gc.collect()
    return tracemalloc.take_snapshot()


def heap_profile(snapshot: tracemalloc.Snapshot) -> bytes:
    """Live allocations per stack as ``inuse_objects/count`` and ``inuse_space/bytes``."""
    snapshot = snapshot.filter_traces((tracemalloc.Filter(False, tracemalloc.__file__),))
    builder = ProfileBuilder(
        sample_types=(("inuse_objects", "count"), ("inuse_space", "bytes")),
        period_type=("space", "bytes"),
        period=1,  # every allocation is traced, none sampled
        time_nanos=time.time_ns(),
    )
    for stat in snapshot.statistics("traceback"):
        # tracemalloc lists the oldest frame first; pprof wants the leaf first.
        frames = [_source_frame(f.filename, f.lineno) for f in reversed(stat.traceback)]
        builder.add(frames, (stat.count, stat.size))
    return builder.gzipped()


def _source_frame(filename: str, line: int) -> Frame:
    name, start = _enclosing_function(filename, line)
    return Frame(name, filename, line, start)


def _enclosing_function(filename: str, line: int) -> tuple[str, int]:
    """tracemalloc records file and line only: the function is the innermost one around the line."""
    best = ("<module>", 1)
    for first, last, qualname in _functions_of(filename):
        if first <= line <= last:
            best = (qualname, first)  # the list is outermost first: the last match is innermost
    return best


@lru_cache(maxsize=4096)
def _functions_of(filename: str) -> tuple[tuple[int, int, str], ...]:
    """Every function and class of a source file: (first line, last line, qualified name)."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return ()
    found: list[tuple[int, int, str]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                qualname = f"{prefix}{child.name}"
                found.append((child.lineno, child.end_lineno or child.lineno, qualname))
                inner = f"{qualname}.<locals>." if not isinstance(child, ast.ClassDef) else f"{qualname}."
                walk(child, inner)
            else:
                walk(child, prefix)

    walk(tree, "")
    return tuple(found)


# --- stacks ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stack:
    """A thread's or a task's stack, leaf first."""

    kind: str  # "thread" or "task"
    ident: str
    state: str
    frames: tuple[Frame, ...]


def _frame(f: types.FrameType) -> Frame:
    code = f.f_code
    return Frame(code.co_qualname, code.co_filename, f.f_lineno or code.co_firstlineno, code.co_firstlineno)


def thread_stacks() -> list[Stack]:
    names = {t.ident: t.name for t in threading.enumerate()}
    stacks = []
    for ident, top in sys._current_frames().items():
        frames: list[Frame] = []
        f: types.FrameType | None = top
        while f is not None:
            frames.append(_frame(f))
            f = f.f_back
        stacks.append(Stack("thread", str(ident), names.get(ident, "unknown"), tuple(frames)))
    return stacks


def _await_chain(coro: Any) -> Iterator[types.FrameType]:
    """A task's coroutine and what it awaits, outermost first (``Task.get_stack`` stops at the first)."""
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            yield frame
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)


def task_stacks(loop: asyncio.AbstractEventLoop) -> list[Stack]:
    stacks = []
    for task in asyncio.all_tasks(loop):
        frames = tuple(_frame(f) for f in reversed(list(_await_chain(task.get_coro()))))
        state = "cancelling" if task.cancelling() else "done" if task.done() else "pending"
        stacks.append(Stack("task", task.get_name(), state, frames))
    return stacks


def all_stacks(loop: asyncio.AbstractEventLoop) -> list[Stack]:
    return thread_stacks() + sorted(task_stacks(loop), key=lambda s: s.ident)


def stacks_profile(stacks: Sequence[Stack]) -> bytes:
    """Go's goroutine profile: one ``goroutine/count`` per stack, labelled thread or task."""
    builder = ProfileBuilder(
        sample_types=(("goroutine", "count"),),
        period_type=("goroutine", "count"),
        period=1,
        time_nanos=time.time_ns(),
    )
    for s in stacks:
        builder.add(s.frames, (1,), {"kind": s.kind})
    return builder.gzipped()


def stacks_text(stacks: Sequence[Stack], debug: int) -> str:
    """``debug=1``: identical stacks counted, as Go groups goroutines; ``debug>=2``: each one."""
    if debug >= 2:
        return "".join(
            f"{s.kind} {s.ident} [{s.state}]:\n"
            + "".join(f"{f.name}(...)\n\t{f.filename}:{f.line}\n" for f in s.frames)
            + "\n"
            for s in stacks
        )
    groups: dict[tuple[str, tuple[Frame, ...]], int] = {}
    for s in stacks:
        groups[s.kind, s.frames] = groups.get((s.kind, s.frames), 0) + 1
    out = [f"goroutine profile: total {len(stacks)}\n"]
    for (kind, frames), count in sorted(groups.items(), key=lambda g: -g[1]):
        out.append(f'{count} @\n# labels: {{"kind":"{kind}"}}\n')
        out.extend(f"#\t{f.name}\t{f.filename}:{f.line}\n" for f in frames)
        out.append("\n")
    return "".join(out)


def cmdline() -> str:
    """``/debug/pprof/cmdline``: the command line (the interpreter's), NUL-separated as Go's."""
    return "\x00".join(sys.orig_argv)
