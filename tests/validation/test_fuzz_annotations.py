"""Property: whatever a pod's Koordinator annotations say, PreFilter's readers either accept
them, or refuse the pod with a Status naming the annotation (and, for an unknown enum value,
the field and the value); they never raise and never take long."""

from __future__ import annotations

import json
import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordsched.api.field_errors import go_quote
from koordsched.api.koordinator import (
    ANNOTATION_DEVICE_ALLOCATE_HINT,
    ANNOTATION_DEVICE_JOINT_ALLOCATE,
    ANNOTATION_GPU_PARTITION_SPEC,
    ANNOTATION_NUMA_TOPOLOGY_SPEC,
    ANNOTATION_RESOURCE_SPEC,
)
from koordsched.framework.status import Code, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare.requests import pod_device_request
from koordsched.plugins.nodenumaresource.prefilter import pod_request
from tests import builders
from tests.validation.strategies import DOCS, annotation_texts, bad_enums

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def pod_info(annotations: dict[str, str], gpu: bool) -> PodInfo:
    requests = {"cpu": "2", "memory": "1Gi"}
    if gpu:
        requests["nvidia.com/gpu"] = "1"
    pod = builders.make_pod(
        "p", requests, uid="", annotations=annotations, labels={"koordinator.sh/qosClass": "LSR"}
    )
    return builders.pod_info(pod)


@st.composite
def annotation_sets(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, Any]]:
    """Annotations as text, and the documents among them that were written as well-formed JSON."""
    keys = draw(st.lists(st.sampled_from(sorted(DOCS)), min_size=1, max_size=3, unique=True))
    texts: dict[str, str] = {}
    docs: dict[str, Any] = {}
    for key in keys:
        if draw(st.booleans()):
            doc = draw(DOCS[key])
            docs[key] = doc
            texts[key] = json.dumps(doc)
        else:
            texts[key] = draw(annotation_texts(DOCS[key]))
    return texts, docs


def _check(status: Status, docs: dict[str, Any], keys: tuple[str, ...]) -> None:
    message = status.message()
    assert status.code in (Code.ERROR, Code.UNSCHEDULABLE_AND_UNRESOLVABLE), status
    assert message
    # An unknown enum value in a well-formed annotation that the reader looks at first is named.
    for key in keys:
        if key in docs and bad_enums(docs[key]) and f"invalid {key} annotation" in message:
            field, value = bad_enums(docs[key])[0]
            assert f"{field}: Unsupported value: {go_quote(value)}" in message, message


@FUZZ
@given(data=annotation_sets())
def test_device_annotations_are_accepted_or_refuse_their_pod(
    data: tuple[dict[str, str], dict[str, Any]],
) -> None:
    texts, docs = data
    t0 = time.perf_counter()
    result = pod_device_request(pod_info(texts, gpu=True))
    assert time.perf_counter() - t0 < 0.5
    device_keys = (
        ANNOTATION_DEVICE_ALLOCATE_HINT,
        ANNOTATION_DEVICE_JOINT_ALLOCATE,
        ANNOTATION_GPU_PARTITION_SPEC,
    )
    if isinstance(result, Status):
        _check(result, docs, device_keys)
        return
    # Accepted: nothing it read had an unknown value.
    for key in device_keys:
        if key in docs:
            assert not bad_enums(docs[key]), (key, docs[key])


@FUZZ
@given(data=annotation_sets())
def test_numa_annotations_are_accepted_or_refuse_their_pod(
    data: tuple[dict[str, str], dict[str, Any]],
) -> None:
    texts, docs = data
    t0 = time.perf_counter()
    result = pod_request(pod_info(texts, gpu=False), "FullPCPUs")
    assert time.perf_counter() - t0 < 0.5
    numa_keys = (ANNOTATION_RESOURCE_SPEC, ANNOTATION_NUMA_TOPOLOGY_SPEC)
    if isinstance(result, Status):
        _check(result, docs, numa_keys)
        return
    for key in numa_keys:
        if key == ANNOTATION_RESOURCE_SPEC and key in docs:
            # Issue 24, item 8: read as koord-scheduler reads it (no policy); each unknown value is
            # a note the pod is warned of, naming the field and the value.
            bad = sorted(bad_enums(docs[key]))
            named = sorted((n.split(": ")[1], n) for n in result.notes)
            assert [b[0] for b in bad] == [n[0] for n in named], (result.notes, bad)
            assert all(key in note and "Unsupported value: " in note for _, note in named)
        elif key in docs:
            assert not bad_enums(docs[key]), (key, docs[key])
        if key in texts:
            assert texts[key] != "", "an empty annotation is unreadable, as in Koordinator"
