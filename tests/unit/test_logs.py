"""Logs as kube-scheduler writes them: klog's text lines, component-base's JSON, --v and --vmodule.

Every line is read back with a parser written from klog's documented header
(``Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg``) and its key/value syntax, or with
``json.loads``, and each field is checked.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from koordsched.cli import _setup_logging
from koordsched.observability import logs
from koordsched.observability.log_format import V_ATTR, go_float, go_quote
from koordsched.observability.log_handler import FlushingStderrHandler

log = logging.getLogger("koordsched.tests.logs")

# klog's header: severity, month, day, time to the microsecond, thread id padded to 7, file:line.
KLOG = re.compile(
    r"^(?P<sev>[IWEF])(?P<month>\d{2})(?P<day>\d{2}) "
    r"(?P<h>\d{2}):(?P<m>\d{2}):(?P<s>\d{2})\.(?P<us>\d{6}) "
    r"(?P<tid>[ \d]{7}) (?P<file>[^ :]+):(?P<line>\d+)\] (?P<body>.*)$",
    re.S,
)
# klog's key/value pairs: key="quoted", key=bare, or key=<\n\tlines\n >.
KV = re.compile(
    r' (?P<k>[A-Za-z_]\w*)=(?:"(?P<q>(?:[^"\\]|\\.)*)"|<\n(?P<ml>(?:\t[^\n]*\n)*) >|(?P<b>[^ "\n]+))'
)


def parse_klog(line: str) -> dict[str, Any]:
    """A klog text line's fields; fails the test when the line is not klog's format."""
    m = KLOG.match(line)
    assert m, f"not a klog line: {line!r}"
    body = m["body"]
    if body.startswith('"'):
        end = re.match(r'"(?:[^"\\]|\\.)*"', body)
        assert end, body
        msg, rest = json.loads(end.group(0)), body[end.end() :]
    else:
        msg, rest = body, ""
    kv: dict[str, Any] = {}
    pos = 0
    for pm in KV.finditer(rest):
        assert pm.start() == pos, f"junk between pairs in {rest!r}"
        pos = pm.end()
        if pm["q"] is not None:
            kv[pm["k"]] = json.loads(f'"{pm["q"]}"')
        elif pm["ml"] is not None:
            kv[pm["k"]] = "".join(ln[1:] for ln in pm["ml"].splitlines(keepends=True)).rstrip("\n")
        else:
            kv[pm["k"]] = pm["b"]
    assert pos == len(rest), f"unparsed tail {rest[pos:]!r}"
    return {**m.groupdict(), "msg": msg, "kv": kv, "quoted": body.startswith('"')}


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    level, state = root.level, logs._state
    logs._state = logs._State()
    try:
        yield
    finally:
        logs.flush()
        logs._state = state
        if logs._handler is not None:
            logs._handler.setFormatter(logs.KlogTextFormatter())
            logs._handler.set_flush_frequency(5.0)
        root.setLevel(level)


def lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    logs.flush()
    err = capsys.readouterr().err
    # A record starts with klog's header or "{"; multi-line values continue the record.
    out: list[str] = []
    for ln in err.splitlines():
        if KLOG.match(ln) or ln.startswith("{"):
            out.append(ln)
        elif out:
            out[-1] += "\n" + ln
    return out


def test_a_structured_line_has_klogs_header_and_pairs(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure(verbosity=2, flush_frequency=0)
    before = time.time()
    logs.info_s(
        log,
        'Bound "it"',
        pod=logs.ObjectRef("ns", "p"),
        node="n1",
        evaluatedNodes=3,
        ratio=0.5,
        big=1e6,
        ok=True,
        nothing=None,
        text="two\nlines",
    )
    (line,) = lines(capsys)
    f = parse_klog(line)
    now = dt.datetime.fromtimestamp(before)
    assert (f["sev"], int(f["month"]), int(f["day"])) == ("I", now.month, now.day)
    assert int(f["h"]) == now.hour and 0 <= int(f["us"]) < 1_000_000
    assert f["tid"] == f"{threading.get_native_id():7d}"
    assert (f["file"], int(f["line"])) == (
        "test_logs.py",
        _line_of("logs.info_s(\n        log,\n        'Bound"),
    )
    assert f["quoted"] and f["msg"] == 'Bound "it"'
    assert f["kv"] == {
        "pod": "ns/p",
        "node": "n1",
        "evaluatedNodes": "3",
        "ratio": "0.5",
        "big": "1e+06",
        "ok": "true",
        "nothing": "<nil>",
        "text": "two\nlines",
    }
    tail = ' pod="ns/p" node="n1" evaluatedNodes=3 ratio=0.5 big=1e+06 ok=true nothing=<nil> '
    tail += "text=<\n\ttwo\n\tlines\n >"
    assert line.endswith(tail)


def _line_of(snippet: str) -> int:
    with open(__file__) as f:
        text = f.read()
    return text[: text.index(snippet)].count("\n") + 1


@pytest.mark.parametrize(
    ("emit", "sev", "msg", "kv", "quoted"),
    [
        (lambda: log.info("plain %s line", "info"), "I", "plain info line", {}, False),
        (lambda: log.warning("careful: %d", 3), "W", "careful: 3", {}, False),
        (lambda: log.error("failed"), "E", "failed", {}, False),
        (lambda: log.critical("fatal"), "F", "fatal", {}, False),
        (lambda: log.info("with %s", "extra", extra={"node": "n1"}), "I", "with extra", {"node": "n1"}, True),
        (
            lambda: logs.error_s(log, ValueError("no route"), "Error scheduling pod; retrying", pod="a/b"),
            "E",
            "Error scheduling pod; retrying",
            {"err": "no route", "pod": "a/b"},
            True,
        ),
        (lambda: logs.error_s(log, None, "no error given"), "E", "no error given", {}, True),
    ],
)
def test_every_severity_parses(
    restore_logging: None,
    capsys: pytest.CaptureFixture[str],
    emit: Any,
    sev: str,
    msg: str,
    kv: dict[str, str],
    quoted: bool,
) -> None:
    logs.configure(verbosity=0, flush_frequency=0)
    emit()
    (line,) = lines(capsys)
    f = parse_klog(line)
    assert (f["sev"], f["msg"], f["kv"], f["quoted"]) == (sev, msg, kv, quoted)


def test_an_exception_carries_err_and_its_traceback(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure(flush_frequency=0)
    try:
        raise KeyError("gone")
    except KeyError:
        log.exception("handler failed")
    (line,) = lines(capsys)
    f = parse_klog(line)
    assert f["sev"] == "E" and f["msg"] == "handler failed"
    assert f["kv"]["err"] == "KeyError: 'gone'"
    assert f["kv"]["stacktrace"].startswith("Traceback (most recent call last):")


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("plain", '"plain"'),
        ('say "hi"', r'"say \"hi\""'),
        ("back\\slash", r'"back\\slash"'),
        ("tab\there", r'"tab\there"'),
        ("bell\a", r'"bell\a"'),
        ("\x01", r'"\x01"'),
        ("\x7f", r'"\x7f"'),
        ("\u00a0nbsp", r'"\u00a0nbsp"'),
        ("é and ☃", '"é and ☃"'),
        ("\U000e0001", r'"\U000e0001"'),
    ],
)
def test_strings_are_quoted_as_strconv_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (0.5, "0.5"),
        (123456.0, "123456"),
        (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-2.25, "-2.25"),
        (float("inf"), "+Inf"),
        (float("nan"), "NaN"),
    ],
)
def test_floats_print_as_go_does(value: float, text: str) -> None:
    assert go_float(value) == text


def test_json_lines_carry_component_bases_fields(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure(fmt="json", verbosity=2, flush_frequency=0)
    before = time.time()
    logs.log_v(
        log, 2, "Successfully bound pod to node", pod=logs.ObjectRef("ns", "p"), node="n1", evaluatedNodes=3
    )
    log.warning("plain %s", "warning")
    log.debug("hidden at v=2")
    logs.error_s(log, RuntimeError("boom"), "Error scheduling pod; retrying", pod=logs.ObjectRef("ns", "p"))
    log.info("extra", extra={"k": 1})
    after = time.time()
    out = [json.loads(ln) for ln in lines(capsys)]
    assert [list(o) for o in out] == [
        ["ts", "caller", "msg", "v", "pod", "node", "evaluatedNodes"],
        ["ts", "caller", "msg", "v"],
        ["ts", "caller", "msg", "pod", "err"],
        ["ts", "caller", "msg", "v", "k"],
    ]
    for o in out:
        assert before * 1000 - 1 <= o["ts"] <= after * 1000 + 1  # epoch milliseconds
        assert re.fullmatch(r"unit/test_logs\.py:\d+", o["caller"])
    assert out[0]["msg"] == "Successfully bound pod to node" and out[0]["v"] == 2
    assert out[0]["pod"] == {"name": "p", "namespace": "ns"} and out[0]["evaluatedNodes"] == 3
    assert out[1] == {**out[1], "msg": "plain warning", "v": 0}
    assert out[2]["err"] == "boom" and "v" not in out[2]
    assert out[3]["k"] == 1


@pytest.mark.parametrize(
    ("verbosity", "vmodule", "shown"),
    [
        (0, "", []),
        (1, "", [1]),
        (2, "", [1, 2]),
        (4, "", [1, 2, 4, "debug"]),
        (0, "test_logs=2", [1, 2]),
        (0, "test_l?gs=4", [1, 2, 4, "debug"]),
        (0, "test_*=1", [1]),
        (0, "other=5,test_logs=2", [1, 2]),
        (0, "test_logs=1,test_logs=4", [1]),  # the first match wins
        (0, "*/unit/test_logs=2", [1, 2]),  # a pattern with a slash matches the path
        (0, "unit/test_logs=2", []),  # ... the whole path
        (2, "test_logs=1", [1, 2]),  # vmodule only raises what --v gives
        (0, "reflector=5", []),
    ],
)
def test_v_gates_and_vmodule_raises_per_file(
    restore_logging: None,
    capsys: pytest.CaptureFixture[str],
    verbosity: int,
    vmodule: str,
    shown: list[object],
) -> None:
    logs.configure(verbosity=verbosity, vmodule=vmodule, flush_frequency=0)
    for level in (1, 2, 4):
        logs.log_v(log, level, "at", level=level)
    log.debug("debug line")
    seen: list[object] = []
    for ln in lines(capsys):
        f = parse_klog(ln)
        seen.append(int(f["kv"]["level"]) if f["quoted"] else "debug")
    assert seen == shown
    assert [logs.v_enabled(level) for level in (1, 2, 4)] == [x in shown for x in (1, 2, 4)]


def test_set_verbosity_changes_it_at_run_time(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure(verbosity=0, flush_frequency=0)
    logs.log_v(log, 2, "off")
    logs.set_verbosity(4)
    assert logs.verbosity() == 4 and logging.getLogger().level == logging.DEBUG
    logs.log_v(log, 2, "on")
    log.debug("debug on")
    logs.set_verbosity(1)
    assert logging.getLogger().level == logging.INFO
    logs.log_v(log, 2, "off again")
    assert [parse_klog(ln)["msg"] for ln in lines(capsys)] == ["on", "debug on"]
    with pytest.raises(logs.LogConfigError):
        logs.set_verbosity(-1)


@pytest.mark.parametrize(
    ("level", "verbosity", "root", "v2_shown"),
    [
        ("warning", 4, logging.WARNING, False),  # --log-level wins over --v
        ("info", 2, logging.INFO, True),
        ("debug", 0, logging.DEBUG, True),  # debug shows what --v=4 shows
        (None, 2, logging.INFO, True),
        (None, 4, logging.DEBUG, True),
    ],
)
def test_log_level_wins_when_given(
    restore_logging: None,
    capsys: pytest.CaptureFixture[str],
    level: str | None,
    verbosity: int,
    root: int,
    v2_shown: bool,
) -> None:
    logs.configure(verbosity=verbosity, level=level, flush_frequency=0)
    assert logging.getLogger().level == root
    logs.log_v(log, 2, "v2")
    assert bool(lines(capsys)) is v2_shown


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fmt": "xml"}, 'format: Invalid value: "xml": Unsupported log format'),
        ({"vmodule": "foo"}, '"foo" does not have the pattern=N format'),
        (
            {"vmodule": "foo=x"},
            'parsing verbosity in "foo=x": strconv.ParseUint: parsing "x": invalid syntax',
        ),
        ({"vmodule": "=2"}, '"=2" does not have the pattern=N format'),
        ({"vmodule": "a=-1"}, 'parsing verbosity in "a=-1": strconv.ParseUint: parsing "-1": invalid syntax'),
        (
            {"vmodule": "a=2147483648"},
            'parsing verbosity in "a=2147483648": strconv.ParseUint: parsing "2147483648": '
            "value out of range",
        ),
        ({"verbosity": -1}, "verbosity must be 0 or more, not -1"),
    ],
)
def test_bad_options_are_refused_clearly(restore_logging: None, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(logs.LogConfigError) as info:
        logs.configure(**kwargs)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


def test_vmodule_skips_what_klog_skips() -> None:
    assert [(p.pattern, p.level) for p in logs.parse_vmodule("a=1,,b=0,c*=3,")] == [("a", 1), ("c*", 3)]


def test_the_cli_reads_the_flags_it_is_given(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    args = argparse.Namespace(
        log_level=None, verbosity=1, logging_format="json", vmodule="test_logs=2", log_flush_frequency=0.0
    )
    _setup_logging(args)
    logs.log_v(log, 2, "via vmodule")
    (line,) = lines(capsys)
    assert json.loads(line)["msg"] == "via vmodule"
    with pytest.raises(logs.LogConfigError):
        _setup_logging(argparse.Namespace(log_level=None, verbosity=0, vmodule="bad"))


class _Sink:
    def __init__(self) -> None:
        self.text = ""

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass


def _record(level: int, msg: str) -> logging.LogRecord:
    return logging.LogRecord("t", level, os.path.abspath(__file__), 1, msg, None, None)


def _v_record(v: int | None, level: int, msg: str) -> logging.LogRecord:
    record = _record(level, msg)
    if v is not None:
        setattr(record, V_ATTR, v)
    return record


def test_the_handler_holds_v_lines_until_a_flush_and_writes_v0_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sink = _Sink()
    monkeypatch.setattr("sys.stderr", sink)
    handler = FlushingStderrHandler(flush_frequency=3600.0)  # the ticker never fires in this test
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.handle(_v_record(2, logging.INFO, "one"))
    handler.handle(_v_record(None, logging.DEBUG, "two"))
    assert sink.text == "" and handler.pending == len("one\ntwo\n")
    handler.handle(_v_record(None, logging.INFO, "three"))  # V(0): written, after what was held
    assert sink.text == "one\ntwo\nthree\n" and handler.pending == 0
    handler.handle(_v_record(4, logging.INFO, "four"))
    handler.handle(_v_record(None, logging.WARNING, "five"))
    assert sink.text.endswith("four\nfive\n")
    handler.handle(_v_record(2, logging.INFO, "six"))
    handler.close()  # logging.shutdown at exit closes it: nothing is lost
    assert sink.text.endswith("six\n")


def test_the_handler_flushes_by_itself_within_the_frequency(monkeypatch: pytest.MonkeyPatch) -> None:
    sink = _Sink()
    monkeypatch.setattr("sys.stderr", sink)
    handler = FlushingStderrHandler(flush_frequency=3600.0)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.handle(_v_record(2, logging.INFO, "held"))
    assert sink.text == ""
    handler.set_flush_frequency(0.01)  # wakes the ticker, which flushes on its next period
    deadline = time.monotonic() + 30
    while "held" not in sink.text and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sink.text == "held\n"
    handler.set_flush_frequency(0)
    handler.handle(_v_record(2, logging.INFO, "unbuffered"))
    assert sink.text == "held\nunbuffered\n"
