"""/debug/pprof/* and /debug/flags/v as kube-scheduler answers them (plain HTTP here; who may call
them is tested with the rest of the secure port in test_serving_http.py)."""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
import pytest

from koordsched.backends.kube.debug_routes import CPU_PROFILER, MAX_SECONDS
from koordsched.backends.kube.server import HttpServer, build_app
from koordsched.observability.health import HealthChecks
from koordsched.observability.metrics import SchedulerMetrics
from tests.kube.helpers import eventually
from tests.pprof_proto import check_structure, decode, sample_types, stacks

Answer = tuple[int, dict[str, str], bytes]


@dataclass
class Served:
    base: str
    server: HttpServer
    levels: list[int] = field(default_factory=list)


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    levels: list[int] = []
    app = build_app(HealthChecks(), SchedulerMetrics(), profiling=True, set_verbosity=levels.append)
    server = HttpServer(app, "127.0.0.1", 0)
    await server.start()
    try:
        yield Served(f"http://127.0.0.1:{server.port}", server, levels)
    finally:
        await server.close()


async def fetch(url: str, method: str = "GET", data: bytes | None = None) -> Answer:
    async with (
        aiohttp.ClientSession() as s,
        s.request(method, url, data=data, allow_redirects=False) as r,
    ):
        return r.status, dict(r.headers), await r.read()


def busy_scheduling_work(until: float) -> int:
    """Something for the profile to find: pure Python on the loop's thread."""
    n = 0
    while time.monotonic() < until and n < 200_000:
        n += sum(i * i for i in range(50))
    return n


async def keep_busy(stop: asyncio.Event) -> None:
    while not stop.is_set():
        busy_scheduling_work(time.monotonic() + 0.005)
        await asyncio.sleep(0)


async def test_cpu_profile_while_the_loop_keeps_working(served: Served) -> None:
    stop = asyncio.Event()
    worker = asyncio.create_task(keep_busy(stop))
    try:
        code, headers, body = await fetch(f"{served.base}/debug/pprof/profile?seconds=1")
    finally:
        stop.set()
        await worker
    assert code == 200
    assert headers["Content-Type"] == "application/octet-stream"
    assert headers["Content-Disposition"] == 'attachment; filename="profile"'
    profile = decode(body)
    check_structure(profile)
    assert sample_types(profile) == [("samples", "count"), ("wall", "nanoseconds")]
    assert profile.duration_nanos >= 1_000_000_000 and profile.period == 1_000_000
    found = [(names, values) for names, values in stacks(profile) if "busy_scheduling_work" in names]
    assert found, [names[:3] for names, _ in stacks(profile)]
    assert all(v[0] >= 1 and v[1] > 0 for _, v in found)
    s = profile.string_table
    assert any(s[f.filename] == __file__ for f in profile.function)


async def test_one_cpu_profile_at_a_time(served: Served) -> None:
    first = asyncio.create_task(fetch(f"{served.base}/debug/pprof/profile?seconds=1"))
    profiler = served.server.app[CPU_PROFILER]
    await eventually(lambda: profiler.busy, within=30)
    code, headers, body = await fetch(f"{served.base}/debug/pprof/profile?seconds=1")
    assert (code, body) == (500, b"Could not enable CPU profiling: cpu profiling already in use\n")
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert headers["X-Go-Pprof"] == "1"
    assert "Content-Disposition" not in headers
    assert (await first)[0] == 200
    assert not profiler.busy


@pytest.mark.parametrize(
    ("path", "code", "text"),
    [
        pytest.param(
            f"/debug/pprof/profile?seconds={MAX_SECONDS + 1}",
            400,
            f"profile duration exceeds server's limit of {MAX_SECONDS}s\n",
            id="profile too long",
        ),
        pytest.param(
            f"/debug/pprof/heap?seconds={MAX_SECONDS + 1}",
            400,
            f"profile duration exceeds server's limit of {MAX_SECONDS}s\n",
            id="heap too long",
        ),
        *(
            pytest.param(
                f"/debug/pprof/heap?seconds={bad}",
                400,
                'invalid value for "seconds" - must be a positive integer\n',
                id=f"heap seconds={bad!r}",
            )
            for bad in ("0", "-1", "abc", "1.5", "", " 1")
        ),
        pytest.param(
            "/debug/pprof/goroutine?seconds=1",
            400,
            '"seconds" parameter is not supported for this profile type\n',
            id="goroutine delta",
        ),
        pytest.param("/debug/pprof/allocs", 404, "Unknown profile\n", id="a profile Go has, not here"),
        pytest.param("/debug/pprof/nothing/deeper", 404, "Unknown profile\n", id="unknown"),
    ],
)
async def test_pprof_errors_as_go_answers_them(served: Served, path: str, code: int, text: str) -> None:
    got_code, headers, body = await fetch(served.base + path)
    assert (got_code, body.decode()) == (code, text)
    assert headers["X-Go-Pprof"] == "1" and headers["Content-Type"] == "text/plain; charset=utf-8"


