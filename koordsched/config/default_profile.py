"""Where the bundled default profile lives (config/koord-scheduler.yaml, shipped as package data)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_PROFILE_NAME = "koord-scheduler.yaml"


def default_profile_path() -> Path:
    return Path(__file__).parent.parent / "data" / DEFAULT_PROFILE_NAME
