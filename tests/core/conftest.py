"""Fixtures for the core tests."""

from __future__ import annotations

import pytest

from tests.core import harness


@pytest.fixture(autouse=True)
def _reset_fake_plugins() -> None:
    """The fake plugins' behaviour and call log start empty in every test."""
    harness.reset()
