"""NodeNUMAResource's cluster-wide state: per-node views and allocations, following the snapshot.

One :class:`NUMANodeState` is attached to a snapshot (shared by every profile's
NodeNUMAResource, so a CPU reserved by one profile is taken for all). It keeps:

* the :class:`ResourceManager` of CPU/NUMA allocations, fed from bound pods'
  ``scheduling.koordinator.sh/resource-status`` annotations (so a restart rebuilds it)
  and from Reserve;
* a :class:`NodeView` per node, rebuilt when the Node or its NodeResourceTopology
  object changes (NRTs are not announced to plugins, but ``EventHandlers.on_object`` marks the
  node's row changed: the rows changed since the last look are checked when a cycle
  starts); NRTs of equal content share their parsed options;
* per snapshot row, flags saying whether the node has anything that could concern a
  plain pod (a NUMA policy, a CPU bind policy, an amplified cpu), so Filter and Score
  can leave every other row to a vector path.

An allocation that cannot be read is never counted as holding nothing: a bound pod whose
``resource-status`` cannot be parsed, or names CPUs or NUMA nodes the node's NRT does not
have (or a negative amount), or an NRT that cannot be read (see ``TopologyOptions.unreadable``),
makes :meth:`NUMANodeState.refusal` refuse CPU binding and NUMA alignment on that node until
the pod goes away or the object is fixed; the reason names the pod and annotation (or the NRT).
Reservations (issue 14) will hold CPUs too: one whose allocation cannot be read is to be
recorded as :meth:`NUMANodeState.on_pod_added` records a pod's.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from koordsched.api.core import Node
from koordsched.api.kinds import NODE_RESOURCE_TOPOLOGIES
from koordsched.api.koordinator import (
    ANNOTATION_RESOURCE_SPEC,
    ANNOTATION_RESOURCE_STATUS,
    NodeResourceTopology,
    ResourceSpec,
    ResourceStatus,
)
from koordsched.api.quantity import QuantityError, describe_int
from koordsched.api.resources import resource_list
from koordsched.framework.interface import Handle
from koordsched.framework.snapshot import NodeInfo, Snapshot
from koordsched.framework.status import Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.nodenumaresource.cpuset import format_cpuset, parse_cpuset
from koordsched.plugins.nodenumaresource.options import (
    EMPTY_OPTIONS,
    NodeSettings,
    NodeView,
    TopologyOptions,
)
from koordsched.plugins.nodenumaresource.resource_manager import (
    EMPTY_FINGERPRINT,
    NodeAllocation,
    NUMANodeAllocation,
    PodAllocation,
    ResourceManager,
)

log = logging.getLogger(__name__)

_TERMINAL_PHASES = ("Succeeded", "Failed")
_EXTRA_KEY = "NodeNUMAResource/allocation"
#: Not in Koordinator (which leaves such a pod out, handing its CPUs to the next pod).
ERR_ALLOCATION_UNREADABLE = "node(s) resource allocation of pod {pod} unreadable ({annotation}): {error}"
#: Not in Koordinator (which carries on as if the node had no NRT, or without the CPUs it records).
ERR_NRT_UNREADABLE = "node(s) NodeResourceTopology {name} unreadable: {error}"


class AllocationAnnotationError(ValueError):
    """A bound pod's resource-status (or resource-spec) annotation cannot be read."""


def allocation_from_pod(pod: PodInfo) -> PodAllocation | None:
    """The CPU/NUMA allocation a bound pod's annotations record, or None if it records none.

    Raises :class:`AllocationAnnotationError` for a malformed annotation: the caller logs
    it and leaves the pod out, exactly as Koordinator's pod handler skips such a pod.
    """
    ann = pod.pod.metadata.annotations
    raw = ann.get(ANNOTATION_RESOURCE_STATUS)
    if not raw:
        return None
    try:
        status = msgspec.json.decode(raw, type=ResourceStatus)
        exclusive = ""
        if spec_raw := ann.get(ANNOTATION_RESOURCE_SPEC):
            exclusive = msgspec.json.decode(spec_raw, type=ResourceSpec).preferred_cpu_exclusive_policy
        cpus = parse_cpuset(status.cpuset)
        numa = tuple(
            NUMANodeAllocation(n.node, resource_list(n.resources)) for n in status.numa_node_resources
        )
    except (msgspec.DecodeError, msgspec.ValidationError, QuantityError, ValueError) as err:
        raise AllocationAnnotationError(str(err)) from err
    if not cpus and not numa:
        return None
    meta = pod.pod.metadata
    return PodAllocation(pod.uid, meta.namespace, meta.name, cpus, exclusive, numa)


