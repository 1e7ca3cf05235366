"""The pprof encoder and the profiles built on it, decoded by the protobuf library."""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc

import pytest

from koordsched.observability.pprof import Frame, ProfileBuilder
from koordsched.observability.profiling import (
    HeapProfiler,
    ProfilerBusy,
    all_stacks,
    cpu_profile,
    heap_profile,
    stacks_profile,
    stacks_text,
)
from tests.pprof_proto import check_structure, decode, sample_types, stacks

F = Frame("leaf", "a.py", 3, 1)
G = Frame("root", "b.py", 9, 8)


@pytest.mark.parametrize(
    ("samples", "expected"),
    [
        pytest.param([], [], id="no samples"),
        pytest.param([([F, G], [1, 10])], [(["leaf", "root"], [1, 10])], id="one"),
        pytest.param(
            [([F, G], [1, 10]), ([F, G], [2, 5])], [(["leaf", "root"], [3, 15])], id="same stack merged"
        ),
        pytest.param(
            [([F, G], [1, 10]), ([G], [1, 4])],
            [(["leaf", "root"], [1, 10]), (["root"], [1, 4])],
            id="distinct stacks",
        ),
        pytest.param([([F], [0, -(2**40)])], [(["leaf"], [0, -(2**40)])], id="zero and negative values"),
        pytest.param([([], [1, 1])], [([], [1, 1])], id="empty stack"),
    ],
)
def test_samples_round_trip(samples: list[tuple[list[Frame], list[int]]], expected: list[object]) -> None:
    b = ProfileBuilder((("samples", "count"), ("wall", "nanoseconds")), ("wall", "nanoseconds"), 1_000_000)
    for stack, values in samples:
        b.add(stack, values)
    profile = decode(b.gzipped())
    check_structure(profile)
    assert stacks(profile) == expected
    assert sample_types(profile) == [("samples", "count"), ("wall", "nanoseconds")]
    assert profile.period == 1_000_000
    s = profile.string_table
    assert (s[profile.period_type.type], s[profile.period_type.unit]) == ("wall", "nanoseconds")
    assert len(set(s)) == len(s)  # each string once


def test_functions_and_lines() -> None:
    b = ProfileBuilder((("samples", "count"),))
    b.add([Frame("f", "m.py", 12, 10), Frame("f", "m.py", 15, 10)], [1])
    profile = decode(b.gzipped())
    s = profile.string_table
    # One function, two locations (one per line).
    assert [(s[f.name], s[f.filename], f.start_line) for f in profile.function] == [("f", "m.py", 10)]
    assert sorted(loc.line[0].line for loc in profile.location) == [12, 15]


def test_labels_keep_samples_apart() -> None:
    b = ProfileBuilder((("goroutine", "count"),))
    b.add([F], [1], {"kind": "task"})
    b.add([F], [1], {"kind": "thread"})
    b.add([F], [1], {"kind": "task"})
    profile = decode(b.gzipped())
    s = profile.string_table
    got = sorted((s[x.label[0].key], s[x.label[0].str], x.value[0]) for x in profile.sample)
    assert got == [("kind", "task", 2), ("kind", "thread", 1)]


def test_a_sample_needs_a_value_per_type() -> None:
    b = ProfileBuilder((("samples", "count"), ("wall", "nanoseconds")))
    with pytest.raises(ValueError, match="1 values for 2 sample types"):
        b.add([F], [1])


