"""Reflector events into the scheduler's ``on_*`` handlers, timed per event label.

Every pod in the cluster is delivered: bound pods count on their node whoever scheduled
them, and the scheduler itself decides which pending pods are its own (by schedulerName).
``scheduler_event_handling_duration_seconds`` is labelled as kube-scheduler labels its
events (``AssignedPodAdd``, ``UnscheduledPodUpdate``, ``NodeDelete``...).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from koordsched.api.core import Node, Pod, PriorityClass
from koordsched.backends.kube.client import KubeClient
from koordsched.backends.kube.kinds import (
    NODES,
    PODS,
    PRIORITY_CLASSES,
    KubeObject,
    ResourceKind,
    plugin_kinds,
)
from koordsched.backends.kube.reflector import Reflector
from koordsched.observability.metrics import EventHandlingMetrics
from koordsched.plugins.registry import in_tree_registry
from koordsched.scheduler.scheduler import Scheduler

#: The kinds the in-tree plugins read; a run with another registry passes its own
#: (:func:`~koordsched.backends.kube.kinds.plugin_kinds`).
PLUGIN_KINDS: tuple[ResourceKind[Any], ...] = plugin_kinds(in_tree_registry())
#: Those of them that are Koordinator's CRDs (optional: a cluster may lack them).
CRD_KINDS: tuple[ResourceKind[Any], ...] = tuple(k for k in PLUGIN_KINDS if k.optional)


def _assigned(pod: Pod) -> str:
    return "AssignedPod" if pod.spec.node_name else "UnscheduledPod"


class _Timed:
    def __init__(self, metrics: EventHandlingMetrics) -> None:
        self._metrics = metrics

    def _timed(self, label: str, fn: Callable[[], object]) -> None:
        t0 = time.perf_counter()
        try:
            fn()
        finally:
            self._metrics.observe_event_handling(label, time.perf_counter() - t0)


class PodHandler(_Timed):
    def __init__(self, scheduler: Scheduler, metrics: EventHandlingMetrics) -> None:
        super().__init__(metrics)
        self._s = scheduler

    def on_add(self, pod: Pod) -> None:
        self._timed(_assigned(pod) + "Add", lambda: self._s.on_pod_add(pod))

    def on_update(self, old: Pod, new: Pod) -> None:
        self._timed(_assigned(new) + "Update", lambda: self._s.on_pod_update(old, new))

    def on_delete(self, pod: Pod) -> None:
        self._timed(_assigned(pod) + "Delete", lambda: self._s.on_pod_delete(pod))


class NodeHandler(_Timed):
    def __init__(self, scheduler: Scheduler, metrics: EventHandlingMetrics) -> None:
        super().__init__(metrics)
        self._s = scheduler

    def on_add(self, node: Node) -> None:
        self._timed("NodeAdd", lambda: self._s.on_node_add(node))

    def on_update(self, old: Node, new: Node) -> None:
        self._timed("NodeUpdate", lambda: self._s.on_node_update(old, new))

    def on_delete(self, node: Node) -> None:
        self._timed("NodeDelete", lambda: self._s.on_node_delete(node.metadata.name))


class PriorityClassHandler(_Timed):
    def __init__(self, scheduler: Scheduler, metrics: EventHandlingMetrics) -> None:
        super().__init__(metrics)
        self._s = scheduler

    def on_add(self, pc: PriorityClass) -> None:
        self._timed("PriorityClassAdd", lambda: self._s.on_priority_class(pc))

    def on_update(self, old: PriorityClass, new: PriorityClass) -> None:
        self._timed("PriorityClassUpdate", lambda: self._s.on_priority_class(new))

    def on_delete(self, pc: PriorityClass) -> None:
        self._timed("PriorityClassDelete", lambda: self._s.on_priority_class(pc, deleted=True))


class ObjectHandler(_Timed):
    """Any other kind plugins read (CRDs, Namespaces, Services ...): kept by key in ``Scheduler.objects``."""

    def __init__(self, scheduler: Scheduler, metrics: EventHandlingMetrics, kind: ResourceKind[Any]) -> None:
        super().__init__(metrics)
        self._s = scheduler
        self._kind = kind

    def on_add(self, obj: KubeObject) -> None:
        k = self._kind
        self._timed(f"{k.kind}Add", lambda: self._s.on_object(k.kind, k.key(obj), obj))

    def on_update(self, old: KubeObject, new: KubeObject) -> None:
        k = self._kind
        self._timed(f"{k.kind}Update", lambda: self._s.on_object(k.kind, k.key(new), new))

    def on_delete(self, obj: KubeObject) -> None:
        k = self._kind
        self._timed(f"{k.kind}Delete", lambda: self._s.on_object(k.kind, k.key(obj), None))


def reflectors_for(
    client: KubeClient,
    scheduler: Scheduler,
    metrics: EventHandlingMetrics,
    extra_kinds: tuple[ResourceKind[Any], ...] = (),
    kinds: tuple[ResourceKind[Any], ...] = PLUGIN_KINDS,
    **reflector_options: Any,
) -> tuple[list[Reflector[Any]], Reflector[Pod]]:
    """The reflectors feeding ``scheduler``: (everything pods depend on, the pod reflector).

    Start the first group and wait for it to sync before starting pods, so that bound pods
    land on known nodes and pending pods see their priority classes, devices, NUMA zones,
    node metrics, namespaces and workloads.
    ``kinds`` are the plugins' (:func:`~koordsched.backends.kube.kinds.plugin_kinds`): an
    ``optional`` one (a CRD) may be missing on the server or not granted by RBAC (synced and
    empty until it is); any other, like ``extra_kinds``, must be served and readable, or the
    cache does not sync (its list failures are logged at warning level and retried).
    """
    first: list[Reflector[Any]] = [
        Reflector(client, PRIORITY_CLASSES, PriorityClassHandler(scheduler, metrics), **reflector_options),
        Reflector(client, NODES, NodeHandler(scheduler, metrics), **reflector_options),
    ]
    first.extend(
        Reflector(client, k, ObjectHandler(scheduler, metrics, k), **reflector_options) for k in extra_kinds
    )
    first.extend(
        Reflector(client, k, ObjectHandler(scheduler, metrics, k), optional=k.optional, **reflector_options)
        for k in kinds
    )
    pods = Reflector(client, PODS, PodHandler(scheduler, metrics), **reflector_options)
    return first, pods
