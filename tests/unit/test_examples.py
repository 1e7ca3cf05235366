"""The examples' pods are ones an API server takes: each container has a name and an image.

``koordsched simulate`` does not need either, so nothing else notices when an example loses them;
``tests/e2e/test_examples.py`` creates every example's objects on a real API server (dry run) and
checks everything else it validates.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


def pods(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict) and d.get("kind") == "Pod"]


def test_there_are_examples_with_pods() -> None:
    assert EXAMPLES, "no examples/*.yaml"
    assert any(pods(p) for p in EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_container_of_every_pod_has_a_name_and_an_image(example: Path) -> None:
    missing = []
    for pod in pods(example):
        spec = pod.get("spec") or {}
        pod_name = (pod.get("metadata") or {}).get("name")
        if not spec.get("containers"):
            missing.append(f"pod {pod_name}: no containers")
        for field in ("initContainers", "containers"):
            for i, container in enumerate(spec.get(field) or []):
                missing.extend(
                    f"pod {pod_name}: spec.{field}[{i}].{key}"
                    for key in ("name", "image")
                    if not container.get(key)
                )
    assert not missing, f"{example.name}: an API server refuses these pods: " + ", ".join(missing)
