"""Repeated failures logged with an exponential back-off note, then "recovered", on a fake clock."""

from __future__ import annotations

import logging

import pytest

from koordsched.observability.log_ratelimit import RepeatedErrors, go_duration

log = logging.getLogger("koordsched.tests.ratelimit")
SRC = "API server 10.0.0.1:6443"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    out = [r.getMessage() for r in caplog.records if r.name == log.name]
    caplog.clear()
    return out


def fail(errors: RepeatedErrors, who: str = "Pod", error: str = "refused") -> None:
    errors.failed(SRC, error, "%s: list failed: %s", who, error)


def test_the_first_failure_then_back_off_reports_then_recovery(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=log.name)
    clock = Clock()
    errors = RepeatedErrors(log, clock=clock)
    fail(errors)
    assert messages(caplog) == ["Pod: list failed: refused"]
    for t in range(1, 10):  # nine more, one a second: all within the first 10 s
        clock.now = 100.0 + t
        fail(errors, "Node")
    assert messages(caplog) == []
    clock.now = 110.0
    fail(errors, "Node")
    assert messages(caplog) == [
        "Node: list failed: refused (repeated 10 times in the last 10s; next report in 20s)"
    ]
    clock.now = 125.0
    fail(errors)
    assert messages(caplog) == []  # next report at 130
    clock.now = 131.0
    fail(errors)
    assert messages(caplog) == [
        "Pod: list failed: refused (repeated 2 times in the last 21s; next report in 40s)"
    ]
    assert errors.failing(SRC)
    clock.now = 140.0
    errors.succeeded(SRC)
    assert messages(caplog) == [f"{SRC}: recovered after 13 failed attempts in 40s"]
    assert not errors.failing(SRC)
    errors.succeeded(SRC)  # nothing was failing: nothing to say
    fail(errors)
    assert messages(caplog) == ["Pod: list failed: refused"]  # a new outage starts afresh


def test_a_different_error_is_news_and_sources_are_apart(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=log.name)
    clock = Clock()
    errors = RepeatedErrors(log, clock=clock)
    fail(errors, error="refused")
    fail(errors, error="refused")
    fail(errors, error="reset by peer")
    errors.failed("lease ns/name", "refused", "lease: %s", "refused")
    assert messages(caplog) == [
        "Pod: list failed: refused",
        "Pod: list failed: reset by peer",
        "lease: refused",
    ]
    errors.succeeded("lease ns/name")
    assert messages(caplog) == ["lease ns/name: recovered after 1 failed attempts in 0s"]
    assert errors.failing(SRC)


def test_the_interval_stops_growing_at_its_cap(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=log.name)
    clock = Clock()
    errors = RepeatedErrors(log, clock=clock, first_interval=10.0, max_interval=40.0)
    fail(errors)
    assert messages(caplog) == ["Pod: list failed: refused"]
    notes = []
    for _ in range(6):
        clock.now += 1000.0
        fail(errors)
        notes.extend(m.rsplit("next report in ", 1)[1] for m in messages(caplog))
    assert notes == ["20s)", "40s)", "40s)", "40s)", "40s)", "40s)"]


def test_the_line_names_the_callers_file(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=log.name)
    fail(RepeatedErrors(log, clock=Clock()))
    (record,) = caplog.records
    assert record.filename == "test_log_ratelimit.py" and record.funcName == "fail"


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.2, "0s"), (9.6, "10s"), (59, "59s"), (150, "2m30s"), (3605, "1h0m5s")]
)
def test_durations_print_as_go_does(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text
