"""A scheduler over upstream's default plugin set, and a port that records what preemption does."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from koordsched.api.core import Node, Pod
from koordsched.api.kinds import POD_DISRUPTION_BUDGETS
from koordsched.api.policy import PodDisruptionBudget
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import default_config, load_config
from koordsched.framework.registry import Registry
from koordsched.framework.types import BindingPlan
from koordsched.observability.metrics import MetricsSink
from koordsched.plugins.defaultpreemption import DefaultPreemption
from koordsched.plugins.registry import in_tree_registry
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.scheduler import Scheduler

#: The virtual wall clock's start: pods without a start time count as started now.
NOW = "2026-06-01T00:00:00Z"


def running(
    name: str,
    node: str,
    cpu: str = "1",
    priority: int = 0,
    *,
    labels: dict[str, str] | None = None,
    started: str | None = "2026-01-01T00:00:00Z",
    namespace: str = "default",
    terminating: bool = False,
    annotations: dict[str, str] | None = None,
) -> Pod:
    """A bound pod asking ``cpu``."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "labels": labels or {},
        "annotations": annotations or {},
    }
    if terminating:
        meta["deletionTimestamp"] = "2026-05-01T00:00:00Z"
    body: dict[str, Any] = {
        "metadata": meta,
        "spec": {
            "schedulerName": "koord-scheduler",
            "nodeName": node,
            "priority": priority,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": "Running"},
    }
    if started:
        body["status"]["startTime"] = started
    return msgspec.convert(body, Pod)


def pending(name: str, cpu: str = "1", priority: int = 100, **spec: Any) -> Pod:
    status = spec.pop("status", None)
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": "koord-scheduler",
            "priority": priority,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
            **spec,
        },
    }
    if status:
        body["status"] = status
    return msgspec.convert(body, Pod)


def pdb(
    name: str, labels: dict[str, str], allowed: int, *, disrupted: Iterable[str] = ()
) -> PodDisruptionBudget:
    return msgspec.convert(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed, "disruptedPods": dict.fromkeys(disrupted, NOW)},
        },
        PodDisruptionBudget,
    )


@dataclass
class Recorder:
    """An output port that records preemptions and nominations (nothing is deleted)."""

    preempted: list[tuple[str, str, list[str]]] = field(default_factory=list)
    nominated: dict[str, str] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    #: victim name -> its DisruptionTarget message ("" for kube-scheduler's own).
    conditions: dict[str, str] = field(default_factory=dict)

    async def bind(self, pod: Pod, node_name: str, plan: BindingPlan) -> None:
        raise AssertionError("no bind expected")

    def scheduled(self, pod: Pod, node_name: str) -> None: ...

    def unschedulable(self, pod: Pod, reason: str, message: str) -> None:
        self.failures[pod.metadata.name] = message

    def invalid_pod(self, pod: Pod, message: str) -> None:
        self.failures[pod.metadata.name] = message

    def preempt(self, preemptor: Pod, node_name: str, victims: list[Pod], *, message: str = "") -> None:
        self.preempted.append((preemptor.metadata.name, node_name, sorted(v.metadata.name for v in victims)))
        self.conditions.update((v.metadata.name, message) for v in victims)

    def nominate(self, pod: Pod, node_name: str) -> None:
        self.nominated[pod.metadata.name] = node_name


def world(
    nodes: Iterable[Node],
    pods: Iterable[Pod],
    pdbs: Iterable[PodDisruptionBudget] = (),
    metrics: MetricsSink | None = None,
    *,
    bundled: bool = False,
    profile: bytes | None = None,
    registry: Registry | None = None,
    objects: Iterable[tuple[str, str, Any]] = (),
) -> tuple[Scheduler, Recorder]:
    """A scheduler on upstream's default plugin set, with ``bundled`` on our default profile, or on
    the configuration file ``profile`` holds; ``objects`` (kind, key, object) are added before
    the pods."""
    reg = registry if registry is not None else in_tree_registry()
    port = Recorder()
    clock = VirtualClock(wall_start=_unix(NOW))
    if profile is not None:
        config = load_config(profile, reg)
    else:
        config = (
            load_config(default_profile_path(), reg) if bundled else default_config(reg, "koord-scheduler")
        )
    sched = Scheduler(config, reg, port, clock, metrics=metrics)
    for n in nodes:
        sched.on_node_add(n)
    for b in pdbs:
        sched.on_object(POD_DISRUPTION_BUDGETS.kind, f"{b.metadata.namespace}/{b.metadata.name}", b)
    for kind, key, obj in objects:
        sched.on_object(kind, key, obj)
    for p in pods:
        sched.on_pod_add(p)
    return sched, port


def plugin(sched: Scheduler) -> DefaultPreemption:
    found = sched.frameworks["koord-scheduler"].plugins["DefaultPreemption"]
    assert isinstance(found, DefaultPreemption)
    return found


def attempt(sched: Scheduler, pod: Pod) -> None:
    """One scheduling cycle for ``pod`` (added pending); it is expected not to fit."""
    sched.on_pod_add(pod)
    info = sched.queue.pop()
    assert info is not None and info.pod.metadata.name == pod.metadata.name
    assert sched.schedule_one(info) is None


def _unix(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()
