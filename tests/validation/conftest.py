"""Fixtures for the bad-input tests: files written where the test can name them."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.kube.fake_apiserver import FakeApiServer
from tests.scenario.helpers import WriteYaml


@pytest.fixture
def write_yaml(tmp_path: Path) -> WriteYaml:
    """``write_yaml(text, name="cluster.yaml")``: dedent ``text`` into ``tmp_path/name``, return the path."""

    def write(text: str, name: str = "cluster.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip("\n"))
        return path

    return write


@pytest.fixture
async def api() -> AsyncIterator[FakeApiServer]:
    server = FakeApiServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
