"""Annotation JSON is bounded: a value larger than Kubernetes allows or nested past Python's
recursion is an unreadable annotation on its own pod, never an exception out of the loop."""

from __future__ import annotations

import msgspec
import pytest

from koordsched.api.annotations import MAX_ANNOTATION_BYTES, decode_annotation, decode_json
from koordsched.api.core import Pod
from koordsched.api.koordinator import (
    ANNOTATION_DEVICE_ALLOCATE_HINT,
    ANNOTATION_DEVICE_ALLOCATED,
    DeviceHint,
)
from koordsched.api.transform import rewrite_pod
from koordsched.backends.sim.runner import simulate
from tests.scenario.helpers import WriteYaml
from tests.validation.manifests import device, dump, gpu_node, gpu_pod

DEEP = "[" * 50_000 + "]" * 50_000


def test_deep_json_is_a_decode_error() -> None:
    with pytest.raises(msgspec.DecodeError, match="nested too deeply"):
        decode_json(DEEP)
    # Skipping an unknown field recurses too.
    with pytest.raises(msgspec.DecodeError, match="nested too deeply"):
        decode_annotation('{"x": ' + DEEP + "}", DeviceHint)


def test_oversized_json_is_a_decode_error() -> None:
    big = '"' + "x" * MAX_ANNOTATION_BYTES + '"'
    with pytest.raises(msgspec.DecodeError, match="larger than the 262144 bytes"):
        decode_json(big)


def test_rewriting_a_deep_device_allocated_leaves_it_alone() -> None:
    value = '{"kubernetes.io/gpu": ' + DEEP + "}"
    pod = Pod()
    pod.metadata.annotations = {ANNOTATION_DEVICE_ALLOCATED: value}
    assert rewrite_pod(pod) is pod


def test_deep_hint_rejects_only_its_pod(write_yaml: WriteYaml) -> None:
    deep_hint = '{"gpu": {"unknownField": ' + "[" * 5000 + "]" * 5000 + "}}"
    path = write_yaml(
        dump(
            gpu_node(), device(), gpu_pod("deep", {ANNOTATION_DEVICE_ALLOCATE_HINT: deep_hint}), gpu_pod("ok")
        )
    )
    result = simulate([path])
    assert result.pod("default/ok").node == "gpu-0"
    deep = result.pod("default/deep")
    assert deep.status == "Unschedulable"
    assert "invalid DeviceAllocateHint annotation, err: JSON nested too deeply" in deep.message
