"""Where the bundled descheduler config lives (inside the package, so an install has it)."""

from __future__ import annotations

from pathlib import Path


def default_descheduler_config_path() -> Path:
    return Path(__file__).resolve().parent.parent.parent / "data" / "koord-descheduler.yaml"
