"""The search for feasible nodes when only some are wanted (``percentageOfNodesToScore`` < 100).

kube-scheduler stops filtering once it has found ``numFeasibleNodesToFind`` nodes; the batch
filters here answer for many rows per call, so the search runs them over the candidate rows in
chunks, from the rotating start, and stops at the chunk where one more feasible row than wanted
has turned up. Which rows are feasible, which are kept and how many count as examined are then
exactly what one pass over every row followed by the cut gives (each row's verdict depends on
that row alone), while a pod in a large cluster pays for about the rows it needs, not all of them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from koordsched.framework.interface import Rows

#: The smallest chunk; each next chunk is twice the last, so a sparse search makes few calls.
MIN_CHUNK = 512


def search_rows(
    filter_rows: Callable[[Rows, int], tuple[Rows, int]],
    recheck: Callable[[Rows], Rows],
    rows: Rows,
    num_to_find: int,
    *,
    chunked: bool,
) -> tuple[Rows, int]:
    """Feasible rows in ``rows`` order (possibly more than ``num_to_find``: the caller cuts) and the
    rows examined. ``filter_rows(rows, limit)`` runs the filters ((passing rows, rows examined));
    ``recheck`` drops the rows where nominated pods leave no room. Without ``chunked`` (a profile
    whose last filters are per-node ones, which stop at the limit themselves), one pass."""
    if not chunked or num_to_find >= len(rows):
        feasible, examined = filter_rows(rows, num_to_find)
        return (recheck(feasible) if len(feasible) else feasible), examined
    found: list[Rows] = []
    count = 0
    start = 0
    size = max(2 * (num_to_find + 1), MIN_CHUNK)
    # One more than wanted tells the cut where the wanted ones end, as the whole pass would.
    while start < len(rows) and count <= num_to_find:
        chunk = rows[start : start + size]
        ok, _ = filter_rows(chunk, len(chunk))
        if len(ok):
            ok = recheck(ok)
        found.append(ok)
        count += len(ok)
        start += len(chunk)
        size *= 2
    feasible = found[0] if len(found) == 1 else np.concatenate(found)
    # Every row of the chunks looked at was examined (the whole pass examines them all too, and
    # past the cut the caller counts only up to the last kept row).
    return feasible, start
