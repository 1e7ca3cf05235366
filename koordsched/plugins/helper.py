"""Pieces shared by several in-tree plugins (upstream's ``plugins/helper`` and field errors)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from koordsched.config.catalog import ArgsError
from koordsched.framework.interface import Codes, Rows, Scores
from koordsched.framework.types import MAX_NODE_SCORE, PodInfo


def default_normalize_score(scores: Scores, reverse: bool, max_priority: int = MAX_NODE_SCORE) -> None:
    """``helper.DefaultNormalizeScore``, in place: scale so the highest raw score becomes ``max_priority``.

    With ``reverse`` the scale is flipped (max_priority - scaled). All-zero input stays 0,
    or becomes ``max_priority`` everywhere when reversed. Scores are non-negative, so
    floor division equals Go's truncation.
    """
    if len(scores) == 0:
        return
    top = int(scores.max())
    if top <= 0:
        if reverse:
            scores[:] = max_priority
        return
    np.multiply(scores, max_priority, out=scores)
    np.floor_divide(scores, top, out=scores)
    if reverse:
        np.subtract(max_priority, scores, out=scores)


def as_rows(rows: Rows) -> Rows:
    """``rows`` as the C-contiguous int64 array the kernels' eager signatures require."""
    if rows.dtype != np.int64 or not rows.flags.c_contiguous:
        return np.ascontiguousarray(rows, dtype=np.int64)
    return rows


def node_only_copies(pods: Sequence[PodInfo], rows: Rows, reads: Callable[[PodInfo], object]) -> Codes | None:
    """``filter_copies`` of a filter whose verdict reads only the node and ``reads(pod)``: every
    pod fits where the first does when they all read the same (None otherwise: not counted)."""
    first = reads(pods[0])
    if any(reads(p) != first for p in pods[1:]):
        return None
    return np.full(len(rows), len(pods), dtype=np.int64)


def go_value(value: object) -> str:
    """A value as Go's field errors print it: strings quoted, numbers bare."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def invalid(path: str, value: object, detail: str) -> str:
    """``field.Invalid(path, value, detail).Error()``."""
    return f"{path}: Invalid value: {go_value(value)}: {detail}"


def unsupported(path: str, value: object, supported: Iterable[str]) -> str:
    """``field.NotSupported(path, value, supported).Error()``."""
    quoted = ", ".join(go_value(s) for s in supported)
    return f"{path}: Unsupported value: {go_value(value)}: supported values: {quoted}"


def required(path: str, detail: str) -> str:
    return f"{path}: Required value: {detail}"


def duplicate(path: str, value: object) -> str:
    return f"{path}: Duplicate value: {go_value(value)}"


def raise_field_errors(errors: list[str]) -> None:
    """Raise one :class:`ArgsError` for all errors, formatted as Go's ``ErrorList.ToAggregate()``."""
    if not errors:
        return
    raise ArgsError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
