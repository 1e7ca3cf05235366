"""Every node's device state, kept in step with the cluster: :class:`DeviceStore`.

The store owns each node's :class:`~koordsched.plugins.deviceshare.node_state.NodeDeviceState`
and is shared by all DeviceShare instances on a snapshot (profiles see the same devices and
the same reservations). It follows:

* pods, as a :class:`~koordsched.framework.snapshot.SnapshotListener`: a bound pod's
  ``device-allocated`` annotation is its usage, which is how state is rebuilt after a
  restart; an assumed pod (no ``spec.nodeName`` yet) adds nothing, its devices were
  recorded at Reserve;
* Device objects, which reach the scheduler through ``EventHandlers.on_object``, which marks
  the node's row changed (``Snapshot.touch``): :meth:`DeviceStore.sync` looks at the rows
  changed since its last call (and at the whole mapping only when its size changed) and
  rebuilds only the nodes whose object was replaced; equal objects share one model;
* node rows, through :class:`~koordsched.plugins.deviceshare.rows.DeviceRows`, the numpy
  arrays the filter and score kernels read; rows are rewritten lazily, only for nodes
  whose state changed since the last kernel call.

Every change to a node's devices or their usage marks its snapshot row changed, so results
remembered per row (:mod:`koordsched.framework.rowmemo`) are recomputed there.

A malformed annotation on a pod or a malformed Device CR is logged once and affects only
that pod's node: a bound pod whose ``device-allocated`` annotation cannot be read may hold
any device of the types its requests name (all types when they name none), so its node
offers none of those until the pod goes away or its annotation can be read; a Device CR
that cannot be read leaves its node without devices. :attr:`DeviceStore.problem_nodes`
names such nodes, for the Filter to say why.

Reservations (issue 14) will hold devices too: a reservation whose allocation cannot be read
is to be recorded as :meth:`NodeDeviceState.set_unreadable` records a pod's.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import msgspec

import koordsched.plugins.deviceshare.demand as demand
from koordsched.api.core import Node
from koordsched.api.koordinator import (
    ANNOTATION_DEVICE_ALLOCATED,
    Device,
)
from koordsched.framework.snapshot import NodeInfo, Snapshot
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare.allocation import PodAllocations, allocation_error, pod_allocations
from koordsched.plugins.deviceshare.model import DeviceModel, DeviceModelError, build_model, partition_labels
from koordsched.plugins.deviceshare.node_state import NodeDeviceState, Unreadable
from koordsched.plugins.deviceshare.rows import DeviceRows

log = logging.getLogger(__name__)


def device_types_of(pod: PodInfo) -> frozenset[str]:
    """The device types a pod's requests name (gpu, rdma, fpga); all of them when it names none."""
    requests = pod.requests
    table = demand.TABLE
    named = frozenset(t for t, names in table.resource_names.items() if any(n in requests for n in names))
    return named or frozenset(table.types)


