"""The table's GPU column counts whole cards, percent-of-a-card and shared-core requests together."""

from __future__ import annotations

import pytest

from koordsched.backends.sim.report import _gpu


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({}, None),
        ({"nvidia.com/gpu": (3, 8)}, "3/8"),
        ({"nvidia.com/gpu": (2, 8), "koordinator.sh/gpu": (200, 800)}, "4/8"),
        ({"koordinator.sh/gpu": (100, 800), "koordinator.sh/gpu-core": (50, 800)}, "1.5/8"),
        ({"koordinator.sh/gpu-core": (25, 0)}, "0.25/0"),
    ],
)
def test_gpu_column(resources: dict[str, tuple[int, int]], expected: str | None) -> None:
    assert _gpu(resources) == expected
