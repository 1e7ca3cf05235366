"""Pod requests as resource.PodRequests computes them, and resource-name classification."""

from __future__ import annotations

from typing import Any

import pytest

from koordsched.api.core import Pod, Quantity
from koordsched.api.quantity import QuantityError
from koordsched.api.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    is_extended_resource_name,
    is_native_resource,
    is_prefixed_native_resource,
    is_scalar_resource_name,
    pod_requests,
    resource_list,
    to_canonical,
)
from tests import builders

MI = 1024**2
GI = 1024**3


def make_pod(spec: dict[str, Any]) -> Pod:
    return builders.make_pod("p", uid="", **spec)


def container(name: str, requests: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "busybox", **extra}
    if requests is not None:
        c.setdefault("resources", {})["requests"] = requests
    return c


def sidecar(name: str, requests: dict[str, Any]) -> dict[str, Any]:
    return container(name, requests, restartPolicy="Always")


def test_constants() -> None:
    assert (CPU, MEMORY, EPHEMERAL_STORAGE, PODS) == ("cpu", "memory", "ephemeral-storage", "pods")


@pytest.mark.parametrize(
    ("name", "q", "want"),
    [
        ("cpu", "100m", 100),
        ("cpu", "0.1m", 1),
        ("cpu", 2, 2000),
        ("cpu", 0.5, 500),
        ("cpu", "1.5", 1500),
        ("memory", "1Gi", GI),
        ("memory", "100m", 1),
        ("memory", "1.5", 2),
        ("memory", 1024, 1024),
        ("ephemeral-storage", "1e3", 1000),
        ("nvidia.com/gpu", "1", 1),
        ("kubernetes.io/batch-cpu", "1000", 1000),
        ("pods", 110, 110),
    ],
)
def test_to_canonical(name: str, q: Quantity, want: int) -> None:
    assert to_canonical(name, q) == want


def test_resource_list_keeps_zeros_and_converts() -> None:
    got = resource_list({"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": 0, "pods": "110"})
    assert got == {"cpu": 64_000, "memory": 256 * GI, "nvidia.com/gpu": 0, "pods": 110}


def test_resource_list_error_names_resource_and_string() -> None:
    with pytest.raises(QuantityError, match=r"resource 'memory'.*'10KB'"):
        resource_list({"cpu": "1", "memory": "10KB"})


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        pytest.param({"containers": [container("a")]}, {}, id="no-requests"),
        pytest.param({"containers": []}, {}, id="no-containers"),
        pytest.param(
            {"containers": [container("a", {"cpu": "100m", "memory": "128Mi"})]},
            {"cpu": 100, "memory": 128 * MI},
            id="single",
        ),
        pytest.param(
            {
                "containers": [
                    container("a", {"cpu": "100m", "memory": "128Mi"}),
                    container("b", {"cpu": "1.5", "nvidia.com/gpu": 1}),
                ]
            },
            {"cpu": 1600, "memory": 128 * MI, "nvidia.com/gpu": 1},
            id="sum-of-containers",
        ),
        pytest.param(
            {"containers": [container("a", {"cpu": "0", "memory": "1Gi"})]},
            {"memory": GI},
            id="zero-dropped",
        ),
        pytest.param(
            {"containers": [container("a", {"cpu": "0.1m"})]},
            {"cpu": 1},
            id="cpu-rounds-up",
        ),
        pytest.param(
            {
                "containers": [container("a", {"cpu": "1", "memory": "1Gi"})],
                "initContainers": [container("init", {"cpu": "2", "memory": "512Mi"})],
            },
            {"cpu": 2000, "memory": GI},
            id="init-max-per-resource",
        ),
        pytest.param(
            {
                "containers": [container("a", {"cpu": "1"})],
                "initContainers": [
                    container("i1", {"cpu": "3"}),
                    container("i2", {"cpu": "2", "ephemeral-storage": "1Gi"}),
                ],
            },
            {"cpu": 3000, "ephemeral-storage": GI},
            id="init-containers-do-not-add",
        ),
        pytest.param(
            {
                "containers": [container("a", {"cpu": "1", "memory": "1Gi"})],
                "initContainers": [sidecar("proxy", {"cpu": "500m", "memory": "256Mi"})],
            },
            {"cpu": 1500, "memory": GI + 256 * MI},
            id="sidecar-adds",
        ),
        pytest.param(
            {
                "containers": [container("a", {"cpu": "1"})],
                "initContainers": [
                    sidecar("s1", {"cpu": "500m"}),
                    container("migrate", {"cpu": "2"}),
                    sidecar("s2", {"cpu": "300m"}),
                ],
            },
            # steady state: 1 + 0.5 + 0.3 = 1.8; migrate step: 2 + 0.5 (only s1 before it) = 2.5.
            {"cpu": 2500},
            id="init-step-counts-earlier-sidecars-only",
        ),
        pytest.param(
            {
                "containers": [container("a", {"cpu": "3"})],
                "initContainers": [
                    sidecar("s1", {"cpu": "500m"}),
                    container("migrate", {"cpu": "2"}),
                ],
            },
            {"cpu": 3500},
            id="steady-state-wins",
        ),
        pytest.param(
            {
                "containers": [container("a", {"cpu": "1"})],
                "initContainers": [
                    container("first", {"cpu": "2"}),
                    sidecar("s1", {"cpu": "1500m"}),
                ],
            },
            # first runs before any sidecar: 2; steady: 2.5.
            {"cpu": 2500},
            id="init-before-sidecar",
        ),
        pytest.param(
            {
                "containers": [container("a", {"cpu": "1"})],
                "initContainers": [container("not-sidecar", {"cpu": "1"}, restartPolicy="OnFailure")],
            },
            {"cpu": 1000},
            id="non-always-restart-policy-is-not-sidecar",
        ),
        pytest.param(
            {
                "containers": [container("a", {"cpu": "1", "memory": "1Gi"})],
                "overhead": {"cpu": "250m", "memory": "120Mi"},
            },
            {"cpu": 1250, "memory": GI + 120 * MI},
            id="overhead",
        ),
        pytest.param(
            {
                "containers": [container("a", {"cpu": "1"})],
                "initContainers": [container("i", {"cpu": "4"})],
                "overhead": {"cpu": "250m"},
            },
            {"cpu": 4250},
            id="overhead-added-after-init-max",
        ),
        pytest.param(
            {"containers": [{"name": "a", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]},
            {"cpu": 2000, "memory": GI},
            id="limits-only-defaults-requests",
        ),
        pytest.param(
            {
                "containers": [
                    {
                        "name": "a",
                        "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "2", "memory": "1Gi"}},
                    }
                ]
            },
            {"cpu": 500, "memory": GI},
            id="request-wins-over-limit-per-resource",
        ),
        pytest.param(
            {
                "containers": [container("a", {"cpu": "1"})],
                "initContainers": [{"name": "i", "resources": {"limits": {"cpu": "3"}}}],
            },
            {"cpu": 3000},
            id="limits-only-init-container",
        ),
    ],
)
def test_pod_requests(spec: dict[str, Any], want: dict[str, int]) -> None:
    assert pod_requests(make_pod(spec)) == want


