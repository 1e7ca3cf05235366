"""``/debug/pprof/*`` and ``/debug/flags/v`` on the secure port, as kube-scheduler serves them with
``--profiling`` (its default), behind the same authentication and authorization as ``/configz``.

The answers follow Go's ``net/http/pprof`` (status codes, ``X-Go-Pprof`` on errors, the texts)
and component-base's ``routes/flags.go`` (PUT a level to ``/debug/flags/v``; any other method is
406). What is profiled and how is :mod:`koordsched.observability.profiling`'s.
"""

from __future__ import annotations

import asyncio
import html
import logging
import re
from collections.abc import Callable

from aiohttp import web

from koordsched.observability.profiling import (
    CpuProfiler,
    HeapProfiler,
    ProfilerBusy,
    all_stacks,
    cmdline,
    stacks_profile,
    stacks_text,
)

log = logging.getLogger(__name__)

#: Go's default for ``/debug/pprof/profile`` (and here for the heap's window too).
DEFAULT_SECONDS = 30
#: The longest profile or heap window answered: a request is held open that long.
MAX_SECONDS = 300
#: Go's ``strconv.ParseInt(s, 10, ...)`` syntax: a sign, ASCII digits, nothing else.
_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT32 = (-(2**31), 2**31 - 1)

#: What the index lists: (name, what it is), in Go's index's words where Go has the profile.
PROFILES = (
    ("cmdline", "The command line invoking the current program"),
    (
        "goroutine",
        "Stack traces of all current threads and asyncio tasks. Use debug=2 as a query parameter "
        "to export in the same format as an unrecovered panic.",
    ),
    (
        "heap",
        "Live objects allocated during a window (tracemalloc; seconds=N, default 30). "
        "You can specify the gc GET parameter to run GC before taking the heap sample.",
    ),
    (
        "profile",
        "Event-loop profile (wall time, pyinstrument). You can specify the duration in the seconds "
        "GET parameter. After you get the profile file, use the go tool pprof command to "
        "investigate the profile.",
    ),
)


#: The app's profilers, for whoever needs to know whether one is running (tests do).
CPU_PROFILER = web.AppKey("koordsched_cpu_profiler", CpuProfiler)
HEAP_PROFILER = web.AppKey("koordsched_heap_profiler", HeapProfiler)


def _pprof_error(status: int, text: str) -> web.Response:
    """Go's ``serveError``."""
    return web.Response(
        status=status,
        text=text + "\n",
        headers={"X-Go-Pprof": "1", "X-Content-Type-Options": "nosniff"},
        content_type="text/plain",
        charset="utf-8",
    )


def _attachment(body: bytes, name: str) -> web.Response:
    return web.Response(
        body=body,
        headers={
            "Content-Type": "application/octet-stream",
            "Content-Disposition": f'attachment; filename="{name}"',
            "X-Content-Type-Options": "nosniff",
        },
    )


def _go_int(text: str, low: int, high: int) -> tuple[int | None, str]:
    """Go's ``strconv.ParseInt`` of ``text``: the value, or None and the error's reason."""
    if not _GO_INT.fullmatch(text):
        return None, "invalid syntax"
    value = int(text)
    if not low <= value <= high:
        return None, "value out of range"
    return value, ""


def _atoi(text: str) -> int:
    """Go's ``strconv.Atoi`` with the error ignored, as pprof reads ``debug`` and ``gc``."""
    value, _ = _go_int(text, -(2**63), 2**63 - 1)
    return value or 0


def _too_long(seconds: int) -> web.Response | None:
    if seconds > MAX_SECONDS:
        return _pprof_error(400, f"profile duration exceeds server's limit of {MAX_SECONDS}s")
    return None


