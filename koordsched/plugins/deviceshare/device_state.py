"""Per-node device state: the Device model plus what pods hold, kept in step with the cluster.

:class:`NodeDeviceState` is Koordinator's ``nodeDevice``: capacities from the Device CR
(:class:`~koordsched.plugins.deviceshare.model.DeviceModel`), usage summed from the pods'
allocations, free = max(0, total - used), and the VFs in use. Usage is kept per pod uid, so
a pod is never counted twice and releasing it removes exactly what it held.

:class:`DeviceStore` owns every node's state and is shared by all DeviceShare instances on
a snapshot (profiles see the same devices and the same reservations). It follows:

* pods, as a :class:`~koordsched.framework.snapshot.SnapshotListener`: a bound pod's
  ``device-allocated`` annotation is its usage, which is how state is rebuilt after a
  restart; an assumed pod (no ``spec.nodeName`` yet) adds nothing, its devices were
  recorded at Reserve;
* Device objects, which reach the scheduler through ``Scheduler.on_object``, which marks
  the node's row changed (``Snapshot.touch``): :meth:`DeviceStore.sync` looks at the rows
  changed since its last call (and at the whole mapping only when its size changed) and
  rebuilds only the nodes whose object was replaced; equal objects share one model;
* node rows, through :class:`~koordsched.plugins.deviceshare.rows.DeviceRows`, the numpy
  arrays the filter and score kernels read; rows are rewritten lazily, only for nodes
  whose state changed since the last kernel call.

Every change to a node's devices or their usage marks its snapshot row changed, so results
remembered per row (:mod:`koordsched.framework.rowmemo`) are recomputed there.

A malformed annotation on a pod or a malformed Device CR is logged and affects only that
pod or node.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import msgspec

from koordsched.api.core import Node
from koordsched.api.koordinator import (
    ANNOTATION_DEVICE_ALLOCATED,
    LABEL_GPU_MODEL,
    LABEL_GPU_PARTITION_POLICY,
    Device,
)
from koordsched.api.resources import add_into, subtract_non_negative
from koordsched.framework.snapshot import NodeInfo, Snapshot
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare.allocation import (
    AllocationFormatError,
    PodAllocations,
    parse_device_allocated,
)
from koordsched.plugins.deviceshare.model import DeviceModel, DeviceResources, build_model, is_zero
from koordsched.plugins.deviceshare.rows import DeviceRows

log = logging.getLogger(__name__)

DEVICE_KIND = "Device"
_ALLOCATED_KEY = "DeviceShare/allocated"


def add_resources(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """``a + b`` per resource, as a new mapping."""
    out = dict(a)
    add_into(out, b)
    return out


def fits(request: Mapping[str, int], free: Mapping[str, int]) -> bool:
    """``quotav1.LessThanOrEqual(request, free)``: every requested amount is available."""
    return all(v <= free.get(k, 0) for k, v in request.items())


class NodeDeviceState:
    """One node's devices (``nodeDevice``): the model (None without a Device CR) and the usage."""

    __slots__ = (
        "_fingerprint",
        "_free",
        "_keys",
        "allocs",
        "model",
        "model_key",
        "name",
        "source",
        "used",
        "version",
        "vf_used",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.model: DeviceModel | None = None
        #: The Device object the model was built from (identity tells a replaced object).
        self.source: Any = None
        #: pod uid -> what the pod holds on this node.
        self.allocs: dict[str, PodAllocations] = {}
        #: device type -> minor -> resources in use (only non-zero entries are kept).
        self.used: dict[str, DeviceResources] = {}
        #: device type -> minor -> VF busID -> holders.
        self.vf_used: dict[str, dict[int, dict[str, int]]] = {}
        self.version = 0
        #: Equal for two models built from Device objects of equal content (see DeviceStore).
        self.model_key: int = -1
        self._free: dict[str, tuple[int, DeviceResources, DeviceResources]] = {}
        self._fingerprint: tuple[int, Hashable] | None = None
        #: pod uid -> the content of what it holds (None: not comparable, see ``allocation_key``).
        self._keys: dict[str, tuple[Any, ...] | None] = {}

    # --- capacity and free -----------------------------------------------------------------

    def _views(self, device_type: str) -> tuple[DeviceResources, DeviceResources]:
        cached = self._free.get(device_type)
        if cached is not None and cached[0] == self.version:
            return cached[1], cached[2]
        base = self.model.total.get(device_type, {}) if self.model is not None else {}
        used = self.used.get(device_type, {})
        total = dict(base)
        for minor in used:
            # resetDeviceFree gives a used minor missing from the CR an empty total.
            total.setdefault(minor, {})
        free: DeviceResources = {}
        for minor, res in total.items():
            u = used.get(minor)
            free[minor] = dict(res) if u is None else subtract_non_negative(res, u)
        self._free[device_type] = (self.version, total, free)
        return total, free

    def total(self, device_type: str) -> DeviceResources:
        """minor -> capacity, for every device of the type (unhealthy ones as {})."""
        return self._views(device_type)[0]

    def free(self, device_type: str) -> DeviceResources:
        """minor -> max(0, capacity - used)."""
        return self._views(device_type)[1]

    def used_minors(self, device_type: str) -> set[int]:
        return {m for m, res in self.used.get(device_type, {}).items() if not is_zero(res)}

    def vfs_in_use(self, device_type: str, minor: int) -> Mapping[str, int]:
        return self.vf_used.get(device_type, {}).get(minor, {})

    # --- usage -----------------------------------------------------------------------------

    def _apply(self, allocations: PodAllocations, sign: int) -> None:
        for device_type, allocs in allocations.items():
            used = self.used.setdefault(device_type, {})
            vfs = self.vf_used.setdefault(device_type, {})
            for a in allocs:
                if sign > 0:
                    used[a.minor] = add_resources(used.get(a.minor, {}), a.resources)
                else:
                    left = subtract_non_negative(used.get(a.minor, {}), a.resources)
                    if is_zero(left):
                        used.pop(a.minor, None)
                    else:
                        used[a.minor] = left
                for vf in a.vfs:
                    holders = vfs.setdefault(a.minor, {})
                    n = holders.get(vf.bus_id, 0) + sign
                    if n > 0:
                        holders[vf.bus_id] = n
                    else:
                        holders.pop(vf.bus_id, None)
                        if not holders:
                            vfs.pop(a.minor, None)
            if not used:
                self.used.pop(device_type, None)
            if not vfs:
                self.vf_used.pop(device_type, None)
        self.version += 1

    def add(self, uid: str, allocations: PodAllocations) -> bool:
        """Record a pod's devices; False (nothing changes) if the pod is already recorded."""
        if uid in self.allocs:
            return False
        self.allocs[uid] = allocations
        self._keys[uid] = _allocation_key_of(allocations)
        self._apply(allocations, 1)
        return True

    def remove(self, uid: str) -> PodAllocations | None:
        """Release exactly what the pod was recorded with."""
        allocations = self.allocs.pop(uid, None)
        if allocations is not None:
            self._keys.pop(uid, None)
            self._apply(allocations, -1)
        return allocations

    def set_model(self, model: DeviceModel | None, source: Any, model_key: int = -1) -> None:
        self.model = model
        self.source = source
        self.model_key = model_key
        self.version += 1

    def fingerprint(self) -> Hashable:
        """The node's device content (model, usage, VFs in use), equal for nodes an allocation
        cannot tell apart; recomputed only after a change."""
        cached = self._fingerprint
        if cached is not None and cached[0] == self.version:
            return cached[1]
        holdings = [k for k in self._keys.values() if k is not None]
        fingerprint: Hashable
        if len(holdings) == len(self._keys):
            # Usage is the sum of what the pods hold (amounts are never negative here), so equal
            # collections of holdings make equal usage and VFs in use.
            fingerprint = (self.model_key, tuple(sorted(holdings)))
            self._fingerprint = (self.version, fingerprint)
            return fingerprint
        used = tuple(
            sorted(
                (t, tuple(sorted((m, tuple(sorted(r.items()))) for m, r in minors.items())))
                for t, minors in self.used.items()
            )
        )
        vfs = tuple(
            sorted(
                (t, tuple(sorted((m, tuple(sorted(h.items()))) for m, h in minors.items())))
                for t, minors in self.vf_used.items()
            )
        )
        fingerprint = (self.model_key, used, vfs)
        self._fingerprint = (self.version, fingerprint)
        return fingerprint


def allocation_key(allocations: PodAllocations) -> tuple[Any, ...] | None:
    """What a pod holds, as a value (the order of devices aside); None when an amount is negative,
    where usage is no longer the plain sum of the holdings (it is floored at zero)."""
    parts = []
    for device_type, allocs in allocations.items():
        entries = []
        for a in allocs:
            if any(v < 0 for v in a.resources.values()):
                return None
            entries.append((a.minor, tuple(sorted(a.resources.items())), tuple(vf.bus_id for vf in a.vfs)))
        parts.append((device_type, tuple(sorted(entries))))
    return tuple(sorted(parts))


#: id(allocations) -> (allocations, key): Reserve records one shared object for every pod given
#: the same devices (the entry holds the object, so its id cannot be reused while it is here).
_KEYS_BY_ID: dict[int, tuple[PodAllocations, tuple[Any, ...] | None]] = {}


def _allocation_key_of(allocations: PodAllocations) -> tuple[Any, ...] | None:
    """:func:`allocation_key`, remembered per allocations object (they are never modified once recorded)."""
    known = _KEYS_BY_ID.get(id(allocations))
    if known is not None and known[0] is allocations:
        return known[1]
    key = allocation_key(allocations)
    if len(_KEYS_BY_ID) >= 1 << 12:
        _KEYS_BY_ID.clear()
    _KEYS_BY_ID[id(allocations)] = (allocations, key)
    return key


def pod_allocations(pod: PodInfo) -> PodAllocations | None:
    """The pod's ``device-allocated`` annotation, parsed once per PodInfo; None if absent or invalid."""
    raw = pod.pod.metadata.annotations.get(ANNOTATION_DEVICE_ALLOCATED)
    if raw is None:
        return None
    cached: tuple[str, PodAllocations | None] | None = pod.extra.get(_ALLOCATED_KEY)
    if cached is not None and cached[0] == raw:
        return cached[1]
    parsed: PodAllocations | None
    try:
        parsed = parse_device_allocated(raw)
    except AllocationFormatError as err:
        log.error(
            "pod %s: invalid %s annotation, its devices are not counted: %s",
            pod.key,
            ANNOTATION_DEVICE_ALLOCATED,
            err,
        )
        parsed = None
    pod.extra[_ALLOCATED_KEY] = (raw, parsed)
    return parsed


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
        return (st.fingerprint(), labels.get(LABEL_GPU_MODEL), labels.get(LABEL_GPU_PARTITION_POLICY))

    # --- Device objects --------------------------------------------------------------------

    def sync(self) -> None:
        """Catch up with Device objects added, replaced or deleted since the last call.

        Whoever changes a Device object marks its node's row changed (``Snapshot.touch``, as
        ``Scheduler.on_object`` does), so only rows changed since the last call can hold a
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
        except Exception:  # a Device we cannot read must not take the plugin down
            log.exception("Device %s: cannot build the device model; node treated as without devices", name)
            model, content = None, None
        st.set_model(model, obj, self._model_key(content))
        self._changed(name)

    def _device_deleted(self, name: str) -> None:
        """A deleted Device invalidates the node's devices (all unhealthy), as Koordinator does."""
        st = self.states.get(name)
        if st is None or st.model is None:
            return
        if isinstance(st.source, Device):
            st.set_model(build_model(st.source, invalidated=True), None, self._model_key(None))
        self._changed(name)
        if name not in self.snapshot.by_name and not st.allocs:
            del self.states[name]

    # --- reservations of devices by the scheduler ------------------------------------------

    def assume(self, node: str, uid: str, allocations: PodAllocations) -> None:
        """Record what Reserve chose; a previous record of the same pod on the node is replaced."""
        st = self._state(node)
        st.remove(uid)
        st.add(uid, allocations)
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
        allocations = pod_allocations(pod)
        if not allocations:
            return
        st = self._state(info.name)
        if st.add(pod.uid, allocations):
            self._changed(info.name)

    def on_pod_removed(self, info: NodeInfo, pod: PodInfo) -> None:
        st = self.states.get(info.name)
        if st is not None and st.remove(pod.uid) is not None:
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
