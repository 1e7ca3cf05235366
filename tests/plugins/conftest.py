"""Fixtures for the in-tree plugin tests: a snapshot, a handle, placing pods, running filters.

Plugins are called directly (no framework), the way upstream's plugin unit tests call
them, so a failure points at the plugin and not at the runtime around it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from koordsched.api.core import Node, Pod
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import BatchFilterPlugin, PreFilterPlugin
from koordsched.framework.snapshot import NodeInfo, Snapshot
from koordsched.framework.status import Code, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.registry import in_tree_registry
from tests.builders import pod_info
from tests.fakes import FakeHandle

GI = 1024**3
MI = 1024**2


@pytest.fixture(scope="session", autouse=True)
def _kernels_compiled() -> None:
    """Pay the kernels' compile (or cache load) once, before any timing-sensitive test."""
    in_tree_registry().warm_up()


# --- placing nodes and pods -----------------------------------------------------------------------


def add_node(snap: Snapshot, node: Node, alloc: Mapping[str, int]) -> NodeInfo:
    return snap.add_node(node, dict(alloc))


def place(snap: Snapshot, node_name: str, pod: Pod) -> PodInfo:
    """Put an already scheduled pod on a node, as the cache does."""
    info = pod_info(pod)
    snap.add_pod(snap.by_name[node_name], info)
    return info


def all_rows(snap: Snapshot) -> np.ndarray:
    return np.arange(snap.n, dtype=np.int64)


# --- a handle ----------------------------------------------------------------------------------


@pytest.fixture
def snap() -> Snapshot:
    return Snapshot()


@pytest.fixture
def handle(snap: Snapshot) -> FakeHandle:
    return FakeHandle(snap)


# --- running a filter the way the framework does -------------------------------------------------


def run_filter(plugin: Any, pod: PodInfo, snap: Snapshot, state: CycleState | None = None) -> np.ndarray:
    """PreFilter (if any; a Skip means every row passes), then the batch filter over every row."""
    state = state if state is not None else CycleState()
    rows = all_rows(snap)
    if isinstance(plugin, PreFilterPlugin):
        _, status = plugin.pre_filter(state, pod)
        if status.code is Code.SKIP:
            return np.zeros(len(rows), dtype=np.int64)
        assert status.ok, status
    assert isinstance(plugin, BatchFilterPlugin)
    codes = plugin.filter_batch(state, pod, rows)
    assert codes.dtype == np.int64 and codes.shape == (len(rows),)
    return codes


def statuses(plugin: Any, pod: PodInfo, snap: Snapshot) -> dict[str, Status | None]:
    """Node name -> None when it passes, else the Status ``explain`` gives for its code."""
    state = CycleState()
    codes = run_filter(plugin, pod, snap, state)
    return {
        info.name: None if code == 0 else plugin.explain(state, pod, int(code))
        for info, code in zip(snap.infos, codes.tolist(), strict=True)
    }


@pytest.fixture
def rng() -> random.Random:
    return random.Random(20240601)
