"""clientConnection.contentType / acceptContentTypes: koordsched's client speaks JSON only, so a
profile asking for anything else (upstream's protobuf default, written out) is named at start-up."""

from __future__ import annotations

import pytest

from koordsched.config.load import load_config
from koordsched.plugins.registry import in_tree_registry

BASE = b"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
clientConnection: {%s}
profiles:
- schedulerName: koord-scheduler
"""


@pytest.mark.parametrize(
    ("connection", "named"),
    [
        (b"", []),
        (b"contentType: application/json", []),
        (b"contentType: application/vnd.kubernetes.protobuf", ["contentType"]),
        (
            b"acceptContentTypes: 'application/vnd.kubernetes.protobuf,application/json'",
            ["acceptContentTypes"],
        ),
        (
            b"contentType: application/vnd.kubernetes.protobuf, acceptContentTypes: application/yaml",
            ["contentType", "acceptContentTypes"],
        ),
    ],
)
def test_a_content_type_other_than_json_is_named(connection: bytes, named: list[str]) -> None:
    cfg = load_config(BASE % connection, in_tree_registry())
    lines = [line for line in cfg.not_implemented() if line.startswith("clientConnection.")]
    assert [line.split(" ", 1)[0] for line in lines] == [f"clientConnection.{f}" for f in named]
    for line in lines:
        assert line.endswith(
            "koordsched's client sends and accepts application/json only; the setting has no effect"
        )