class DeviceStore:
    """Every node's device state, shared by the DeviceShare instances on one snapshot."""

    def __init__(self, snapshot: Snapshot, objects: Callable[[], Mapping[str, Any]]) -> None:
        self.snapshot = snapshot
        self._objects = objects
        self.states: dict[str, NodeDeviceState] = {}
        self._seen: dict[str, Any] = {}
        self.rows = DeviceRows()
        #: Device content (labels, annotations, spec) -> a small id: equal ids, equal models.
        self._model_keys: dict[bytes, int] = {}
        self._next_model_key = 0
        #: Models by Device content (a model is never modified once built).
        self._models: dict[bytes, DeviceModel] = {}
        #: The snapshot generation at the last sync (None: never synced).
        self._synced: int | None = None
        #: Nodes with an allocation or a Device CR that cannot be read (see the module docstring).
        self.problem_nodes: set[str] = set()
        #: pod uid -> the problem last logged for it (each is logged once, not on every update).
        self._logged: dict[str, str] = {}
        for info in snapshot.infos:
            self.on_node_added(info)
            for pod in info.pods.values():
                self.on_pod_added(info, pod)

    @classmethod
    def of(cls, snapshot: Snapshot, objects: Callable[[], Mapping[str, Any]]) -> DeviceStore:
        """The store attached to ``snapshot``, attaching one on first use."""
        for listener in snapshot.listeners:
            if isinstance(listener, cls):
                return listener
        store = cls(snapshot, objects)
        snapshot.listeners.append(store)
        return store

    # --- access ----------------------------------------------------------------------------

    def _state(self, name: str) -> NodeDeviceState:
        st = self.states.get(name)
        if st is None:
            st = self.states[name] = NodeDeviceState(name)
        return st

    def state(self, name: str) -> NodeDeviceState | None:
        """The node's state if it has a device cache (a Device CR was seen), else None."""
        st = self.states.get(name)
        return st if st is not None and st.model is not None else None

    def _changed(self, name: str) -> None:
        self.rows.mark_dirty(name)
        # Results remembered for the node's row (see koordsched.framework.rowmemo) are void.
        self.snapshot.touch(name)
        st = self.states.get(name)
        if st is None or not st.has_problems:
            self.problem_nodes.discard(name)
            return
        self.problem_nodes.add(name)
        for uid, record in st.problems().items():
            if self._logged.get(uid) != record.error:
                # Kept after the pod leaves (an update removes and adds it again): bounded instead.
                if len(self._logged) >= 1 << 12:
                    self._logged.clear()
                self._logged[uid] = record.error
                log.error(
                    "pod %s on node %s: invalid %s annotation (%s): the node offers no %s devices "
                    "until the pod goes away or the annotation is fixed",
                    record.pod,
                    name,
                    ANNOTATION_DEVICE_ALLOCATED,
                    record.error,
                    "/".join(sorted(record.types)),
                )

    def _model_key(self, content: bytes | None) -> int:
        """A new id for content never seen (or not comparable: None), else the id it had."""
        if content is not None:
            key = self._model_keys.get(content)
            if key is not None:
                return key
            if len(self._model_keys) >= 1 << 16:
                self._model_keys.clear()  # ids are never reused, so older ones simply stop matching
        self._next_model_key += 1
        if content is not None:
            self._model_keys[content] = self._next_model_key
        return self._next_model_key

    def token(self, info: NodeInfo) -> Hashable:
        """What the exact allocator reads about the node (see :meth:`NodeDeviceState.fingerprint`),
        plus the node labels that choose the built-in partition table."""
        st = self.states.get(info.name)
        if st is None or st.model is None:
            return None
        labels = info.node.metadata.labels
        return (st.fingerprint(), *partition_labels(labels))

    # --- Device objects --------------------------------------------------------------------

    def sync(self) -> None:
        """Catch up with Device objects added, replaced or deleted since the last call.

        Whoever changes a Device object marks its node's row changed (``Snapshot.touch``, as
        ``EventHandlers.on_object`` does), so only rows changed since the last call can hold a
        replaced object: those are compared one by one, and the whole mapping only when its
        size changed. A Device of a node not in the snapshot is picked up when the node comes.
        """
        objects = self._objects()
        seen = self._seen
        snap = self.snapshot
        if len(objects) != len(seen) or self._synced is None:
            if objects != seen:
                for name, obj in objects.items():
                    if seen.get(name) is not obj:
                        self._device_updated(name, obj)
                for name in seen.keys() - objects.keys():
                    self._device_deleted(name)
                self._seen = dict(objects)
        elif snap.generation != self._synced:
            infos = snap.infos
            for row in snap.rows_changed_since(self._synced):
                name = infos[row].name
                obj = objects.get(name)
                if obj is seen.get(name):
                    continue
                if obj is None:
                    del seen[name]
                    self._device_deleted(name)
                else:
                    seen[name] = obj
                    self._device_updated(name, obj)
        self._synced = snap.generation

    def _device_updated(self, name: str, obj: Any) -> None:
        st = self._state(name)
        if not isinstance(obj, Device):
            log.error("Device %s: unexpected object of type %s, ignored", name, type(obj).__name__)
            return
        content: bytes | None
        try:
            meta = obj.metadata
            content = msgspec.json.encode((meta.labels, meta.annotations, obj.spec))
            # Nodes of one kind have Device objects equal but for the name: build the model once.
            known = self._models.get(content)
            if known is not None:
                model = dataclasses.replace(known, name=name)
            else:
                model = build_model(obj)
                if len(self._models) >= 1024:
                    self._models.clear()
                self._models[content] = model
        except DeviceModelError as err:
            log.error("Device %s: %s; the node offers none of its devices", name, err)
            model, content, st.device_error = None, None, str(err)
        except Exception as err:  # a Device we cannot read must not take the plugin down
            log.exception(
                "Device %s: cannot build the device model; the node offers none of its devices", name
            )
            model, content, st.device_error = None, None, str(err) or type(err).__name__
        else:
            st.device_error = None
        st.set_model(model, obj, self._model_key(content))
        self._changed(name)

    def _device_deleted(self, name: str) -> None:
        """A deleted Device invalidates the node's devices (all unhealthy), as Koordinator does."""
        st = self.states.get(name)
        if st is not None and st.device_error is not None:
            # The CR that could not be read is gone: the node simply has no Device now.
            st.device_error = None
            st.set_model(None, None)
            self._changed(name)
        if st is None or st.model is None:
            return
        if isinstance(st.source, Device):
            st.set_model(build_model(st.source, invalidated=True), None, self._model_key(None))
        self._changed(name)
        if name not in self.snapshot.by_name and not st.allocs:
            del self.states[name]

    # --- reservations of devices by the scheduler ------------------------------------------

    def assume(self, node: str, uid: str, allocations: PodAllocations, owner: str = "") -> None:
        """Record what Reserve chose (``owner``: the pod's ``namespace/name``); a previous record of
        the same pod on the node is replaced."""
        st = self._state(node)
        st.remove(uid)
        st.add(uid, allocations, owner)
        self._changed(node)

    def forget(self, node: str, uid: str) -> PodAllocations | None:
        st = self.states.get(node)
        if st is None:
            return None
        released = st.remove(uid)
        if released is not None:
            self._changed(node)
        return released

    # --- SnapshotListener ------------------------------------------------------------------

    def on_node_added(self, info: NodeInfo) -> None:
        self.rows.ensure(len(info.snapshot.row_gen))
        self.rows.clear_row(info.row)
        self._changed(info.name)

    def on_node_updated(self, info: NodeInfo, old: Node) -> None:
        # Node labels choose the built-in partition table and its policy.
        if old.metadata.labels != info.node.metadata.labels:
            self._changed(info.name)

    def on_node_removed(self, info: NodeInfo, moved: NodeInfo | None) -> None:
        # The snapshot moved its last row (now index ``n``) into the vacated one.
        if moved is not None:
            self.rows.move_row(info.snapshot.n, info.row)
        else:
            self.rows.clear_row(info.row)

    def on_pod_added(self, info: NodeInfo, pod: PodInfo) -> None:
        if not pod.pod.spec.node_name:
            return  # an assumed pod: Reserve already recorded its devices
        error = allocation_error(pod)
        if error is not None:
            # Which devices it holds is unknown: it may hold any of its types.
            record = Unreadable(pod.key, device_types_of(pod), error)
            self._state(info.name).set_unreadable(pod.uid, record)
            self._changed(info.name)
            return
        allocations = pod_allocations(pod)
        if not allocations:
            return
        st = self._state(info.name)
        if st.add(pod.uid, allocations, pod.key):
            self._changed(info.name)

    def on_pod_removed(self, info: NodeInfo, pod: PodInfo) -> None:
        st = self.states.get(info.name)
        if st is None:
            return
        unreadable = st.clear_unreadable(pod.uid)
        if st.remove(pod.uid) is not None or unreadable:
            self._changed(info.name)

    # --- rows for the kernels --------------------------------------------------------------

    def flush_rows(self) -> DeviceRows:
        """The kernel arrays, with every changed node's row rewritten."""
        rows = self.rows
        rows.ensure(len(self.snapshot.row_gen))
        if rows.dirty:
            by_name = self.snapshot.by_name
            for name in rows.dirty:
                info = by_name.get(name)
                if info is not None:
                    rows.write_row(info.row, self.state(name), info.node.metadata.labels)
            rows.dirty.clear()
        return rows
