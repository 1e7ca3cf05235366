"""Batch evaluation for Filter and Score plugins whose exact logic is per-node Python.

DeviceShare, NodeNUMAResource and LoadAwareScheduling answer for many rows at once, but
their exact answer for one node can be costly (an allocator walk, a topology merge). One
evaluator serves them all, in tiers, cheapest first:

1. **row memo**: a value kept per (request signature, row), served while the row's
   generation has not moved (:class:`~koordsched.framework.rowmemo.RowMemos`);
2. **kernel**: one vector pass over the stale rows that decides most of them and marks
   the rest as needing the exact logic;
3. **content memo**: a value kept per (request signature, node *content token*), since
   many nodes are alike (:class:`~koordsched.framework.rowmemo.ContentMemo`);
4. **exact**: the plugin's per-node logic, on what is left.

Each tier is optional: no signature means nothing is remembered (e.g. preemption state
in the cycle), no kernel means every row goes to the exact logic, a ``None`` token means
that node's value must not be remembered by content, and no exact logic means the kernel
decides every row (LoadAwareScheduling's thresholds are all arithmetic).

Filter values are small integer codes: :class:`FilterCodes` gives each distinct Status a
stable code, so a remembered code means the same thing whenever it is read, and turns a
code back into the Status a person reads (``explain``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping

import numpy as np
import numpy.typing as npt

from koordsched.framework.rowmemo import ContentMemo, RowMemos
from koordsched.framework.snapshot import I64, NodeInfo, Snapshot
from koordsched.framework.status import Code, Status

BoolArray = npt.NDArray[np.bool_]
#: A kernel pass: values for the rows, and which positions still need the exact logic
#: (None: none of them).
Kernel = Callable[[I64], tuple[I64, BoolArray | None]]
#: The exact logic on one node: its value, and whether the value may be remembered by content.
Exact = Callable[[NodeInfo], tuple[int, bool]]
#: What the exact logic reads of a node; equal tokens give equal values. None: do not remember.
Token = Callable[[NodeInfo], Hashable | None]


class FilterCodes:
    """Stable small codes for the Statuses a batch filter reports.

    ``fixed`` maps codes a kernel returns directly to their Status; every other Status gets
    the next free code from ``first`` on, the first time it is seen. Statuses are kept
    without their plugin name (the runtime adds it), so equal verdicts share one code.
    """

    def __init__(
        self, plugin: str, fixed: Mapping[int, Status] | None = None, first: int | None = None
    ) -> None:
        self._plugin = plugin
        self._by_code: dict[int, Status] = dict(fixed or {})
        self._by_status: dict[Status, int] = {s: c for c, s in self._by_code.items()}
        highest = max(self._by_code, default=0)
        if first is None:
            first = highest + 1
        elif first <= highest:
            # A handed-out code would shadow a kernel's fixed code: say so at construction.
            raise ValueError(f"{plugin}: dynamic filter codes from {first} overlap fixed code {highest}")
        self._first = first
        self._next = first

    def code(self, status: Status) -> int:
        """The code of ``status`` (0 for success)."""
        if status.ok:
            return 0
        code = self._by_status.get(status)  # Status equality ignores the plugin
        if code is None:
            plain = Status(status.code, *status.reasons)
            code = self._next
            self._next += 1
            self._by_status[plain] = code
            self._by_code[code] = plain
        return code

    def status(self, code: int) -> Status:
        """The Status behind a code this table handed out (an Error for one it never did)."""
        found = self._by_code.get(code)
        if found is not None:
            return found
        return Status(Code.ERROR, f"{self._plugin}: unknown filter code {code}")

    def __contains__(self, code: object) -> bool:
        return code in self._by_code

    @property
    def dynamic(self) -> int:
        """How many codes were handed out beyond the fixed ones."""
        return self._next - self._first


class BatchEvaluator:
    """Values of one extension point (a Filter's codes or a Score's scores) for many rows."""

    def __init__(self, *, eager: bool = False) -> None:
        # Its values may come from per-node Python (exact): remembered however few the rows.
        self._rows = RowMemos(eager=eager, direct_rows=0)
        self._content: ContentMemo[int] = ContentMemo()

    def evaluate(
        self,
        snapshot: Snapshot,
        rows: I64,
        *,
        memo_key: Hashable | None,
        content_key: Hashable | None,
        exact: Exact | None = None,
        token: Token | None = None,
        kernel: Kernel | None = None,
    ) -> I64:
        """Values for ``rows`` (aligned with them).

        ``memo_key`` is the request signature for the row memo (None: no row memo);
        ``content_key`` the one for the content memo (None, or no ``token``: no content memo).
        Without ``exact`` the kernel must decide every row (ValueError otherwise).
        """

        def compute(stale: I64) -> I64:
            return self._compute(snapshot, stale, content_key, exact, token, kernel)

        if memo_key is None:
            return compute(rows)
        return self._rows.get(memo_key, snapshot, rows, compute)

    def _compute(
        self,
        snapshot: Snapshot,
        rows: I64,
        content_key: Hashable | None,
        exact: Exact | None,
        token: Token | None,
        kernel: Kernel | None,
    ) -> I64:
        if kernel is None:
            values: I64 = np.zeros(len(rows), dtype=np.int64)
            todo: list[int] = list(range(len(rows)))
        else:
            values, pending = kernel(rows)
            if pending is None:
                return values
            todo = pending.nonzero()[0].tolist()  # (a third of flatnonzero's cost on a few rows)
        if not todo:
            return values
        if exact is None:
            raise ValueError("rows are left for the exact logic, but there is none")
        infos = snapshot.infos
        # Rows as plain ints, and one loop per case: the exact logic is per-node Python, so what
        # the loop itself costs per row is a visible share of a content-memo hit.
        picked: list[int] = rows.tolist() if kernel is None else rows[todo].tolist()
        known = self._content.table(content_key) if content_key is not None and token is not None else None
        if known is None or token is None:
            for i, row in zip(todo, picked, strict=True):
                values[i] = exact(infos[row])[0]
            return values
        for i, row in zip(todo, picked, strict=True):
            info = infos[row]
            key = token(info)
            if key is not None:
                value = known.get(key)
                if value is not None:
                    values[i] = value
                    continue
            value, keep = exact(info)
            if keep and key is not None:
                known[key] = value
            values[i] = value
        return values

    def clear(self) -> None:
        """Forget everything (the values' meaning changed, e.g. a code table was reset)."""
        self._rows.clear()
        self._content.clear()
