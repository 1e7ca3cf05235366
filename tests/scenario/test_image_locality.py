"""ImageLocality through ``simulate`` with the bundled profile: nodes that already hold a pod's
images are preferred, and ``--explain`` shows the plugin's scores."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from koordsched.backends.sim.runner import simulate
from koordsched.cli import main
from tests.builders import node_manifest, pod_manifest, yaml_docs
from tests.scenario.helpers import WriteYaml

MB = 1024 * 1024


def node(name: str, images: str = "[]") -> dict[str, Any]:
    """A node; ``images`` is its status.images as YAML."""
    return node_manifest(name, "8", "16Gi", capacity=False, images=yaml.safe_load(images))


def pod(name: str, image: str) -> dict[str, Any]:
    return pod_manifest(name, uid="", image=image)


def docs(*parts: dict[str, Any]) -> str:
    return yaml_docs(*parts)


HAS_APP = f"[{{names: [registry.example/app:1.0, registry.example/app@sha256:0f], sizeBytes: {800 * MB}}}]"
CLUSTER = docs(node("n1"), node("n2", HAS_APP), node("n3"), pod("app", "registry.example/app:1.0"))
#: 800 MiB on one node of three, for a one-container pod: upstream's scaled score.
N2_SCORE = 100 * (int(800 * MB / 3) - 23 * MB) // (977 * MB)


def test_the_node_holding_the_image_is_preferred(write_yaml: WriteYaml) -> None:
    for seed in range(5):  # not a lucky tie-break
        assert simulate([write_yaml(CLUSTER)], seed=seed).pod("default/app").node == "n2"


def test_explain_shows_its_scores(write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(write_yaml(CLUSTER)), "-o", "json", "--explain"]) == 0
    [entry] = json.loads(capsys.readouterr().out)["pods"]
    by_node = {e["node"]: e for e in entry["explain"]}
    assert by_node["n2"]["scores"]["ImageLocality"] == {
        "raw": N2_SCORE,
        "normalized": N2_SCORE,
        "weight": 1,
        "weighted": N2_SCORE,
    }
    assert by_node["n1"]["scores"]["ImageLocality"]["weighted"] == 0
    assert entry["explain"][0]["node"] == "n2"


def test_an_image_no_node_holds_scores_nothing(write_yaml: WriteYaml) -> None:
    """Every node would score 0: the plugin skips, and nothing of it shows."""
    path = write_yaml(docs(node("n1"), node("n2", HAS_APP), pod("other", "registry.example/other:1.0")))
    [entry, *_] = simulate([path], explain=True).pod("default/other").explain or []
    assert "ImageLocality" not in entry["scores"]


def test_an_untagged_image_is_latest(write_yaml: WriteYaml) -> None:
    latest = f'[{{names: ["busybox:latest"], sizeBytes: {900 * MB}}}]'
    path = write_yaml(docs(node("n1"), node("n2", latest), pod("p", "busybox")))
    assert simulate([path]).pod("default/p").node == "n2"
