"""The chunked search for feasible rows (framework/search.py) against one pass over every row."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from koordsched.framework.interface import Rows
from koordsched.framework.search import MIN_CHUNK, search_rows


def _cut(rows: Rows, feasible: Rows, examined: int, num_to_find: int) -> tuple[list[int], int]:
    """What Framework.find_feasible does with the search's answer."""
    if len(feasible) > num_to_find:
        last = int(feasible[num_to_find - 1])
        examined = int(np.nonzero(rows == last)[0][0]) + 1
        feasible = feasible[:num_to_find]
    return feasible.tolist(), examined


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 3000),
    density=st.floats(0.0, 1.0),
    nominee_density=st.floats(0.0, 0.3),
    wanted=st.integers(1, 3000),
    start=st.integers(0, 2999),
    seed=st.integers(0, 2**32 - 1),
)
def test_chunks_give_what_one_pass_gives(
    n: int, density: float, nominee_density: float, wanted: int, start: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    passes = rng.random(n) < density
    blocked = rng.random(n) < nominee_density  # rows the nominated pods leave no room on
    base = np.arange(n, dtype=np.int64)
    rows = np.concatenate((base[start % n :], base[: start % n]))
    calls: list[int] = []

    def filter_rows(chunk: Rows, limit: int) -> tuple[Rows, int]:
        calls.append(len(chunk))
        return chunk[passes[chunk]], len(chunk)

    def recheck(ok: Rows) -> Rows:
        return ok[~blocked[ok]]

    num_to_find = min(wanted, n)
    whole = _cut(rows, *search_rows(filter_rows, recheck, rows, num_to_find, chunked=False), num_to_find)
    assert calls == [n]
    calls.clear()
    chunked = _cut(rows, *search_rows(filter_rows, recheck, rows, num_to_find, chunked=True), num_to_find)
    assert chunked == whole
    assert sum(calls) <= n
    if num_to_find < n:
        # Chunks grow: a search makes few filter calls, and stops early when enough rows pass.
        assert len(calls) <= 1 + max(0, int(np.ceil(np.log2(max(1, n / MIN_CHUNK))))) + 1
        ok = passes & ~blocked
        if ok[rows[: max(2 * (num_to_find + 1), MIN_CHUNK)]].sum() > num_to_find:
            assert calls == [min(n, max(2 * (num_to_find + 1), MIN_CHUNK))]


def test_everything_wanted_is_one_pass() -> None:
    rows = np.arange(1000, dtype=np.int64)
    seen: list[int] = []

    def filter_rows(chunk: Rows, limit: int) -> tuple[Rows, int]:
        seen.append(limit)
        return chunk, len(chunk)

    feasible, examined = search_rows(filter_rows, lambda ok: ok, rows, 1000, chunked=True)
    assert seen == [1000] and examined == 1000 and len(feasible) == 1000