def test_pod_requests_from_yaml_numbers() -> None:
    pod = make_pod({"containers": [container("a", {"cpu": 64, "memory": 1073741824})]})
    assert pod_requests(pod) == {"cpu": 64_000, "memory": GI}


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        ({"containers": [container("app", {"cpu": "abc"})]}, r"container 'app'.*resource 'cpu'.*'abc'"),
        (
            {"containers": [], "initContainers": [container("init", {"memory": "1 Gi"})]},
            r"container 'init'.*resource 'memory'",
        ),
        ({"containers": [], "overhead": {"cpu": "1.5.5"}}, r"overhead.*resource 'cpu'.*'1.5.5'"),
    ],
)
def test_pod_requests_errors_name_the_culprit(spec: dict[str, Any], pattern: str) -> None:
    with pytest.raises(QuantityError, match=pattern):
        pod_requests(make_pod(spec))


@pytest.mark.parametrize(
    ("name", "native", "prefixed", "extended", "scalar"),
    [
        ("cpu", True, False, False, False),
        ("memory", True, False, False, False),
        ("pods", True, False, False, False),
        ("ephemeral-storage", True, False, False, False),
        ("hugepages-2Mi", True, False, False, True),
        ("attachable-volumes-aws-ebs", True, False, False, True),
        ("kubernetes.io/batch-cpu", True, True, False, True),
        ("kubernetes.io/batch-memory", True, True, False, True),
        ("node.kubernetes.io/foo", True, True, False, True),
        ("nvidia.com/gpu", False, False, True, True),
        ("koordinator.sh/gpu-core", False, False, True, True),
        ("example.com/a_b.c", False, False, True, True),
        ("requests.example.com/foo", False, False, False, False),
        ("Example.com/foo", False, False, False, False),
        ("example.com/", False, False, False, False),
        ("example.com/-bad", False, False, False, False),
        ("a/b/c", False, False, False, False),
        ("example.com/" + "x" * 64, False, False, False, False),
    ],
)
def test_resource_name_classes(name: str, native: bool, prefixed: bool, extended: bool, scalar: bool) -> None:
    assert is_native_resource(name) is native
    assert is_prefixed_native_resource(name) is prefixed
    assert is_extended_resource_name(name) is extended
    assert is_scalar_resource_name(name) is scalar
