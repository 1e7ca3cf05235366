"""The cluster's expected GPU fragmentation over a workload mix, for reports (the simulator's
GPU FRAGMENTATION block): the paper's sum over nodes of the mix-weighted fragment, with the
mix the pods' own shares (no scarcity weighting, so profiles compare on one scale)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from koordsched.framework.snapshot import Snapshot
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare import DeviceStore
from koordsched.plugins.gpufragmentation import kernels as kf
from koordsched.plugins.gpufragmentation.demand import Shape, access_mask, pod_shape
from koordsched.plugins.gpufragmentation.mix import build_tables
from koordsched.plugins.gpufragmentation.nodes import fragments, node_sizes, node_table
from koordsched.plugins.nodeaffinity.selector import Masks


def workload_mix(pods: Iterable[PodInfo]) -> list[tuple[Shape, float]]:
    """Each shape among ``pods`` with its count."""
    counts = Counter(pod_shape(p) for p in pods)
    return [(shape, float(n)) for shape, n in counts.most_common()]


def expected_fragmentation(
    snapshot: Snapshot, devices: Callable[[], Mapping[str, Any]], mix: list[tuple[Shape, float]]
) -> float:
    """The summed expected fragment of every node, in GPUs (a card = 1)."""
    if not mix or snapshot.n == 0:
        return 0.0
    store = DeviceStore.of(snapshot, devices)
    store.sync()
    table = node_table(snapshot, store.flush_rows())
    masks = Masks()
    tables = build_tables(
        0, mix, lambda s: access_mask(snapshot, masks, s.placement), node_sizes(snapshot, table), False
    )
    values = fragments(table, tables, np.arange(snapshot.n, dtype=np.int64))
    return float(values.sum()) / kf.SCALE / 100