async def test_heap_profile_for_a_window(served: Served) -> None:
    if tracemalloc.is_tracing():
        pytest.skip("tracemalloc is on for the whole run")
    kept: list[bytearray] = []

    async def allocate() -> None:
        await eventually(tracemalloc.is_tracing, within=30)
        kept.extend(bytearray(4096) for _ in range(64))

    allocating = asyncio.create_task(allocate())
    code, headers, body = await fetch(f"{served.base}/debug/pprof/heap?seconds=1&gc=1")
    await allocating
    assert code == 200 and headers["Content-Disposition"] == 'attachment; filename="heap"'
    assert not tracemalloc.is_tracing()  # the window is over: no overhead left behind
    profile = decode(body)
    check_structure(profile)
    assert sample_types(profile) == [("inuse_objects", "count"), ("inuse_space", "bytes")]
    ours = [v for names, v in stacks(profile) if "test_heap_profile_for_a_window.<locals>.allocate" in names]
    assert sum(v[1] for v in ours) >= 64 * 4096, stacks(profile)[:5]


async def test_goroutine_views(served: Served) -> None:
    code, headers, body = await fetch(f"{served.base}/debug/pprof/goroutine")
    assert code == 200 and headers["Content-Disposition"] == 'attachment; filename="goroutine"'
    profile = decode(body)
    check_structure(profile)
    assert sample_types(profile) == [("goroutine", "count")]
    assert any("test_goroutine_views" in names for names, _ in stacks(profile))
    code, headers, body = await fetch(f"{served.base}/debug/pprof/goroutine?debug=1")
    assert code == 200 and headers["Content-Type"] == "text/plain; charset=utf-8"
    assert body.startswith(b"goroutine profile: total ") and b"\ttest_goroutine_views\t" in body
    code, _, body = await fetch(f"{served.base}/debug/pprof/goroutine?debug=2")
    assert code == 200 and b"thread " in body and b"[MainThread]:\n" in body
    assert b"test_goroutine_views(...)\n\t" + __file__.encode() in body


async def test_index_cmdline_and_redirect(served: Served) -> None:
    code, headers, body = await fetch(f"{served.base}/debug/pprof")
    assert (code, headers["Location"]) == (301, "/debug/pprof/")
    code, headers, body = await fetch(f"{served.base}/debug/pprof/")
    assert code == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    for name in ("cmdline", "goroutine", "heap", "profile"):
        assert f'<a href="{name}?debug=1">{name}</a>'.encode() in body
    code, headers, body = await fetch(f"{served.base}/debug/pprof/cmdline")
    assert code == 200 and headers["Content-Type"] == "text/plain; charset=utf-8"
    assert b"\x00" in body and b"pytest" in body


@pytest.mark.parametrize(
    ("method", "body", "code", "text", "levels"),
    [
        pytest.param("PUT", b"4", 200, "successfully set klog.logging.verbosity to 4\n", [4], id="set"),
        pytest.param("PUT", b"0", 200, "successfully set klog.logging.verbosity to 0\n", [0], id="zero"),
        pytest.param("PUT", b"+2", 200, "successfully set klog.logging.verbosity to +2\n", [2], id="sign"),
        pytest.param(
            "PUT",
            b"abc",
            400,
            'failed set klog.logging.verbosity abc: strconv.ParseInt: parsing "abc": invalid syntax\n',
            [],
            id="not a number",
        ),
        pytest.param(
            "PUT",
            b"3\n",
            400,
            'failed set klog.logging.verbosity 3\n: strconv.ParseInt: parsing "3\\n": invalid syntax\n',
            [],
            id="trailing newline, as Go refuses it",
        ),
        pytest.param(
            "PUT",
            b"2147483648",
            400,
            "failed set klog.logging.verbosity 2147483648: strconv.ParseInt: parsing "
            '"2147483648": value out of range\n',
            [],
            id="beyond int32",
        ),
        pytest.param("GET", None, 406, "unsupported http method\n", [], id="GET"),
        pytest.param("POST", b"3", 406, "unsupported http method\n", [], id="POST"),
    ],
)
async def test_debug_flags_v(
    served: Served, method: str, body: bytes | None, code: int, text: str, levels: list[int]
) -> None:
    got_code, headers, got = await fetch(f"{served.base}/debug/flags/v", method, body)
    assert (got_code, got.decode()) == (code, text)
    assert headers["Content-Type"] == "text/plain"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert served.levels == levels


async def test_debug_flags_index(served: Served) -> None:
    code, _, body = await fetch(f"{served.base}/debug/flags")
    assert code == 200 and b"<tr>v<br>" in body


async def test_without_profiling_the_paths_are_not_served() -> None:
    server = HttpServer(build_app(HealthChecks(), SchedulerMetrics(), set_verbosity=print), "127.0.0.1", 0)
    await server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        for path in ("/debug/pprof/", "/debug/pprof/profile", "/debug/pprof/heap", "/debug/flags/v"):
            assert (await fetch(base + path, "PUT" if "flags" in path else "GET"))[0] == 404, path
    finally:
        await server.close()


async def test_profiling_without_a_verbosity_setter_has_no_flags_route() -> None:
    server = HttpServer(build_app(HealthChecks(), SchedulerMetrics(), profiling=True), "127.0.0.1", 0)
    await server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        assert (await fetch(base + "/debug/flags/v", "PUT", b"3"))[0] == 404
        assert (await fetch(base + "/debug/pprof/cmdline"))[0] == 200
    finally:
        await server.close()
