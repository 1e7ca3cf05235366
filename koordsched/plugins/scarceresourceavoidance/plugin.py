"""ScarceResourceAvoidance: lower the score of nodes offering scarce resources the pod does not use.

``diff`` is what a node offers (allocatable > 0) that the pod does not request, ``scarce`` the
part of ``diff`` the args call scarce; the score is 100 when either is empty, else
``(|diff| - |scarce|) * 100 / |diff|``. Not normalized. A CPU-only pod thus prefers nodes
without GPUs, keeping them for the pods that need them.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Final

import numpy as np

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import (
    BatchScorePlugin,
    ConstantScorePlugin,
    Handle,
    PreScorePlugin,
    RowLocalScorePlugin,
    Rows,
    Scores,
)
from koordsched.framework.shared_memo import IdentityMemo
from koordsched.framework.snapshot import I64
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import MAX_NODE_SCORE, PodInfo
from koordsched.plugins.helper import as_rows
from koordsched.plugins.noderesourcesfitplus.request import requested_names
from koordsched.plugins.scarceresourceavoidance.args import ScarceResourceAvoidanceArgs
from koordsched.plugins.scarceresourceavoidance.offers import NodeOffers

_PRE_SCORE_KEY: Final = "PreScoreScarceResourceAvoidance"
#: Per requests dict (one per template: ``framework.shared_memo``), then per requests as written.
_BY_OBJECT: IdentityMemo[frozenset[str]] = IdentityMemo()
#: Requested sets (and requests) whose tables are kept before starting afresh.
_MAX_TABLES: Final = 1024
#: requested_set's answers by the pod's requests; a pure function's memo.
_BY_REQUESTS: dict[tuple[tuple[str, int], ...], frozenset[str]] = {}


def requested_set(pod: PodInfo) -> frozenset[str]:
    """The names the pod requests, once per requests dict and per requests as written: they follow
    from its requests alone."""
    cached = _BY_OBJECT.get(pod.requests)
    if cached is None:
        key = tuple(pod.requests.items())
        cached = _BY_REQUESTS.get(key)
        if cached is None:
            if len(_BY_REQUESTS) >= _MAX_TABLES:
                _BY_REQUESTS.clear()
            cached = _BY_REQUESTS[key] = frozenset(requested_names(pod))
        _BY_OBJECT.put(pod.requests, cached)
    return cached


def set_score(offered: frozenset[str], requested: frozenset[str], scarce: frozenset[str]) -> int:
    """The score of a node offering ``offered`` for a pod requesting ``requested``."""
    diff = offered - requested
    n_scarce = len(diff & scarce)
    if not n_scarce:  # also when diff is empty
        return MAX_NODE_SCORE
    return (len(diff) - n_scarce) * MAX_NODE_SCORE // len(diff)


class _Table:
    """Scores of one requested set, per offered-set id."""

    __slots__ = ("constant", "epoch", "scores")

    def __init__(self, epoch: int, scores: I64) -> None:
        self.epoch = epoch
        self.scores = scores
        #: The score of every set when they all score the same (always so when nodes are all
        #: alike, and the maximum when no node offers a scarce resource the pod does not request).
        self.constant: int | None = None
        if not len(scores):
            self.constant = MAX_NODE_SCORE
        elif (scores == scores[0]).all():
            self.constant = int(scores[0])


class ScarceResourceAvoidance:
    name = "ScarceResourceAvoidance"

    def __init__(self, args: ScarceResourceAvoidanceArgs | None, handle: Handle) -> None:
        args = args if args is not None else ScarceResourceAvoidanceArgs()
        args.validate()
        self._handle = handle
        self._scarce = frozenset(args.resources)
        self._offers = NodeOffers.of(handle.snapshot)
        self._tables: dict[frozenset[str], _Table] = {}

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        state.write(_PRE_SCORE_KEY, requested_set(pod))
        return SUCCESS

    def _table(self, requested: frozenset[str]) -> _Table:
        offers = self._offers
        table = self._tables.get(requested)
        if table is None or table.epoch != offers.epoch or len(table.scores) != len(offers.sets):
            if len(self._tables) >= _MAX_TABLES:
                self._tables.clear()
            scores = np.asarray(
                [set_score(offered, requested, self._scarce) for offered in offers.sets], dtype=np.int64
            )
            table = self._tables[requested] = _Table(offers.epoch, scores)
        return table

    def score_signature(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """Row-local (see RowLocalScorePlugin): a row's score is its offered set's, for the requested set."""
        requested: frozenset[str] | None = state.read_optional(_PRE_SCORE_KEY, frozenset)
        return requested if requested is not None else requested_set(pod)

    def constant_score(self, state: CycleState, pod: PodInfo) -> int | None:
        """The score when every node scores the pod alike (ConstantScorePlugin): always so when no node
        offers a scarce resource the pod does not request (100), or when all nodes are alike."""
        requested: frozenset[str] | None = state.read_optional(_PRE_SCORE_KEY, frozenset)
        if requested is None:
            requested = requested_set(pod)
        return self._table(requested).constant

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        requested: frozenset[str] | None = state.read_optional(_PRE_SCORE_KEY, frozenset)
        if requested is None:
            requested = requested_set(pod)
        table = self._table(requested)
        if table.constant is not None:
            return np.full(len(rows), table.constant, dtype=np.int64)
        # Sets never go away between renumberings, so a table as long as the sets covers every row.
        out: Scores = table.scores[self._offers.ids[as_rows(rows)]]
        return out


if TYPE_CHECKING:
    # The extension points ScarceResourceAvoidance implements; mypy checks each line, nothing runs.
    _pre_score: type[PreScorePlugin] = ScarceResourceAvoidance
    _score: type[BatchScorePlugin] = ScarceResourceAvoidance
    _row_local: type[RowLocalScorePlugin] = ScarceResourceAvoidance
    _constant: type[ConstantScorePlugin] = ScarceResourceAvoidance