def add_debug_routes(app: web.Application, set_verbosity: Callable[[int], None] | None) -> None:
    """kube-scheduler's ``--profiling`` routes; ``/debug/flags/v`` only with a ``set_verbosity``."""
    cpu = app[CPU_PROFILER] = CpuProfiler()
    heap = app[HEAP_PROFILER] = HeapProfiler()

    async def index(request: web.Request) -> web.Response:
        rows = "".join(
            f'<tr><td><a href="{name}?debug=1">{name}</a></td><td>{html.escape(what)}</td></tr>\n'
            for name, what in PROFILES
        )
        page = (
            "<html>\n<head>\n<title>/debug/pprof/</title>\n</head>\n<body>\n/debug/pprof/\n"
            f"<p>Set debug=1 as a query parameter to export in legacy text format</p>\n"
            f"<table>\n{rows}</table>\n"
            '<p><a href="goroutine?debug=2">full goroutine stack dump</a></p>\n</body>\n</html>\n'
        )
        return web.Response(text=page, content_type="text/html", charset="utf-8")

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently("/debug/pprof/")

    async def profile(request: web.Request) -> web.Response:
        # As Go: a missing, malformed or non-positive value means the default.
        seconds, _ = _go_int(request.query.get("seconds", ""), 1, 2**63 - 1)
        seconds = seconds or DEFAULT_SECONDS
        refused = _too_long(seconds)
        if refused is not None:
            return refused
        try:
            body = await cpu.profile(seconds)
        except ProfilerBusy as err:
            return _pprof_error(500, f"Could not enable CPU profiling: {err}")
        return _attachment(body, "profile")

    async def heap_handler(request: web.Request) -> web.Response:
        seconds = DEFAULT_SECONDS
        if "seconds" in request.query:
            value, _ = _go_int(request.query["seconds"], 1, 2**63 - 1)
            if value is None:
                return _pprof_error(400, 'invalid value for "seconds" - must be a positive integer')
            seconds = value
        refused = _too_long(seconds)
        if refused is not None:
            return refused
        try:
            body = await heap.profile(seconds, collect=_atoi(request.query.get("gc", "")) > 0)
        except ProfilerBusy as err:
            return _pprof_error(500, f"Could not enable heap profiling: {err}")
        return _attachment(body, "heap")

    async def goroutine(request: web.Request) -> web.Response:
        if "seconds" in request.query:
            return _pprof_error(400, '"seconds" parameter is not supported for this profile type')
        stacks = all_stacks(asyncio.get_running_loop())
        debug = _atoi(request.query.get("debug", ""))
        if debug:
            return web.Response(
                text=stacks_text(stacks, debug),
                headers={"X-Content-Type-Options": "nosniff"},
                content_type="text/plain",
                charset="utf-8",
            )
        return _attachment(stacks_profile(stacks), "goroutine")

    async def cmdline_handler(request: web.Request) -> web.Response:
        return web.Response(
            text=cmdline(),
            headers={"X-Content-Type-Options": "nosniff"},
            content_type="text/plain",
            charset="utf-8",
        )

    async def unknown(request: web.Request) -> web.Response:
        return _pprof_error(404, "Unknown profile")

    app.router.add_get("/debug/pprof", redirect)
    app.router.add_get("/debug/pprof/", index)
    app.router.add_get("/debug/pprof/profile", profile)
    app.router.add_get("/debug/pprof/heap", heap_handler)
    app.router.add_get("/debug/pprof/goroutine", goroutine)
    app.router.add_get("/debug/pprof/cmdline", cmdline_handler)
    app.router.add_get("/debug/pprof/{name:.+}", unknown)
    if set_verbosity is not None:
        _add_flag_routes(app, set_verbosity)


def _plain(status: int, text: str) -> web.Response:
    """component-base's ``writePlainText``."""
    return web.Response(
        status=status,
        body=(text + "\n").encode(),
        headers={"Content-Type": "text/plain", "X-Content-Type-Options": "nosniff"},
    )


def _add_flag_routes(app: web.Application, set_verbosity: Callable[[int], None]) -> None:
    async def flags_index(request: web.Request) -> web.Response:
        page = (
            "<html>\n<head>\n<title>/debug/flags/</title>\n</head>\n<body>\n/debug/flags/<br>\n<br>\n"
            "flags:<br>\n<table>\n\n<tr>v<br>\n\n</table>\n<br>\nfull flags configurable<br>\n"
            "</body>\n</html>\n"
        )
        return web.Response(text=page, content_type="text/html", charset="utf-8")

    async def verbosity(request: web.Request) -> web.Response:
        if request.method != "PUT":
            return _plain(406, "unsupported http method")
        text = (await request.read()).decode(errors="replace")
        level, why = _go_int(text, *_INT32)
        if level is None:
            quoted = _go_quote(text)
            return _plain(
                400, f"failed set klog.logging.verbosity {text}: strconv.ParseInt: parsing {quoted}: {why}"
            )
        set_verbosity(level)
        log.info("verbosity set to %d through /debug/flags/v", level)
        return _plain(200, f"successfully set klog.logging.verbosity to {text}")

    app.router.add_route("*", "/debug/flags", flags_index)
    app.router.add_route("*", "/debug/flags/", flags_index)
    app.router.add_route("*", "/debug/flags/v", verbosity)


def _go_quote(s: str) -> str:
    """Go's ``%q`` for the texts seen here: double quotes, backslash escapes."""
    escapes = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    out = []
    for ch in s:
        if ch in escapes:
            out.append(escapes[ch])
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x80 else f"\\u{ord(ch):04x}")
    return '"' + "".join(out) + '"'
