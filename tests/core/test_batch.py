"""The shared batch evaluator's tiers and the filter-code table (framework/batch.py)."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import pytest

from koordsched.framework.batch import BatchEvaluator, BoolArray, FilterCodes
from koordsched.framework.snapshot import I64, NodeInfo, Snapshot
from koordsched.framework.status import Code, Status
from tests.builders import node


def _snapshot(n: int) -> Snapshot:
    snap = Snapshot()
    for i in range(n):
        snap.add_node(node(f"n{i}"), {"cpu": 1000})
    return snap


class Exact:
    """Counts calls; the value is the row number times ten, kept unless the row is in ``no_keep``."""

    def __init__(self, no_keep: frozenset[int] = frozenset()) -> None:
        self.calls: list[int] = []
        self.no_keep = no_keep

    def __call__(self, info: NodeInfo) -> tuple[int, bool]:
        self.calls.append(info.row)
        return info.row * 10, info.row not in self.no_keep


def rows(*r: int) -> I64:
    return np.asarray(r, dtype=np.int64)


# --- FilterCodes ---------------------------------------------------------------------------


def test_codes_are_stable_per_status_and_ignore_the_plugin() -> None:
    codes = FilterCodes("P")
    a = codes.code(Status.unschedulable("too small"))
    b = codes.code(Status.unresolvable("wrong kind"))
    assert (a, b) == (1, 2)
    assert codes.code(Status.unschedulable("too small", plugin="P")) == a
    assert codes.code(Status()) == 0
    assert codes.status(b) == Status.unresolvable("wrong kind")
    assert codes.status(b).plugin == ""  # the runtime names the plugin, not the table
    assert codes.dynamic == 2


def test_fixed_codes_come_first_and_dynamic_ones_follow() -> None:
    fixed = {1: Status.unschedulable("kernel says no"), 7: Status.unresolvable("never")}
    codes = FilterCodes("P", fixed)
    assert codes.code(Status.unresolvable("never")) == 7
    assert codes.code(Status.unschedulable("new")) == 8
    assert 1 in codes and 8 in codes and 5 not in codes
    assert FilterCodes("P", fixed, first=100).code(Status.unschedulable("new")) == 100


def test_dynamic_codes_may_not_shadow_fixed_ones() -> None:
    with pytest.raises(ValueError, match="overlap fixed code 7"):
        FilterCodes("P", {7: Status.unschedulable("x")}, first=3)


def test_an_unknown_code_explains_itself_as_an_error() -> None:
    status = FilterCodes("DeviceShare").status(42)
    assert status.code is Code.ERROR
    assert status.message() == "DeviceShare: unknown filter code 42"


# --- BatchEvaluator ------------------------------------------------------------------------


def test_without_a_signature_every_row_is_computed_every_time() -> None:
    snap = _snapshot(3)
    ev, exact = BatchEvaluator(eager=True), Exact()
    for _ in range(2):
        out = ev.evaluate(snap, rows(0, 1, 2), memo_key=None, content_key=None, exact=exact)
        assert out.tolist() == [0, 10, 20]
    assert exact.calls == [0, 1, 2, 0, 1, 2]


def test_the_row_memo_serves_unchanged_rows_and_recomputes_touched_ones() -> None:
    snap = _snapshot(3)
    ev, exact = BatchEvaluator(eager=True), Exact()
    ev.evaluate(snap, rows(0, 1, 2), memo_key="sig", content_key=None, exact=exact)
    snap.touch("n1")
    out = ev.evaluate(snap, rows(2, 1, 0), memo_key="sig", content_key=None, exact=exact)
    assert out.tolist() == [20, 10, 0]
    assert exact.calls == [0, 1, 2, 1]
    # Another signature has its own memo.
    ev.evaluate(snap, rows(0), memo_key="other", content_key=None, exact=exact)
    assert exact.calls[-1] == 0


def test_a_lazy_memo_starts_at_a_signatures_second_use() -> None:
    snap = _snapshot(2)
    ev, exact = BatchEvaluator(), Exact()
    for _ in range(3):
        ev.evaluate(snap, rows(0, 1), memo_key="sig", content_key=None, exact=exact)
    assert exact.calls == [0, 1, 0, 1]


def test_the_kernel_decides_and_sends_only_pending_rows_to_the_exact_logic() -> None:
    snap = _snapshot(4)
    exact = Exact()

    def kernel(r: I64) -> tuple[I64, BoolArray | None]:
        return r + 100, (r % 2 == 1)

    out = BatchEvaluator().evaluate(
        snap, rows(0, 1, 2, 3), memo_key=None, content_key=None, exact=exact, kernel=kernel
    )
    assert out.tolist() == [100, 10, 102, 30]
    assert exact.calls == [1, 3]


def test_a_kernel_that_decides_everything_needs_no_exact_logic() -> None:
    snap = _snapshot(2)

    def decided(r: I64) -> tuple[I64, BoolArray | None]:
        return r * 3, None

    def half(r: I64) -> tuple[I64, BoolArray | None]:
        return r * 3, r == 1

    ev = BatchEvaluator()
    assert ev.evaluate(snap, rows(0, 1), memo_key=None, content_key=None, kernel=decided).tolist() == [0, 3]
    with pytest.raises(ValueError, match="left for the exact logic"):
        ev.evaluate(snap, rows(0, 1), memo_key=None, content_key=None, kernel=half)


def test_the_content_memo_shares_values_between_alike_nodes() -> None:
    snap = _snapshot(4)
    ev = BatchEvaluator()
    exact = Exact(no_keep=frozenset({3}))

    def token(info: NodeInfo) -> Hashable | None:
        # n0 and n1 are alike, n2 may not be remembered, n3's value may not be kept.
        return {0: "a", 1: "a", 2: None, 3: "d"}[info.row]

    for _ in range(2):
        out = ev.evaluate(snap, rows(0, 1, 2, 3), memo_key=None, content_key="sig", exact=exact, token=token)
        assert out.tolist() == [0, 0, 20, 30]
    assert exact.calls == [0, 2, 3, 2, 3]
    # Another request signature has its own table; clear() forgets every table.
    ev.evaluate(snap, rows(1), memo_key=None, content_key="sig2", exact=exact, token=token)
    ev.clear()
    ev.evaluate(snap, rows(0), memo_key=None, content_key="sig", exact=exact, token=token)
    assert exact.calls[-2:] == [1, 0]
