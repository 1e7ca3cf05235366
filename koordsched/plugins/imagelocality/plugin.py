"""ImageLocality: kube-scheduler's Score plugin favouring nodes that already have the pod's images.

Upstream's score, per node: for every container (init containers too) whose image the node
holds, the image's size scaled by the share of nodes holding it (so an image present
everywhere counts in full and one present on a single node of many counts little: pods are
not all piled onto the one node that pulled an image first); the sum is clamped to
[23 MiB, 1000 MiB x containers] and mapped linearly onto 0..100. No NormalizeScore.

Upstream has no PreScore here; this one only prepares the per-image contributions and returns
Skip when every node would score 0 (no container's image on any node, or too little of it to
pass the lower threshold), so a pod whose images no node reports pays one dict lookup per
container and nothing per node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import (
    BatchScorePlugin,
    Handle,
    PreScorePlugin,
    Rows,
    Scores,
)
from koordsched.framework.status import SKIP, SUCCESS, Code, Status
from koordsched.framework.types import MAX_NODE_SCORE, PodInfo
from koordsched.plugins.imagelocality.images import ImageStates, normalized_image_name

NAME = "ImageLocality"
_STATE_KEY = "PreScore" + NAME
_NAMES_KEY = NAME

MB = 1024 * 1024
#: Below this much of a pod's images on a node the score is 0 (upstream's ``minThreshold``).
MIN_THRESHOLD = 23 * MB
#: Per container: above this much the score is 100 (upstream's ``maxContainerThreshold``).
MAX_CONTAINER_THRESHOLD = 1000 * MB
#: One image's contribution is held within this, so that a pod's sum stays within int64 whatever
#: sizes nodes report (any sum beyond the thresholds scores the same).
_CONTRIBUTION_LIMIT = 2**50


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    """``calculatePriority``: the clamped sum mapped onto 0..MAX_NODE_SCORE (one node, for tests)."""
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    return MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


def scaled_image_score(size: int, num_nodes: int, total_nodes: int) -> int:
    """``scaledImageScore``: the size times the share of nodes holding the image, in float64 and
    truncated, as upstream computes it."""
    spread = float(num_nodes) / float(total_nodes)
    return int(float(size) * spread)


class _PreScore:
    __slots__ = ("contributions", "num_containers")

    def __init__(self, contributions: list[tuple[str, int]], num_containers: int) -> None:
        #: (image name, scaled score) per container whose image some node holds, in container order.
        self.contributions = contributions
        self.num_containers = num_containers


class ImageLocality:
    name = NAME

    def __init__(self, args: Any, handle: Handle) -> None:
        self._handle = handle
        # Attached before the nodes arrive, so that an image's size is its first reporter's.
        self._snapshot = handle.snapshot
        self._images_index = ImageStates.of(self._snapshot)

    def _index(self) -> ImageStates:
        snap = self._handle.snapshot
        if snap is not self._snapshot:
            self._snapshot = snap
            self._images_index = ImageStates.of(snap)
        return self._images_index

    def _images(self, pod: PodInfo) -> tuple[str, ...]:
        """The pod's images, normalized, init containers first (once per PodInfo)."""
        known: tuple[str, ...] | None = pod.extra.get(_NAMES_KEY)
        if known is None:
            spec = pod.pod.spec
            known = tuple(normalized_image_name(c.image) for c in (*spec.init_containers, *spec.containers))
            pod.extra[_NAMES_KEY] = known
        return known

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        images = self._index()
        if not len(images):
            return SKIP
        snap = self._snapshot
        if snap.n == 0:
            return SKIP
        contributions: list[tuple[str, int]] = []
        names = self._images(pod)
        for name in names:
            size = images.size(name)
            if size is None:
                continue
            scaled = scaled_image_score(size, images.num_nodes(name), snap.n)
            contributions.append((name, max(-_CONTRIBUTION_LIMIT, min(scaled, _CONTRIBUTION_LIMIT))))
        # No node's sum can reach the lower threshold: every node scores 0.
        if sum(max(s, 0) for _, s in contributions) < MIN_THRESHOLD:
            return SKIP
        state.write(_STATE_KEY, _PreScore(contributions, len(names)))
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        known = state.read_optional(_STATE_KEY, _PreScore)
        if known is None:
            # PreScore did not run (a direct Score call): prepare what it would have.
            if self.pre_score(state, pod, rows).code is Code.SKIP:
                return np.zeros(len(rows), dtype=np.int64)
            known = state.read(_STATE_KEY, _PreScore)
        images = self._index()
        snap = self._snapshot
        sums = np.zeros(snap.n, dtype=np.int64)
        for name, scaled in known.contributions:
            # Each image's rows are distinct, so the fancy-indexed add counts every node once.
            sums[images.rows(name)] += scaled
        picked = sums[rows]
        max_threshold = MAX_CONTAINER_THRESHOLD * known.num_containers
        np.clip(picked, MIN_THRESHOLD, max_threshold, out=picked)
        picked -= MIN_THRESHOLD
        picked *= MAX_NODE_SCORE
        # Non-negative here, so floor division is Go's truncation.
        picked //= max_threshold - MIN_THRESHOLD
        return picked


if TYPE_CHECKING:
    _pre_score: type[PreScorePlugin] = ImageLocality
    _score: type[BatchScorePlugin] = ImageLocality
