"""One node's devices (Koordinator's ``nodeDevice``): the Device model plus what pods hold there.

:class:`NodeDeviceState` keeps capacities from the Device CR
(:class:`~koordsched.plugins.deviceshare.model.DeviceModel`), usage summed from the pods'
allocations, free = max(0, total - used), and the VFs in use. Usage is kept per pod uid, so
a pod is never counted twice and releasing it removes exactly what it held.

Its :meth:`~NodeDeviceState.fingerprint` names the node's device content, so results that
depend only on it can be shared by nodes alike (the content memos, the row templates of
:mod:`~koordsched.plugins.deviceshare.rows`).

An allocation that cannot be read is never counted as holding nothing: a pod whose
``device-allocated`` annotation does not parse (recorded by the store), or whose allocation
names a minor the Device does not have or a negative amount, may hold any device of its
types, so :meth:`~NodeDeviceState.blocked` names those types and the node offers none of
them (their free amounts read as 0) until the pod goes away or its allocation can be read.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from koordsched.api.resources import add_into, subtract_non_negative
from koordsched.plugins.deviceshare.allocation import PodAllocations
from koordsched.plugins.deviceshare.model import DeviceModel, DeviceResources, is_zero


@dataclass(frozen=True, slots=True)
class Unreadable:
    """An allocation on the node that cannot be read: whose it is, the device types it may hold
    (those the node then offers none of), and why."""

    pod: str
    types: frozenset[str]
    error: str


def allocation_problem(allocations: PodAllocations, model: DeviceModel) -> tuple[frozenset[str], str] | None:
    """(device types, why) when a readable allocation does not fit the node's Device: a minor the
    Device does not have (which device the pod holds is unknown) or a negative amount (it would
    free capacity); None when it fits."""
    types: set[str] = set()
    why = ""
    for device_type, allocs in allocations.items():
        minors = model.total.get(device_type, {})
        for a in allocs:
            problem = ""
            if a.minor not in minors:
                problem = f"{device_type} minor {a.minor} is not in Device {model.name}"
            else:
                negative = sorted(n for n, v in a.resources.items() if v < 0)
                if negative:
                    problem = (
                        f"{device_type} minor {a.minor}: negative {negative[0]} {a.resources[negative[0]]}"
                    )
            if problem:
                types.add(device_type)
                why = why or problem
    return (frozenset(types), why) if types else None


def add_resources(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """``a + b`` per resource, as a new mapping."""
    out = dict(a)
    add_into(out, b)
    return out


class NodeDeviceState:
    """One node's devices (``nodeDevice``): the model (None without a Device CR) and the usage."""

    __slots__ = (
        "_blocked",
        "_fingerprint",
        "_free",
        "_invalid",
        "_keys",
        "_owners",
        "allocs",
        "device_error",
        "model",
        "model_key",
        "name",
        "source",
        "unreadable",
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
        #: pod uid -> its ``namespace/name``, for the reasons that name it.
        self._owners: dict[str, str] = {}
        #: pod uid -> its allocation annotation that cannot be read (set by the store).
        self.unreadable: dict[str, Unreadable] = {}
        #: pod uid -> its recorded allocation that does not fit the Device (see ``allocation_problem``).
        self._invalid: dict[str, Unreadable] = {}
        self._blocked: tuple[int, dict[str, Unreadable]] | None = None
        #: Why the node's Device CR cannot be read (the node then has no model: no devices).
        self.device_error: str | None = None

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
        if (self.unreadable or self._invalid) and device_type in self.blocked():
            # Some pod may hold any of these devices: none is free.
            free = {minor: dict.fromkeys(res, 0) for minor, res in total.items()}
        for minor, res in total.items():
            if minor in free:
                continue
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

    def add(self, uid: str, allocations: PodAllocations, owner: str = "") -> bool:
        """Record a pod's devices (``owner``: its ``namespace/name``); False (nothing changes) if the
        pod is already recorded."""
        if uid in self.allocs:
            return False
        self.allocs[uid] = allocations
        self._keys[uid] = _allocation_key_of(allocations)
        self._owners[uid] = owner or uid
        self._check(uid)
        self._apply(allocations, 1)
        return True

    def remove(self, uid: str) -> PodAllocations | None:
        """Release exactly what the pod was recorded with."""
        allocations = self.allocs.pop(uid, None)
        if allocations is not None:
            self._keys.pop(uid, None)
            self._owners.pop(uid, None)
            self._invalid.pop(uid, None)
            self._apply(allocations, -1)
        return allocations

    def set_unreadable(self, uid: str, record: Unreadable) -> None:
        """The pod's allocation annotation cannot be read: its node offers none of ``record.types``."""
        if self.unreadable.get(uid) != record:
            self.unreadable[uid] = record
            self.version += 1

    def clear_unreadable(self, uid: str) -> bool:
        """The pod went away or its annotation can be read again; True if it was recorded."""
        if self.unreadable.pop(uid, None) is None:
            return False
        self.version += 1
        return True

    @property
    def has_problems(self) -> bool:
        """Whether an allocation cannot be read or the Device CR cannot (a rare state)."""
        return bool(self.unreadable or self._invalid or self.device_error)

    def problems(self) -> dict[str, Unreadable]:
        """pod uid -> its allocation that cannot be read (annotation or against the Device)."""
        return {**self._invalid, **self.unreadable}

    def blocked(self) -> Mapping[str, Unreadable]:
        """Device type -> the first allocation that cannot be read and may hold devices of the type."""
        cached = self._blocked
        if cached is not None and cached[0] == self.version:
            return cached[1]
        blocked: dict[str, Unreadable] = {}
        for record in (*self.unreadable.values(), *self._invalid.values()):
            for device_type in sorted(record.types):
                blocked.setdefault(device_type, record)
        self._blocked = (self.version, blocked)
        return blocked

    def _check(self, uid: str) -> None:
        model = self.model
        problem = allocation_problem(self.allocs[uid], model) if model is not None else None
        if problem is None:
            self._invalid.pop(uid, None)
        else:
            self._invalid[uid] = Unreadable(self._owners.get(uid, uid), *problem)

    def set_model(self, model: DeviceModel | None, source: Any, model_key: int = -1) -> None:
        self.model = model
        self.source = source
        self.model_key = model_key
        # Whether an allocation names a device the node has depends on the model.
        for uid in self.allocs:
            self._check(uid)
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
            fingerprint = self._with_blocked((self.model_key, tuple(sorted(holdings))))
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
        fingerprint = self._with_blocked((self.model_key, used, vfs))
        self._fingerprint = (self.version, fingerprint)
        return fingerprint

    def _with_blocked(self, fingerprint: Hashable) -> Hashable:
        """The types the node offers none of are part of what allocation reads (rare: kept apart)."""
        if not self.unreadable and not self._invalid:
            return fingerprint
        return (fingerprint, "blocked", tuple(sorted(self.blocked())))


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
