"""Available reservations by node, rebuilt from the Reservation store when it changes.

What a reservation holds is parsed once per object version here; what its owners took is
read from the cache (``Handle.reserved_owners``) when a pod asks, so it is never stale.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import msgspec

from koordsched.api.annotations import decode_annotation
from koordsched.api.core import Pod, Taint
from koordsched.api.koordinator import ANNOTATION_NODE_RESERVATION
from koordsched.api.quantity import QuantityError
from koordsched.api.reservation import (
    ANNOTATION_RESTRICTED_OPTIONS,
    LABEL_RESERVATION_ORDER,
    POLICY_RESTRICTED,
    Reservation,
    ReservationOwner,
    ReservationResizeAllocatable,
    ReservationRestrictedOptions,
    allocatable_of,
    allocate_once,
    is_available,
    reservation_errors,
    reservation_uid,
)
from koordsched.api.resources import resource_list
from koordsched.framework.objects import ObjectStore, version_of
from koordsched.framework.types import PodInfo


@dataclass(slots=True)
class ReservationInfo:
    """One Available reservation as the plugin reads it (Koordinator's ReservationInfo)."""

    obj: Reservation
    uid: str
    name: str
    node: str
    allocatable: dict[str, int]
    #: ``node.koordinator.sh/reservation`` resources on the Reservation (kept out of reach).
    reserved: dict[str, int]
    #: The names the policy restricts (Restricted: the restricted-options subset, else all).
    resource_names: frozenset[str]
    policy: str
    allocate_once: bool
    #: ``reservation-order`` when positive, else 0 (ignored).
    order: int
    owners: list[ReservationOwner]
    labels: dict[str, str]
    taints: list[Taint]
    unschedulable: bool
    #: Why the reservation cannot be used (a parse error), or "".
    problem: str = ""
    #: Keys a pod it may belong to is found under (see :func:`_owner_keys`), None: any pod.
    owner_keys: list[tuple[str, str, str]] | None = None

    def allocated(self, owners: Mapping[str, PodInfo]) -> dict[str, int]:
        out: dict[str, int] = {}
        for pod in owners.values():
            for name, amount in pod.requests.items():
                out[name] = out.get(name, 0) + amount
        return out

    def remaining(self, owners: Mapping[str, PodInfo]) -> dict[str, int]:
        taken = self.allocated(owners)
        return {name: max(0, amount - taken.get(name, 0)) for name, amount in self.allocatable.items()}


def _order(r: Reservation) -> int:
    try:
        value = int(r.metadata.labels.get(LABEL_RESERVATION_ORDER, "0"))
    except ValueError:
        return 0
    return value if value > 0 else 0


def _reserved(r: Reservation) -> dict[str, int]:
    raw = r.metadata.annotations.get(ANNOTATION_NODE_RESERVATION)
    if not raw:
        return {}
    spec: ReservationResizeAllocatable = decode_annotation(raw, ReservationResizeAllocatable)
    return resource_list(spec.resources)


def reservation_info(r: Reservation) -> ReservationInfo:
    problem = "; ".join(reservation_errors(r))
    alloc: dict[str, int] = {}
    reserved: dict[str, int] = {}
    names: frozenset[str] = frozenset()
    try:
        alloc = allocatable_of(r)
        reserved = _reserved(r)
        names = frozenset(alloc)
        if r.spec.allocate_policy == POLICY_RESTRICTED:
            raw = r.metadata.annotations.get(ANNOTATION_RESTRICTED_OPTIONS)
            if raw:
                opts: ReservationRestrictedOptions = decode_annotation(raw, ReservationRestrictedOptions)
                if opts.resources:
                    names = frozenset(n for n in opts.resources if n in alloc)
    except (QuantityError, ValueError, msgspec.DecodeError) as err:
        problem = problem or str(err)
    info = ReservationInfo(
        obj=r,
        uid=reservation_uid(r),
        name=r.metadata.name,
        node=r.status.node_name,
        allocatable=alloc,
        reserved=reserved,
        resource_names=names,
        policy=r.spec.allocate_policy,
        allocate_once=allocate_once(r),
        order=_order(r),
        owners=list(r.spec.owners),
        labels=dict(r.metadata.labels),
        taints=list(r.spec.taints),
        unschedulable=r.spec.unschedulable,
        problem=problem,
    )
    info.owner_keys = _owner_keys(info)
    return info


def _owner_keys(info: ReservationInfo) -> list[tuple[str, str, str]] | None:
    """Keys under which a pod matching one of the owners must be found (one per owner), or None
    when an owner has nothing exact to index by (then every pod is a candidate)."""
    keys = []
    for o in info.owners:
        if o.object is not None and o.object.uid:
            keys.append(("uid", "", o.object.uid))
        elif o.object is not None and o.object.name:
            keys.append(("object", o.object.namespace, o.object.name))
        elif o.controller is not None and o.controller.uid:
            keys.append(("controller-uid", "", o.controller.uid))
        elif o.controller is not None and o.controller.name:
            keys.append(("controller", "", o.controller.name))
        elif o.label_selector is not None and o.label_selector.match_labels:
            k, v = next(iter(sorted(o.label_selector.match_labels.items())))
            keys.append(("label", k, v))
        else:
            return None
    return keys


class ReservationIndex:
    """Available reservations by node, by name and by owner key (so a pod is matched only against
    reservations it may own: every owner part is exact, a uid, a name, a controller, or one of a
    selector's matchLabels). Follows the store's changes one key at a time
    (``ObjectStore.changed_since``), rebuilding only when those are no longer known."""

    def __init__(self) -> None:
        self._version: int | None = -1
        self.by_node: dict[str, list[ReservationInfo]] = {}
        self.by_name: dict[str, ReservationInfo] = {}
        self._infos: dict[str, tuple[Reservation, ReservationInfo]] = {}
        self._by_owner_key: dict[tuple[str, str, str], list[ReservationInfo]] = {}
        self._unindexed: list[ReservationInfo] = []
        #: allocatePolicy -> node -> how many available reservations of that policy it holds.
        self._policies: dict[str, dict[str, int]] = {}

    @property
    def policy_nodes(self) -> dict[str, set[str]]:
        """allocatePolicy -> the nodes holding an available reservation of that policy."""
        return {policy: set(nodes) for policy, nodes in self._policies.items() if nodes}

    def candidates(self, pod: Pod) -> list[ReservationInfo]:
        """The reservations ``pod`` may own (a superset of those it does), each once, by name."""
        m = pod.metadata
        found: dict[int, ReservationInfo] = {id(i): i for i in self._unindexed}
        lookups = [("uid", "", m.uid), ("object", m.namespace, m.name), ("object", "", m.name)]
        lookups += [("label", k, v) for k, v in m.labels.items()]
        for ref in m.owner_references:
            lookups += [("controller-uid", "", ref.uid), ("controller", "", ref.name)]
        for key in lookups:
            for info in self._by_owner_key.get(key, ()):
                found[id(info)] = info
        return sorted(found.values(), key=lambda i: (i.node, i.name))

    def refresh(self, store: Mapping[str, Reservation]) -> ReservationIndex:
        version = version_of(store)
        if version is not None and version == self._version:
            return self
        changed = (
            store.changed_since(self._version) if isinstance(store, ObjectStore) and self._version else None
        )
        self._version = version
        if changed is None:
            self._clear()
            changed = set(store)
        for key in changed:
            self._remove(key)
            r = store.get(key)
            if r is not None and is_available(r):
                self._add(key, r)
        return self

    def _clear(self) -> None:
        self.by_node, self.by_name, self._infos = {}, {}, {}
        self._by_owner_key, self._unindexed, self._policies = {}, [], {}

    def _add(self, key: str, r: Reservation) -> None:
        info = reservation_info(r)
        self._infos[key] = (r, info)
        on_node = self.by_node.setdefault(info.node, [])
        on_node.append(info)
        on_node.sort(key=lambda i: i.name)
        self.by_name[info.name] = info
        if info.owner_keys is None:
            self._unindexed.append(info)
        else:
            for k in info.owner_keys:
                self._by_owner_key.setdefault(k, []).append(info)
        nodes = self._policies.setdefault(info.policy, {})
        nodes[info.node] = nodes.get(info.node, 0) + 1

    def _remove(self, key: str) -> None:
        known = self._infos.pop(key, None)
        if known is None:
            return
        info = known[1]
        on_node = self.by_node.get(info.node, [])
        on_node[:] = [i for i in on_node if i is not info]
        if not on_node:
            self.by_node.pop(info.node, None)
        if self.by_name.get(info.name) is info:
            del self.by_name[info.name]
        if info.owner_keys is None:
            self._unindexed = [i for i in self._unindexed if i is not info]
        else:
            for k in info.owner_keys:
                listed = [i for i in self._by_owner_key.get(k, []) if i is not info]
                if listed:
                    self._by_owner_key[k] = listed
                else:
                    self._by_owner_key.pop(k, None)
        nodes = self._policies.get(info.policy, {})
        left = nodes.get(info.node, 0) - 1
        if left > 0:
            nodes[info.node] = left
        else:
            nodes.pop(info.node, None)

    def __bool__(self) -> bool:
        return bool(self.by_node)
