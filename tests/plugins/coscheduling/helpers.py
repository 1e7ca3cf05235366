"""Builders for Coscheduling's tests: gang pods, PodGroups, a plugin over a FakeHandle."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from koordsched.api.core import Pod
from koordsched.api.podgroup import PodGroup
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import Code
from koordsched.framework.types import PodInfo
from koordsched.framework.waiting_pods import WaitingPodImpl
from koordsched.plugins.coscheduling import Coscheduling, CoschedulingArgs
from tests.fakes import FakeHandle

GANG = "gang.scheduling.koordinator.sh/"


def gang_pod(
    name: str,
    *,
    gang: str = "g",
    min_available: str | None = "3",
    namespace: str = "default",
    node_name: str = "",
    labels: Mapping[str, str] | None = None,
    **annotations: str,
) -> Pod:
    """A pod of an annotation gang; ``annotations`` are gang keys without the prefix, ``_`` for ``-``."""
    notes = {GANG + k.replace("_", "-"): v for k, v in annotations.items()}
    if gang:
        notes[GANG + "name"] = gang
    if min_available is not None:
        notes[GANG + "min-available"] = min_available
    body: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "annotations": notes,
            "labels": dict(labels or {}),
        },
        "spec": {"schedulerName": "koord-scheduler", "containers": []},
    }
    if node_name:
        body["spec"]["nodeName"] = node_name
    return msgspec.convert(body, Pod)


def pod_group(
    name: str,
    min_member: int,
    *,
    namespace: str = "default",
    timeout: int | None = None,
    **annotations: str,
) -> PodGroup:
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "annotations": {GANG + k.replace("_", "-"): v for k, v in annotations.items()},
            },
            "spec": spec,
        },
        PodGroup,
    )


def make(args: CoschedulingArgs | None = None) -> tuple[Coscheduling, FakeHandle]:
    handle = FakeHandle()
    return Coscheduling(args, handle), handle


def add(plugin: Coscheduling, *pods: Pod) -> list[PodInfo]:
    infos = []
    for p in pods:
        plugin.on_pod_event(None, p, None)
        infos.append(PodInfo(p, {}))
    return infos


def hold(plugin: Coscheduling, handle: FakeHandle, pod: PodInfo, node: str = "n1") -> Code:
    """PreFilter then Permit, as a cycle that found ``node``; a Wait is registered as the runtime does."""
    state = CycleState()
    _, status = plugin.pre_filter(state, pod)
    assert status.ok, status
    status, timeout = plugin.permit(state, pod, node)
    if status.code is Code.WAIT:
        t = handle.clock.now()
        handle.waiting.add(WaitingPodImpl(pod, node, {plugin.name: t + timeout}, {plugin.name: timeout}))
    return status.code