def _cached_allocation(pod: PodInfo) -> tuple[PodAllocation | None, str | None]:
    """(:func:`allocation_from_pod`, why it cannot be read), parsed once per annotation text: a
    bound pod's update keeps its PodInfo's ``extra`` (event handlers), and may fix the annotation."""
    ann = pod.pod.metadata.annotations
    raw = (ann.get(ANNOTATION_RESOURCE_STATUS), ann.get(ANNOTATION_RESOURCE_SPEC))
    if not raw[0]:
        # No resource-status: no allocation to read (allocation_from_pod), nothing kept per pod.
        pod.extra.pop(_EXTRA_KEY, None)
        return None, None
    cached: tuple[tuple[str | None, str | None], PodAllocation | None, str | None] | None = pod.extra.get(
        _EXTRA_KEY
    )
    if cached is not None and cached[0] == raw:
        return cached[1], cached[2]
    try:
        alloc, error = allocation_from_pod(pod), None
    except AllocationAnnotationError as err:
        alloc, error = None, str(err) or "cannot be parsed"
    pod.extra[_EXTRA_KEY] = (raw, alloc, error)
    return alloc, error


def allocation_problem(alloc: PodAllocation, view: NodeView) -> str | None:
    """Why a readable allocation does not fit the node's NRT: CPUs its topology does not have, a NUMA
    node it has no zone for, a negative amount (which would free resources); None when it fits."""
    topology = view.topology
    if alloc.cpuset and topology.cpus:
        unknown = alloc.cpuset - topology.cpus
        if unknown:
            return f"cpus {format_cpuset(unknown)} are not in the node's CPU topology"
    zones = {z.node for z in view.zones}
    for n in alloc.numa:
        if zones and n.node not in zones:
            return f"NUMA node {n.node} is not in the node's NodeResourceTopology"
        for name, amount in sorted(n.resources.items()):
            if amount < 0:
                return f"NUMA node {n.node}: negative {name} {describe_int(amount)}"
    return None


def _as_nrt(name: str, obj: Any) -> NodeResourceTopology | str:
    """The NRT, or why it cannot be read."""
    if isinstance(obj, NodeResourceTopology):
        return obj
    try:
        return msgspec.convert(obj, NodeResourceTopology)
    except (msgspec.ValidationError, TypeError) as err:
        log.error(
            "NodeResourceTopology %s: cannot be read, the node offers no CPU binding or NUMA alignment: %s",
            name,
            err,
        )
        return str(err) or type(err).__name__