def test_cpu_profile_from_pyinstrument_records() -> None:
    thread = "MainThread\x00<thread>\x00140"
    loop = "run_forever\x00/usr/lib/asyncio/base_events.py\x00593\x01c_UnixSelectorEventLoop\x01l607"
    busy = "busy\x00/src/work.py\x0010\x01cWorker\x01l12"
    builtin = "sum\x00<built-in>\x000"
    records = [
        ([thread, loop, busy], 0.002),
        ([thread, loop, busy, builtin], 0.001),
        ([thread, loop], 0.0005),
    ]
    profile = decode(cpu_profile(records, 0.001, 1_700_000_000_000_000_000, 30_000_000_000))
    check_structure(profile)
    assert sample_types(profile) == [("samples", "count"), ("wall", "nanoseconds")]
    assert sorted(stacks(profile)) == sorted(
        [
            (["Worker.busy", "_UnixSelectorEventLoop.run_forever"], [1, 2_000_000]),
            (["sum", "Worker.busy", "_UnixSelectorEventLoop.run_forever"], [1, 1_000_000]),
            (["_UnixSelectorEventLoop.run_forever"], [1, 500_000]),
        ]
    )
    assert (profile.time_nanos, profile.duration_nanos, profile.period) == (
        1_700_000_000_000_000_000,
        30_000_000_000,
        1_000_000,
    )
    s = profile.string_table
    lines = {s[f.name]: f for f in profile.function}
    assert (s[lines["Worker.busy"].filename], lines["Worker.busy"].start_line) == ("/src/work.py", 10)
    assert {loc.line[0].line for loc in profile.location} == {607, 12, 0}


class Retained:
    pass


def allocate_known_objects(n: int) -> list[Retained]:
    return [Retained() for _ in range(n)]


def test_heap_profile_names_the_allocating_function() -> None:
    was_tracing = tracemalloc.is_tracing()
    tracemalloc.start(16)
    try:
        kept = allocate_known_objects(5000)
        profile = decode(heap_profile(tracemalloc.take_snapshot()))
    finally:
        if not was_tracing:
            tracemalloc.stop()
    check_structure(profile)
    assert sample_types(profile) == [("inuse_objects", "count"), ("inuse_space", "bytes")]
    ours = [values for names, values in stacks(profile) if "allocate_known_objects" in names]
    assert sum(v[0] for v in ours) >= len(kept)
    assert sum(v[1] for v in ours) > 0
    # The leaf is the function (found from the source: tracemalloc records file and line only).
    assert any(names[0] == "allocate_known_objects" for names, _ in stacks(profile))


async def test_heap_window_stops_tracing_and_refuses_a_second() -> None:
    if tracemalloc.is_tracing():
        pytest.skip("tracemalloc is on for the whole run (PYTHONTRACEMALLOC)")
    heap = HeapProfiler(frames=8)
    first = asyncio.ensure_future(heap.profile(1))
    await asyncio.sleep(0)
    assert heap.busy and tracemalloc.is_tracing()
    with pytest.raises(ProfilerBusy, match="heap profiling already in use"):
        await heap.profile(1)
    kept = allocate_known_objects(100)
    profile = decode(await first)
    assert not tracemalloc.is_tracing() and not heap.busy
    assert any("allocate_known_objects" in names for names, _ in stacks(profile)), len(kept)


async def parked(event: asyncio.Event) -> None:
    await event.wait()


async def test_stacks_show_threads_and_await_chains() -> None:
    event = asyncio.Event()
    task = asyncio.create_task(parked(event), name="parked-task")
    await asyncio.sleep(0)
    try:
        stacks_now = all_stacks(asyncio.get_running_loop())
    finally:
        event.set()
        await task
    mine = next(s for s in stacks_now if s.ident == "parked-task")
    assert mine.kind == "task" and mine.state == "pending"
    # Leaf first: the Event's wait, awaited by parked().
    assert [f.name for f in mine.frames] == ["Event.wait", "parked"]
    assert any(s.kind == "thread" and s.state == "MainThread" for s in stacks_now)

    profile = decode(stacks_profile(stacks_now))
    check_structure(profile)
    assert sample_types(profile) == [("goroutine", "count")]
    assert sum(s.value[0] for s in profile.sample) == len(stacks_now)
    assert (["Event.wait", "parked"], [1]) in stacks(profile)

    grouped = stacks_text(stacks_now, 1)
    assert grouped.startswith(f"goroutine profile: total {len(stacks_now)}\n")
    assert '1 @\n# labels: {"kind":"task"}\n#\tEvent.wait\t' in grouped
    full = stacks_text(stacks_now, 2)
    assert "task parked-task [pending]:\nEvent.wait(...)\n\t" in full
    assert "\nparked(...)\n\t" in full and __file__ in full


def test_output_is_gzip() -> None:
    data = ProfileBuilder((("samples", "count"),)).gzipped()
    assert data[:2] == b"\x1f\x8b" and gzip.decompress(data)
