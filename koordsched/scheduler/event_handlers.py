"""Watch events into the cache and the queue (kube-scheduler's ``eventhandlers.go``).

Backends call these with decoded objects: the kube backend from its reflectors, the
simulator from its manifests and its confirmations of binds. Objects are rewritten on the
way in, as koord-scheduler's informer transformers do, so plugins only ever see current
resource names (:mod:`koordsched.api.transform`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import msgspec

from koordsched.api.core import Node, Pod, PodStatus, PriorityClass
from koordsched.api.field_errors import Refused
from koordsched.api.kinds import ObjectKind, PodStandIn
from koordsched.api.transform import rewrite_node, rewrite_pod
from koordsched.api.validation import check_node, check_pending_pod, check_priority_class
from koordsched.framework.interface import PodEventsPlugin
from koordsched.framework.objects import ObjectStore
from koordsched.framework.runtime import Framework
from koordsched.framework.types import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    ASSIGNED_POD_UPDATE,
    NODE_ADD,
    NODE_DELETE,
    NODE_UPDATE,
    ActionType,
    ClusterEvent,
    PodInfo,
)
from koordsched.framework.waiting_pods import WaitingPods
from koordsched.scheduler.cache import Cache
from koordsched.scheduler.holds import PreEnqueueHolds
from koordsched.scheduler.nominator import Nominator
from koordsched.scheduler.podinfo import InvalidPodError, PriorityClasses, RequestsMemo, new_pod_info
from koordsched.scheduler.ports import OutputPort
from koordsched.scheduler.queue import SchedulingQueue

log = logging.getLogger(__name__)


class EventHandlers:
    """The ``on_*`` handlers: the scheduler owns one, built with the parts the events feed."""

    def __init__(
        self,
        *,
        frameworks: Mapping[str, Framework],
        cache: Cache,
        queue: SchedulingQueue,
        nominator: Nominator,
        port: OutputPort,
        waiting_pods: WaitingPods,
        holds: PreEnqueueHolds,
        priorities: PriorityClasses,
        requests_memo: RequestsMemo,
        objects: dict[str, dict[str, Any]],
        kinds: Mapping[str, ObjectKind[Any]],
    ) -> None:
        self._frameworks = frameworks
        self._cache = cache
        self._queue = queue
        #: Pending pods nominated to a node by a preemption.
        self._nominator = nominator
        self._port = port
        self._waiting_pods = waiting_pods
        self._holds = holds
        self._priorities = priorities
        #: Requests parsed once per (shared) pod spec.
        self._requests_memo = requests_memo
        #: Watched objects by kind (CRDs), read by plugins through the handle.
        self._objects = objects
        #: The kinds the profiles' plugins declared (``PluginSpec.kinds``), by name.
        self._kinds = kinds
        #: (kind, key) -> why the object is set aside (``ObjectKind.drop_refused``); logged once
        #: per reason.
        self.set_aside: dict[tuple[str, str], str] = {}
        #: Plugins that follow pods themselves (``PodEventsPlugin``: Coscheduling, ElasticQuota),
        #: told of every pod change before the cache and the queue.
        self.pod_plugins: list[PodEventsPlugin] = [
            p for fw in frameworks.values() for p in fw.plugins.values() if isinstance(p, PodEventsPlugin)
        ]

    def responsible_for(self, pod: Pod) -> bool:
        return pod.spec.scheduler_name in self._frameworks

    def _pod_info(self, pod: Pod) -> PodInfo | None:
        try:
            try:
                # What the API server would have refused (an unknown toleration operator, a
                # hostPort out of range) is refused here, once per version of the pod.
                check_pending_pod(pod)
            except Refused as refused:
                raise InvalidPodError(str(refused)) from None
            return new_pod_info(pod, self._priorities, self._requests_memo)
        except InvalidPodError as err:
            if not pod.spec.node_name and self.responsible_for(pod):
                self._port.invalid_pod(pod, str(err))
            log.warning("pod %s/%s: %s", pod.metadata.namespace, pod.metadata.name, err)
            return None

    def _event(self, event: ClusterEvent, old: Any = None, new: Any = None) -> None:
        self._queue.on_cluster_event(event, old, new)

    def _tell(self, old: Pod | None, new: Pod | None, info: PodInfo | None) -> None:
        for plugin in self.pod_plugins:
            try:
                plugin.on_pod_event(old, new, info)
            except Exception:  # a plugin bug loses its own index entry, never the event
                log.exception("plugin %s failed on a pod event", plugin.name)

    def on_pod_add(self, pod: Pod) -> None:
        pod = rewrite_pod(pod)
        if (pod.metadata.deletion_timestamp and not pod.spec.node_name) or pod.status.phase in (
            "Succeeded",
            "Failed",
        ):
            if self.pod_plugins:
                self._tell(None, pod, None)
            return
        info = self._pod_info(pod)
        followed = info is not None and (bool(pod.spec.node_name) or self.responsible_for(pod))
        if self.pod_plugins:
            self._tell(None, pod, info if followed else None)
        if info is None:
            return
        if pod.spec.node_name:
            self._queue.delete(info.uid)
            self._nominator.delete(info.uid)
            self._cache.add_pod(info, pod.spec.node_name)
            self._event(ASSIGNED_POD_ADD, None, pod)
        elif followed:
            self._queue.add(info)
            if pod.status.nominated_node_name:
                self._nominator.add(info, pod.status.nominated_node_name)

    def on_pod_update(self, old: Pod | None, pod: Pod) -> None:
        pod = rewrite_pod(pod)
        old = rewrite_pod(old) if old is not None else None
        if pod.status.phase in ("Succeeded", "Failed"):
            if self.pod_plugins:
                self._tell(old, pod, None)
            # A finished pod frees its resources, as a deletion would.
            self.on_pod_delete(pod)
            return
        if pod.spec.node_name:
            known = self._cache.pod_state(pod.identity)
            info: PodInfo | None
            if known is not None and _same_resources(known.pod.pod, pod):
                # The usual case: our own bind confirmed. Nothing to parse again.
                info = PodInfo(pod, known.pod.requests, known.pod.priority)
                info.keep_extra(known.pod)
            else:
                info = self._pod_info(pod)
            if self.pod_plugins:
                self._tell(old, pod, info)
            if info is None:
                return
            self._queue.delete(info.uid)
            self._nominator.delete(info.uid)
            self._cache.update_pod(info, pod.spec.node_name)
            self._event(ASSIGNED_POD_ADD if known is None or known.assumed else ASSIGNED_POD_UPDATE, old, pod)
        elif self.responsible_for(pod):
            if old is not None and status_only_update(old, pod):
                if self.pod_plugins:
                    self._tell(old, pod, None)
                # e.g. our own PodScheduled patch: keep the newest object, do not wake the pod
                # (kube-scheduler's isPodUpdated ignores status, resourceVersion and generation).
                queued = self._queue.get(pod.identity)
                if queued is not None:
                    queued.pod = pod
                    self._nominator.update(old, queued)
                return
            info = self._pod_info(pod)
            if self.pod_plugins:
                self._tell(old, pod, info)
            if info is not None:
                self._queue.update(info)
                self._nominator.update(old, info)
        elif self.pod_plugins:
            self._tell(old, pod, None)

    def on_pod_delete(self, pod: Pod) -> None:
        if self.pod_plugins:
            self._tell(pod, None, None)
        uid = pod.identity
        self._holds.forget(uid)
        wp = self._waiting_pods.get(uid)
        if wp is not None:
            wp.reject("", "pod was deleted while waiting at Permit")
        self._queue.delete(uid)
        self._nominator.delete(uid)
        if self._cache.remove_pod(uid) is not None:
            self._event(ASSIGNED_POD_DELETE, pod, None)

    def _refused_node(self, node: Node) -> bool:
        """A node the API server would refuse is left out, like one whose allocatable cannot be read."""
        try:
            check_node(node)
        except Refused as err:
            name = node.metadata.name
            log.error("node %s: %s; node left out of scheduling", name, err)
            if self._cache.node(name) is not None:
                self._cache.remove_node(name)
            self._cache.bad_nodes[name] = f"node {name}: {err}"
            return True
        return False

    def on_node_add(self, node: Node) -> None:
        node = rewrite_node(node)
        if self._refused_node(node):
            return
        self._cache.add_node(node)
        self._event(NODE_ADD, None, node)

    def on_node_update(self, old: Node | None, node: Node) -> None:
        node = rewrite_node(node)
        if self._refused_node(node):
            self._event(NODE_DELETE, old, None)
            return
        self._cache.update_node(node)
        self._event(NODE_UPDATE, old, node)

    def on_node_delete(self, name: str) -> None:
        self._cache.remove_node(name)
        self._event(NODE_DELETE, None, None)

    def on_priority_class(self, pc: PriorityClass, deleted: bool = False) -> str:
        """Record the class; returns why it was refused ("" when it was not)."""
        if deleted:
            self._priorities.delete(pc.metadata.name)
            return ""
        try:
            check_priority_class(pc)
            other = self._priorities.global_default() if pc.global_default else None
            if other is not None and other.metadata.name != pc.metadata.name:
                # The API server's Priority admission plugin refuses a second default class.
                raise Refused(
                    f'priorityclasses.scheduling.k8s.io "{pc.metadata.name}" is forbidden: PriorityClass '
                    f"{other.metadata.name} is already marked as default. Only one default can exist"
                )
        except Refused as err:
            # Pods naming it fail as with a missing class, rather than run at a wrapped priority.
            log.error("%s; ignored", err)
            self._priorities.delete(pc.metadata.name)
            return str(err)
        self._priorities.upsert(pc)
        return ""

    def on_object(self, kind: str, key: str, obj: Any | None) -> None:
        """A watched object (a kind some plugin declared) changed; plugins read it through the handle.

        Raises the ``<Kind>Add|Update|Delete`` cluster event, so pods rejected by a plugin
        that registered for it are retried. A per-node kind's object also marks its node's
        row changed (``Snapshot.touch``), so what plugins remembered for the row is recomputed.
        """
        spec = self._kinds.get(kind)
        if spec is not None and obj is not None:
            if not isinstance(obj, spec.type):
                # Plugins read a declared kind typed (Handle.objects): nothing else may reach them.
                log.error("%s %s: not a %s object (%s), ignored", kind, key, kind, type(obj).__name__)
                return
            obj = self._checked(spec, key, obj)
            if obj is not None and spec.rewrite is not None:
                obj = spec.rewrite(obj)
        elif obj is None:
            self.set_aside.pop((kind, key), None)
        store = self._objects.get(kind)
        if store is None:
            store = self._objects[kind] = ObjectStore()
        old = store.get(key)
        if obj is None:
            if old is None:
                return
            del store[key]
            action = ActionType.DELETE
        else:
            store[key] = obj
            action = ActionType.ADD if old is None else ActionType.UPDATE
        if spec is not None and spec.per_node:
            self._cache.snapshot.touch(key)
        self._event(ClusterEvent(kind, action, f"{kind}{action.value}"), old, obj)
        if spec is not None and spec.stand_in is not None:
            self._stand_in_changed(spec.stand_in, old, obj)

    def stand_in_of(self, pod: Pod) -> tuple[ObjectKind[Any], str, Any] | None:
        """The object ``pod`` stands for (a Reservation's reserve pod): (kind, key, current object),
        or None for an ordinary pod. The output ports write the object instead of binding the pod."""
        for kind in self._kinds.values():
            si = kind.stand_in
            if si is None:
                continue
            name = pod.metadata.annotations.get(si.annotation)
            if name is None:
                continue
            key = kind.key_of(pod.metadata.namespace, name)
            obj = self._objects.get(kind.kind, {}).get(key)
            standing = si.to_pod(obj) if obj is not None else None
            if standing is not None and standing.identity == pod.identity:
                return kind, key, obj
        return None

    def _stand_in_changed(self, stand_in: PodStandIn[Any], old: Any | None, obj: Any | None) -> None:
        """An object scheduled as a pod changed: its pod goes through the pod handlers, queued while
        pending, held in the cache once bound, removed once the object no longer stands for one."""
        old_pod = stand_in.to_pod(old) if old is not None else None
        new_pod = stand_in.to_pod(obj) if obj is not None else None
        if new_pod is None:
            if old_pod is not None:
                self.on_pod_delete(old_pod)
        elif old_pod is None or old_pod.identity != new_pod.identity:
            if old_pod is not None:
                self.on_pod_delete(old_pod)
            self.on_pod_add(new_pod)
        else:
            self.on_pod_update(old_pod, new_pod)

    def _checked(self, spec: ObjectKind[Any], key: str, obj: Any) -> Any | None:
        """``obj``, or None (as if deleted) when its kind sets refused objects aside and ``check``
        refuses it: only its own node loses what it describes."""
        if spec.check is None or not spec.drop_refused:
            return obj
        try:
            spec.check(obj)
        except ValueError as err:
            reason = str(err)
            if self.set_aside.get((spec.kind, key)) != reason:
                self.set_aside[(spec.kind, key)] = reason
                log.error("%s %s: %s; %s", spec.kind, key, reason, spec.refused)
            return None
        self.set_aside.pop((spec.kind, key), None)
        return obj


def _same_resources(a: Pod, b: Pod) -> bool:
    """Whether two versions of a pod request the same resources (same containers and overhead)."""
    sa, sb = a.spec, b.spec
    return (
        sa.containers == sb.containers
        and sa.init_containers == sb.init_containers
        and sa.overhead == sb.overhead
        and sa.priority == sb.priority
        and sa.priority_class_name == sb.priority_class_name
    )


_EMPTY_STATUS = PodStatus()


def _without_status(pod: Pod) -> Pod:
    meta = msgspec.structs.replace(pod.metadata, resource_version="", generation=0)
    return msgspec.structs.replace(pod, metadata=meta, status=_EMPTY_STATUS)


def status_only_update(old: Pod, new: Pod) -> bool:
    """Whether a pending pod's update changed nothing but its status, resourceVersion or generation."""
    return _without_status(old) == _without_status(new)
