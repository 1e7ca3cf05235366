"""Fixtures for the bad-input tests: files written where the test can name them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.scenario.helpers import WriteYaml


@pytest.fixture
def write_yaml(tmp_path: Path) -> WriteYaml:
    """``write_yaml(text, name="cluster.yaml")``: dedent ``text`` into ``tmp_path/name``, return the path."""

    def write(text: str, name: str = "cluster.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip("\n"))
        return path

    return write