class NUMANodeState:
    """Snapshot listener holding NodeNUMAResource's per-node state (see the module docstring)."""

    def __init__(self, snapshot: Snapshot, handle: Handle | None) -> None:
        self.snapshot = snapshot
        self.handle = handle
        self.manager = ResourceManager()
        self._settings: dict[str, tuple[Node, NodeSettings]] = {}
        self._options: dict[str, tuple[Any, TopologyOptions, int]] = {}
        self._views: dict[str, NodeView] = {}
        #: Per node: what its view is made of (NRT content id, Node settings), see :meth:`token`.
        self._view_tokens: dict[str, Hashable] = {}
        #: Options by NRT content (options are never modified once built).
        self._options_by_content: dict[bytes, TopologyOptions] = {}
        #: NRT content -> a small id (0: no NRT); ids are never reused.
        self._nrt_ids: dict[bytes, int] = {}
        self._next_nrt_id = 0
        #: Bumped when a node is added or removed, the only changes that move nodes between rows.
        self.layout_version = 0
        #: The snapshot generation at the last :meth:`sync_nrts` (None: never synced).
        self._synced: int | None = None
        self.flags: npt.NDArray[np.int8] = np.zeros(max(8, len(snapshot.row_gen)), dtype=np.int8)
        self._flagged: bool | None = False
        #: node -> pod uid -> (pod ``namespace/name``, why its resource-status cannot be read).
        self._unreadable: dict[str, dict[str, tuple[str, str]]] = {}
        #: node -> (view, allocations, their version, refusal) of the last :meth:`refusal` that looked.
        self._refusals: dict[str, tuple[NodeView, NodeAllocation | None, int, Status | None]] = {}
        #: pod uid -> the problem last logged for it (each is logged once, not on every update).
        self._logged: dict[str, str] = {}
        for info in snapshot.infos:
            self.on_node_added(info)
            for pod in info.pods.values():
                self.on_pod_added(info, pod)

    @classmethod
    def of(cls, handle: Handle) -> NUMANodeState:
        """The state attached to the handle's snapshot, attaching one on first use."""
        snapshot = handle.snapshot
        for listener in snapshot.listeners:
            if isinstance(listener, cls):
                if listener.handle is None:
                    listener.handle = handle
                return listener
        state = cls(snapshot, handle)
        snapshot.listeners.append(state)
        return state

    # --- views ---------------------------------------------------------------------------------

    def _nrts(self) -> Mapping[str, Any]:
        return self.handle.objects(NODE_RESOURCE_TOPOLOGIES) if self.handle is not None else {}

    def sync_nrts(self) -> None:
        """Rebuild the views of nodes whose NodeResourceTopology appeared, changed or went away.

        Whoever changes an NRT marks its node's row changed (``Snapshot.touch``, as
        ``EventHandlers.on_object`` does), so only rows changed since the last call are looked at,
        and the whole mapping only when its size changed.
        """
        nrts = self._nrts()
        seen = self._options
        snap = self.snapshot
        if not nrts and not seen:  # the common cluster: no NRT now and none before
            self._synced = snap.generation
            return
        if len(nrts) != len(seen) or self._synced is None:
            changed = [
                name for name, obj in nrts.items() if (entry := seen.get(name)) is None or entry[0] is not obj
            ]
            for name in changed:
                self._set_nrt(name, nrts[name])
            if len(seen) != len(nrts):
                for name in [n for n in seen if n not in nrts]:
                    del seen[name]
                    self._refresh(name)
        elif snap.generation != self._synced:
            infos = snap.infos
            for row in snap.rows_changed_since(self._synced):
                name = infos[row].name
                obj = nrts.get(name)
                entry = seen.get(name)
                if obj is None:
                    if entry is not None:
                        del seen[name]
                        self._refresh(name)
                elif entry is None or entry[0] is not obj:
                    self._set_nrt(name, obj)
        self._synced = snap.generation

    def _set_nrt(self, name: str, obj: Any) -> None:
        nrt = _as_nrt(name, obj)
        if isinstance(nrt, str):
            # Unlike any other node's: a fresh content id, so nothing remembered elsewhere applies.
            self._options[name] = (obj, TopologyOptions(unreadable=nrt), self._nrt_id(None))
            self._refresh(name)
            return
        # Everything TopologyOptions.from_nrt reads (the name only reaches log lines): nodes of one
        # kind have equal NRTs but for the name, so their options are built once and shared.
        content: bytes | None = msgspec.json.encode(
            (nrt.metadata.annotations, nrt.topology_policies, nrt.zones)
        )
        options = self._options_by_content.get(content) if content is not None else None
        if options is None:
            options = TopologyOptions.from_nrt(nrt)
            if options.problems:
                content = None  # their text names the NRT: not shared
            elif content is not None:
                if len(self._options_by_content) >= 1024:
                    self._options_by_content.clear()
                self._options_by_content[content] = options
        self._options[name] = (obj, options, self._nrt_id(content))
        self._refresh(name)

    def _nrt_id(self, content: bytes | None) -> int:
        if content is not None:
            known = self._nrt_ids.get(content)
            if known is not None:
                return known
            if len(self._nrt_ids) >= 1 << 16:
                self._nrt_ids.clear()
        self._next_nrt_id += 1
        if content is not None:
            self._nrt_ids[content] = self._next_nrt_id
        return self._next_nrt_id

    def _forget_view(self, name: str) -> None:
        self._views.pop(name, None)
        self._view_tokens.pop(name, None)

    def _refresh(self, name: str) -> None:
        self._forget_view(name)
        info = self.snapshot.by_name.get(name)
        if info is not None:
            self._ensure(info.row)
            self.flags[info.row] = self.view(info).flags
            self._flagged = None
            # Results remembered for the row (koordsched.framework.rowmemo) read the old view.
            self.snapshot.touch(name)

    def view(self, info: NodeInfo) -> NodeView:
        view = self._views.get(info.name)
        if view is not None:
            return view
        settings_entry = self._settings.get(info.name)
        if settings_entry is None or settings_entry[0] is not info.node:
            settings_entry = (info.node, NodeSettings.from_node(info.node))
            self._settings[info.name] = settings_entry
        options_entry = self._options.get(info.name)
        options = options_entry[1] if options_entry is not None else EMPTY_OPTIONS
        settings = settings_entry[1]
        view = self._views[info.name] = NodeView(settings, options)
        ratios = None if settings.ratios is None else tuple(sorted(settings.ratios.items()))
        self._view_tokens[info.name] = (
            options_entry[2] if options_entry is not None else 0,
            settings.numa_policy_label,
            settings.cpu_bind_label,
            settings.numa_allocate_strategy,
            ratios,
            settings.ratios_invalid,
        )
        return view

    def token(self, info: NodeInfo, with_row: bool) -> Hashable:
        """What NodeNUMAResource reads about the node: its view's making, its CPU/NUMA allocations and,
        with ``with_row``, its allocatable and requested columns. Equal tokens, equal results."""
        token = self._view_tokens.get(info.name)
        if token is None:
            self.view(info)
            token = self._view_tokens[info.name]
        na = self.manager.nodes.get(info.name)
        allocations = na.fingerprint() if na is not None else EMPTY_FINGERPRINT
        refused = self.refusal(info)
        if refused is not None:
            # Rare: what refuses the node is part of what Filter reads there.
            allocations = (allocations, refused.reasons)
        if not with_row:
            return (token, allocations)
        snap = self.snapshot
        row = info.row
        return (token, allocations, snap.alloc[row].tobytes(), snap.used[row].tobytes())

    def refusal(self, info: NodeInfo) -> Status | None:
        """Why the node offers no CPU binding and no NUMA alignment, or None: its NRT cannot be read,
        or a bound pod's resource-status cannot be read or does not fit the NRT (see the module
        docstring). Cheap for a node with none of that: a lookup, once per view and allocation."""
        view = self.view(info)
        # The allocation object too: the manager drops an emptied node's and starts a new one at 0.
        na = self.manager.nodes.get(info.name)
        version = na.version if na is not None else -1
        known = self._refusals.get(info.name)
        if known is not None and known[0] is view and known[1] is na and known[2] == version:
            return known[3]
        status = self._find_refusal(info.name, view)
        self._refusals[info.name] = (view, na, version, status)
        return status

    def _find_refusal(self, name: str, view: NodeView) -> Status | None:
        if view.options.unreadable:
            return Status.unresolvable(ERR_NRT_UNREADABLE.format(name=name, error=view.options.unreadable))
        problems = dict(self._unreadable.get(name, {}))
        na = self.manager.nodes.get(name)
        if na is not None:
            for uid, alloc in na.pods.items():
                if uid not in problems and (why := allocation_problem(alloc, view)) is not None:
                    problems[uid] = (f"{alloc.namespace}/{alloc.name}", why)
        for uid, (pod, why) in problems.items():
            self._log_once(uid, pod, name, why)
        if not problems:
            return None
        pod, why = min(problems.values())
        return Status.unresolvable(
            ERR_ALLOCATION_UNREADABLE.format(pod=pod, annotation=ANNOTATION_RESOURCE_STATUS, error=why)
        )

    @property
    def any_flagged(self) -> bool:
        """Whether some node has a flag set (the common cluster has none)."""
        if self._flagged is None:
            self._flagged = bool(self.flags.any())
        return self._flagged

    def _ensure(self, row: int) -> None:
        if row < len(self.flags):
            return
        grown = np.zeros(max(2 * len(self.flags), row + 1), dtype=np.int8)
        grown[: len(self.flags)] = self.flags
        self.flags = grown

    # --- SnapshotListener ----------------------------------------------------------------------

    def on_node_added(self, info: NodeInfo) -> None:
        self.layout_version += 1
        self._forget_view(info.name)
        self._ensure(info.row)
        if self.handle is not None and info.name not in self._options:
            obj = self._nrts().get(info.name)
            if obj is not None:
                self._set_nrt(info.name, obj)
                return
        self.flags[info.row] = self.view(info).flags
        self._flagged = None

    def on_node_updated(self, info: NodeInfo, old: Node) -> None:
        if old.metadata.labels == info.node.metadata.labels and (
            old.metadata.annotations == info.node.metadata.annotations
        ):
            entry = self._settings.get(info.name)
            if entry is not None:
                self._settings[info.name] = (info.node, entry[1])
            return
        self._forget_view(info.name)
        self._ensure(info.row)
        self.flags[info.row] = self.view(info).flags
        self._flagged = None

    def on_node_removed(self, info: NodeInfo, moved: NodeInfo | None) -> None:
        self.layout_version += 1
        last = self.snapshot.n  # the vacated row, now past the end
        if moved is not None:
            self.flags[info.row] = self.flags[last]
            self._flagged = None
        if last < len(self.flags):
            self.flags[last] = 0
            self._flagged = None
        self._forget_view(info.name)
        self._settings.pop(info.name, None)
        self.manager.nodes.pop(info.name, None)
        self._refusals.pop(info.name, None)

    def on_pod_added(self, info: NodeInfo, pod: PodInfo) -> None:
        if pod.pod.status.phase in _TERMINAL_PHASES:
            self._forget_unreadable(info.name, pod.uid)
            self.manager.release(info.name, pod.uid)
            return
        alloc, error = _cached_allocation(pod)
        if error is not None:
            # Which CPUs and NUMA resources it holds is unknown: the node refuses CPU binding and
            # NUMA alignment while the pod is there (see refusal).
            self._unreadable.setdefault(info.name, {})[pod.uid] = (pod.key, error)
            self._refusals.pop(info.name, None)
            self._log_once(pod.uid, pod.key, info.name, error)
            return
        self._forget_unreadable(info.name, pod.uid)
        if alloc is not None:
            self.manager.update(info.name, alloc)

    def on_pod_removed(self, info: NodeInfo, pod: PodInfo) -> None:
        self._forget_unreadable(info.name, pod.uid)
        self.manager.release(info.name, pod.uid)

    def _log_once(self, uid: str, pod: str, node: str, why: str) -> None:
        if self._logged.get(uid) == why:
            return
        # Kept after the pod leaves (an update removes and adds it again): bounded instead.
        if len(self._logged) >= 1 << 12:
            self._logged.clear()
        self._logged[uid] = why
        log.error(
            "pod %s on node %s: invalid %s annotation (%s): the node offers no CPU binding or NUMA "
            "alignment until the pod goes away or the annotation is fixed",
            pod,
            node,
            ANNOTATION_RESOURCE_STATUS,
            why,
        )

    def _forget_unreadable(self, node: str, uid: str) -> None:
        held = self._unreadable.get(node)
        if held is not None and held.pop(uid, None) is not None:
            self._refusals.pop(node, None)
            if not held:
                del self._unreadable[node]
