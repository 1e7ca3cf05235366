"""Queueing hints: a change that may let a rejected pod pass is never skipped (upstream's cases and more)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from koordsched.api.core import Pod
from koordsched.api.workloads import Namespace
from koordsched.plugins.interpodaffinity.hints import (
    after_namespace_change,
    after_node_change,
    after_pod_add,
    after_pod_delete,
    after_pod_update,
)
from tests.plugins.interpodaffinity.helpers import ZONE, affinity, anode, apod, info, sel, term

WEB = {"app": "web"}
AFFINE = apod("target", aff=affinity(required=[term(sel(**WEB), ZONE)]))
SELF_AFFINE = apod("target", labels=WEB, aff=affinity(required=[term(sel(**WEB), ZONE)]))
ANTI = apod("target", aff=affinity(anti=[term(sel(**WEB))]))
PLAIN = apod("target", labels=WEB)


def bound(labels: dict[str, str] | None = None, **kw: Any) -> Pod:
    return apod(labels=labels, node_name="n1", **kw)


def relabel(pod: Pod, labels: dict[str, str]) -> Pod:
    return msgspec.structs.replace(pod, metadata=msgspec.structs.replace(pod.metadata, labels=labels))


PLACED_WEB = bound(WEB)
BLOCKER = bound(aff=affinity(anti=[term(sel(**WEB))]))

POD_CASES: list[tuple[str, Any, Pod, Any, Any, bool]] = [
    ("add matching the affinity", after_pod_add, AFFINE, None, PLACED_WEB, True),
    ("bind confirmed (old is the pending pod)", after_pod_add, AFFINE, apod(labels=WEB), PLACED_WEB, True),
    ("add not matching the affinity", after_pod_add, AFFINE, None, bound({"app": "db"}), False),
    ("add cannot help anti-affinity", after_pod_add, ANTI, None, PLACED_WEB, False),
    ("add of an unscheduled pod", after_pod_add, AFFINE, None, apod(labels=WEB), False),
    ("labels now match the affinity", after_pod_update, AFFINE, bound(), PLACED_WEB, True),
    ("labels no longer match the anti-affinity", after_pod_update, ANTI, PLACED_WEB, bound(), True),
    ("labels unchanged", after_pod_update, ANTI, PLACED_WEB, relabel(PLACED_WEB, WEB), False),
    ("labels changed, irrelevant", after_pod_update, ANTI, bound({"x": "1"}), bound({"x": "2"}), False),
    ("last match leaves a self-matching group", after_pod_update, SELF_AFFINE, PLACED_WEB, bound(), True),
    ("delete matching the anti-affinity", after_pod_delete, ANTI, PLACED_WEB, None, True),
    ("delete of a pod whose anti-affinity blocked the target", after_pod_delete, PLAIN, BLOCKER, None, True),
    (
        "delete of the last match of a self-matching group",
        after_pod_delete,
        SELF_AFFINE,
        PLACED_WEB,
        None,
        True,
    ),
    ("delete of a match of a group the target is not in", after_pod_delete, AFFINE, PLACED_WEB, None, False),
    ("delete of an unrelated pod", after_pod_delete, ANTI, bound({"app": "db"}), None, False),
    ("delete of an unscheduled pod", after_pod_delete, ANTI, apod(labels=WEB), None, False),
]


@pytest.mark.parametrize(
    ("name", "hint", "target", "old", "new", "expected"), POD_CASES, ids=[c[0] for c in POD_CASES]
)
def test_pod_hints(name: str, hint: Any, target: Pod, old: Any, new: Any, expected: bool) -> None:
    assert hint(info(target), old, new) is expected


def test_node_hints() -> None:
    zoned = anode("n9", **{ZONE: "z9"})
    bare = anode("n9")
    assert after_node_change(info(AFFINE), None, zoned) is True
    assert after_node_change(info(AFFINE), None, bare) is False  # lacks the affinity's key
    # A pod with anti-affinity only (or none) may fit any new node.
    assert after_node_change(info(ANTI), None, bare) is True
    assert after_node_change(info(PLAIN), None, bare) is True
    assert after_node_change(info(AFFINE), bare, zoned) is True
    assert after_node_change(info(AFFINE), zoned, zoned) is False  # labels unchanged


def _ns(name: str, **labels: str) -> Namespace:
    return msgspec.convert({"metadata": {"name": name, "labels": labels}}, Namespace)


def test_namespace_hints() -> None:
    by_labels = apod("t", aff=affinity(anti=[term(sel(**WEB), ns_selector=sel(team="a"))]))
    assert after_namespace_change(info(by_labels), None, _ns("other", team="a")) is True
    assert after_namespace_change(info(ANTI), None, _ns("other", team="a")) is False
    # The target's own namespace: placed pods' namespace selectors read its labels.
    assert after_namespace_change(info(PLAIN), _ns("default"), _ns("default", team="a")) is True
