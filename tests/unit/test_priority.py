"""Koordinator priority and QoS classes (spec 1.1) and the per-resources memo behind the QoS class."""

from __future__ import annotations

from typing import Any

import pytest

from koordsched.api.core import Pod
from koordsched.api.priority import (
    K8S_BEST_EFFORT,
    K8S_BURSTABLE,
    K8S_GUARANTEED,
    PRIORITY_BATCH,
    PRIORITY_MID,
    PRIORITY_PROD,
    k8s_qos_class,
    priority_class_with_default,
    resources_key,
)
from tests.builders import container, make_pod


def pod(
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    *,
    name: str = "p",
    init: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    priority: int | None = None,
    overhead: dict[str, Any] | None = None,
) -> Pod:
    spec: dict[str, Any] = {}
    if init is not None:
        spec["initContainers"] = init
    if overhead is not None:
        spec["overhead"] = overhead
    return make_pod(
        name,
        namespace="",
        uid="",
        labels=labels,
        priority=priority,
        containers=[container("c", requests, limits=limits or {})],
        **spec,
    )


GUARANTEED = {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize(
    ("requests", "limits", "init", "expected"),
    [
        # Nothing asked anywhere.
        ({}, {}, None, K8S_BEST_EFFORT),
        # Zero amounts do not count as asking.
        ({"cpu": "0"}, {}, None, K8S_BEST_EFFORT),
        # A request without a limit.
        ({"cpu": "1"}, {}, None, K8S_BURSTABLE),
        # Equal requests and limits for cpu and memory.
        (GUARANTEED, GUARANTEED, None, K8S_GUARANTEED),
        # Limits only: requests default to them.
        ({}, GUARANTEED, None, K8S_GUARANTEED),
        # Equal values written differently compare exactly: 1 = 1000m, 1Gi = 1024Mi.
        ({"cpu": "1000m", "memory": "1024Mi"}, GUARANTEED, None, K8S_GUARANTEED),
        # A request below its limit.
        ({"cpu": "500m", "memory": "1Gi"}, GUARANTEED, None, K8S_BURSTABLE),
        # A cpu limit only: memory has no limit.
        ({"cpu": "1"}, {"cpu": "1"}, None, K8S_BURSTABLE),
        # Other resources do not count.
        ({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"}, None, K8S_BEST_EFFORT),
        # An init container without limits makes a guaranteed pod burstable.
        (GUARANTEED, GUARANTEED, [{"name": "i", "resources": {"requests": {"cpu": "1"}}}], K8S_BURSTABLE),
        # One with equal requests and limits keeps it guaranteed (sums are 2 cpu on both sides).
        (
            GUARANTEED,
            GUARANTEED,
            [{"name": "i", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
            K8S_GUARANTEED,
        ),
        # A malformed quantity is not Guaranteed.
        ({"cpu": "1x"}, {"cpu": "1x"}, None, K8S_BURSTABLE),
    ],
)
def test_k8s_qos_class(
    requests: dict[str, str], limits: dict[str, str], init: list[dict[str, Any]] | None, expected: str
) -> None:
    assert k8s_qos_class(pod(requests, limits, init=init)) == expected


def test_qos_memo_tells_resources_apart() -> None:
    """Pods are remembered by their resources as written: the same limits with other requests, or
    the same containers with another init container, get their own class."""
    assert k8s_qos_class(pod(GUARANTEED, GUARANTEED, name="a")) == K8S_GUARANTEED
    assert k8s_qos_class(pod({"cpu": "500m"}, GUARANTEED, name="b")) == K8S_BURSTABLE
    init = [{"name": "i", "resources": {"requests": {"cpu": "1"}}}]
    assert k8s_qos_class(pod(GUARANTEED, GUARANTEED, name="c", init=init)) == K8S_BURSTABLE
    assert k8s_qos_class(pod(GUARANTEED, GUARANTEED, name="d")) == K8S_GUARANTEED


def test_resources_key() -> None:
    same = resources_key(pod(GUARANTEED, name="a", labels={"x": "1"}, priority=9000))
    assert same == resources_key(pod(GUARANTEED, name="b"))
    assert hash(same) == hash(resources_key(pod(GUARANTEED, name="b")))
    assert same != resources_key(pod(GUARANTEED, GUARANTEED))
    assert same != resources_key(pod(GUARANTEED, overhead={"cpu": "250m"}))
    sidecar = [{"name": "i", "resources": {"requests": {"cpu": "1"}}, "restartPolicy": "Always"}]
    plain = [{"name": "i", "resources": {"requests": {"cpu": "1"}}}]
    assert resources_key(pod(GUARANTEED, init=sidecar)) != resources_key(pod(GUARANTEED, init=plain))


@pytest.mark.parametrize(
    ("labels", "priority", "resolved", "requests", "limits", "expected"),
    [
        # The label wins over everything.
        ({"koordinator.sh/priority-class": "koord-batch"}, 9500, 0, GUARANTEED, GUARANTEED, PRIORITY_BATCH),
        # An unknown label value is ignored: the spec's band decides.
        ({"koordinator.sh/priority-class": "gold"}, 7500, 0, {}, {}, PRIORITY_MID),
        # The resolved priority counts when the spec has none.
        ({}, None, 9100, {}, {}, PRIORITY_PROD),
        # Outside every band: the QoS class decides. Guaranteed -> LSR -> prod.
        ({}, 100, 0, GUARANTEED, GUARANTEED, PRIORITY_PROD),
        # Burstable -> LS -> prod; BestEffort -> BE -> batch.
        ({}, None, 0, {"cpu": "1"}, {}, PRIORITY_PROD),
        ({}, None, 0, {}, {}, PRIORITY_BATCH),
        # The QoS label overrides the Kubernetes class.
        ({"koordinator.sh/qosClass": "BE"}, None, 0, GUARANTEED, GUARANTEED, PRIORITY_BATCH),
        ({"koordinator.sh/qosClass": "LSE"}, None, 0, {}, {}, PRIORITY_PROD),
        # An unknown QoS label value is ignored.
        ({"koordinator.sh/qosClass": "gold"}, None, 0, {}, {}, PRIORITY_BATCH),
        ({"koordinator.sh/qosClass": "SYSTEM"}, None, 0, {}, {}, PRIORITY_PROD),
    ],
)
def test_priority_class_with_default(
    labels: dict[str, str],
    priority: int | None,
    resolved: int,
    requests: dict[str, str],
    limits: dict[str, str],
    expected: str,
) -> None:
    p = pod(requests, limits, labels=labels, priority=priority)
    assert priority_class_with_default(p, resolved) == expected
