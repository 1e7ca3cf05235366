"""The pods and nodes e2e tests create: built by tests/builders.py, with the e2e label."""

from __future__ import annotations

from typing import Any

from tests.builders import container, node_manifest, pod_manifest

SCHEDULER_NAME = "koord-scheduler"
#: The label every e2e object carries.
E2E_LABELS = {"koordsched.io/e2e": "true"}
PAUSE_IMAGE = "registry.k8s.io/pause:3.2"


def node(name: str, cpu: str = "4", memory: str = "16Gi", pods: str = "110", **extra: str) -> dict[str, Any]:
    """An e2e node: ``extra`` are more allocatable (and capacity) resources."""
    return node_manifest(name, cpu, memory, pods, labels=E2E_LABELS, **extra)


def pod(
    namespace: str,
    name: str,
    *,
    cpu: str = "1",
    memory: str = "1Gi",
    scheduler: str = SCHEDULER_NAME,
    node_name: str | None = None,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """An e2e pod: a pause container ``main`` asking ``requests`` (default: ``cpu`` and
    ``memory``), no grace period; ``spec`` holds more camelCase spec fields."""
    asked = dict(requests) if requests is not None else {"cpu": cpu, "memory": memory}
    return pod_manifest(
        name,
        namespace=namespace,
        uid="",
        scheduler=scheduler,
        node_name=node_name or "",
        labels={**E2E_LABELS, **(labels or {})},
        annotations=annotations,
        containers=[container("main", asked, limits=limits, image=PAUSE_IMAGE)],
        terminationGracePeriodSeconds=0,
        **spec,
    )
