"""NodeVolumeLimits (kube-scheduler v1.28's CSILimits).

A node's CSI drivers can attach a limited number of volumes (``CSINode`` ``allocatable.count``,
or an ``attachable-volumes-csi-<driver>`` node resource). A pod fits when, per driver, the
volumes already attached by the node's pods plus its new ones stay within the limit; a volume
used by several pods on the node counts once. Claims are resolved to their PV's CSI driver and
handle (in-tree GCE PD and EBS volumes through their migrated CSI drivers); an unbound claim
counts against its StorageClass's provisioner.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from koordsched.api.core import Pod
from koordsched.api.kinds import CSI_NODES, PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES
from koordsched.api.quantity import QuantityError, int_value_int64
from koordsched.api.storage import (
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    claim_class,
    claim_not_found,
    ephemeral_claim_name,
)
from koordsched.framework.cycle_state import CycleState, StateData
from koordsched.framework.interface import (
    ClusterEventWithHint,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    PreFilterExtensions,
    PreFilterPlugin,
)
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SKIP, SUCCESS, Code, Status
from koordsched.framework.types import (
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    ActionType,
    ClusterEvent,
    PodInfo,
    PreFilterResult,
)
from koordsched.plugins.nodevolumelimits.migration import (
    CSI_DRIVER_OF,
    TranslationError,
    attach_limit_key,
    inline_handle,
    inline_plugin,
    pv_handle,
    pv_plugin,
)

ERR_REASON_MAX_VOLUME_COUNT = "node(s) exceed max volume count"
_ATTACHABLE_PREFIX = "attachable-volumes-"
_STATE_KEY = "PreFilterNodeVolumeLimits"
#: Stands for "the node has a CSINode" when working out a pod's volumes (migration is then on).
_ANY_CSI_NODE = CSINode()


class _LookupError(Exception):
    """A new pod's volume cannot be resolved: the pod fails with this (an Error, as upstream)."""


@dataclass
class _State(StateData):
    #: node has a CSINode -> the pod's countable volumes there (or why they cannot be counted).
    new: dict[bool, dict[str, str] | _LookupError] = field(default_factory=dict)


def owner_error(pod: Pod, pvc: PersistentVolumeClaim) -> str | None:
    """``ephemeral.VolumeIsForPod``: an ephemeral volume's claim must be controlled by the pod."""
    for ref in pvc.metadata.owner_references:
        if ref.controller and ref.uid == pod.metadata.uid:
            return None
    return (
        f"PVC {pvc.metadata.namespace}/{pvc.metadata.name} was not created for pod "
        f"{pod.metadata.namespace}/{pod.metadata.name} (pod is not owner)"
    )


class NodeVolumeLimits:
    name = "NodeVolumeLimits"

    def __init__(self, args: Any, handle: Handle) -> None:
        self._handle = handle
        # Unbound claims are counted under a made-up handle no real volume has.
        self._unbound_prefix = uuid.uuid4().hex
        self._csi_keys: set[str] = set()
        self._csi_version: int | None = None

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        for v in pod.pod.spec.volumes:
            if v.persistent_volume_claim is not None or v.ephemeral is not None or inline_plugin(v):
                break
        else:
            return None, SKIP
        s = _State()
        state.write(_STATE_KEY, s)
        keys: set[str] = set()
        for csi_node in (None, _ANY_CSI_NODE):
            try:
                keys.update(self._new_volumes(state, pod.pod, csi_node).values())
            except _LookupError:
                return None, SUCCESS  # Filter reports it on every node, as upstream
        # Nothing to count, or no node limits what there is: Filter would pass everywhere.
        if not keys & self._limited_keys():
            return None, SKIP
        return None, SUCCESS

    def _limited_keys(self) -> set[str]:
        """Every attach limit some node may have: CSINode counts, and the node resources seen."""
        store = self._handle.objects(CSI_NODES)
        version = getattr(store, "version", None)
        if version is None or version != self._csi_version:
            self._csi_keys = {
                attach_limit_key(d.name)
                for n in store.values()
                for d in n.spec.drivers
                if d.allocatable is not None and d.allocatable.count is not None
            }
            self._csi_version = version
        names = self._handle.snapshot.resources.names
        return self._csi_keys | {r for r in names if r.startswith(_ATTACHABLE_PREFIX)}

    def _new_volumes(self, state: CycleState, pod: Pod, csi_node: CSINode | None) -> dict[str, str]:
        """The pod's own countable volumes; they depend on the node only through whether it has a
        CSINode (migration), so each answer is worked out once per cycle."""
        s = state.read_optional(_STATE_KEY, _State)
        if s is None:
            s = _State()
            state.write(_STATE_KEY, s)
        migrated = csi_node is not None
        known = s.new.get(migrated)
        if known is None:
            try:
                found: dict[str, str] = {}
                self._attachable(pod, csi_node, True, found)
                known = s.new[migrated] = found
            except _LookupError as exc:
                known = s.new[migrated] = exc
        if isinstance(known, _LookupError):
            raise known
        return dict(known)

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if not pod.pod.spec.volumes:
            return SUCCESS
        csi_node: CSINode | None = self._handle.objects(CSI_NODES).get(node.name)
        try:
            new = self._new_volumes(state, pod.pod, csi_node)
        except _LookupError as exc:
            return Status(Code.ERROR, str(exc))
        if not new:
            return SUCCESS
        limits = node_limits(node, csi_node)
        if not limits:
            return SUCCESS
        attached: dict[str, str] = {}
        try:
            for other in node.pods.values():
                self._attachable(other.pod, csi_node, False, attached)
        except _LookupError as exc:
            return Status(Code.ERROR, str(exc))
        attached_count: dict[str, int] = {}
        for unique, key in attached.items():
            new.pop(unique, None)  # a volume already attached for another pod costs nothing more
            attached_count[key] = attached_count.get(key, 0) + 1
        new_count: dict[str, int] = {}
        for key in new.values():
            new_count[key] = new_count.get(key, 0) + 1
        for key, count in new_count.items():
            limit = limits.get(key)
            if limit is not None and attached_count.get(key, 0) + count > limit:
                return Status.unschedulable(ERR_REASON_MAX_VOLUME_COUNT)
        return SUCCESS

    # --- counting ------------------------------------------------------------------------------

    def _attachable(self, pod: Pod, csi_node: CSINode | None, new_pod: bool, out: dict[str, str]) -> None:
        """Add ``driver/handle -> limit key`` for each of the pod's CSI (or migrated) volumes."""
        claims: Mapping[str, PersistentVolumeClaim] = self._handle.objects(PERSISTENT_VOLUME_CLAIMS)
        ns = pod.metadata.namespace
        for v in pod.spec.volumes:
            if v.persistent_volume_claim is not None:
                name, ephemeral = v.persistent_volume_claim.claim_name, False
            elif v.ephemeral is not None:
                name, ephemeral = ephemeral_claim_name(pod.metadata.name, v.name), True
            else:
                self._inline(v.name, v, pod, csi_node, out)
                continue
            if not name:
                raise _LookupError("PersistentVolumeClaim had no name")
            pvc = claims.get(f"{ns}/{name}")
            if pvc is None:
                if new_pod:
                    # The pod cannot run without its claim; an existing pod's missing claim is not counted.
                    raise _LookupError(f"looking up PVC {ns}/{name}: {claim_not_found(name)}")
                continue
            if ephemeral:
                err = owner_error(pod, pvc)
                if err is not None:
                    raise _LookupError(err)
            driver, handle = self._driver_info(csi_node, pvc)
            if driver and handle:
                out[f"{driver}/{handle}"] = attach_limit_key(driver)

    def _inline(self, name: str, v: Any, pod: Pod, csi_node: CSINode | None, out: dict[str, str]) -> None:
        plugin = inline_plugin(v)
        if plugin is None or csi_node is None:
            return  # not migratable, or migration is off on a node without CSINode
        try:
            handle = inline_handle(v)
        except TranslationError as exc:
            raise _LookupError(f"converting volume({name}) from inline to csi: {exc}") from None
        driver = CSI_DRIVER_OF[plugin]
        out[f"{driver}/{handle}"] = attach_limit_key(driver)

    def _driver_info(self, csi_node: CSINode | None, pvc: PersistentVolumeClaim) -> tuple[str, str]:
        pv_name = pvc.spec.volume_name
        pv: PersistentVolume | None = (
            self._handle.objects(PERSISTENT_VOLUMES).get(pv_name) if pv_name else None
        )
        if pv is None:
            return self._driver_info_from_class(csi_node, pvc)
        if pv.spec.csi is not None:
            return pv.spec.csi.driver, pv.spec.csi.volume_handle
        plugin = pv_plugin(pv)
        if plugin is None or csi_node is None:
            return "", ""
        try:
            return CSI_DRIVER_OF[plugin], pv_handle(pv)
        except TranslationError:
            return "", ""

    def _driver_info_from_class(
        self, csi_node: CSINode | None, pvc: PersistentVolumeClaim
    ) -> tuple[str, str]:
        # Without a class the claim binds immediately, so it is bound before scheduling: not counted.
        class_name = claim_class(pvc)
        sc: StorageClass | None = (
            self._handle.objects(STORAGE_CLASSES).get(class_name) if class_name else None
        )
        if sc is None:
            return "", ""
        provisioner = sc.provisioner
        driver = CSI_DRIVER_OF.get(provisioner)
        if driver is not None:
            if csi_node is None:
                return "", ""
            provisioner = driver
        return provisioner, f"{self._unbound_prefix}-{pvc.metadata.namespace}/{pvc.metadata.name}"

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent("CSINode", ActionType.ADD, "CSINodeAdd")),
            ClusterEventWithHint(ClusterEvent("CSINode", ActionType.UPDATE, "CSINodeUpdate")),
            ClusterEventWithHint(ASSIGNED_POD_DELETE),
            ClusterEventWithHint(NODE_ADD),
            ClusterEventWithHint(
                ClusterEvent("PersistentVolumeClaim", ActionType.ADD, "PersistentVolumeClaimAdd")
            ),
        ]


def node_limits(node: NodeInfo, csi_node: CSINode | None) -> dict[str, int]:
    """``getVolumeLimits``: the node's ``attachable-volumes-*`` allocatable, overridden by CSINode counts."""
    out: dict[str, int] = {}
    for name, q in node.node.status.allocatable.items():
        if name.startswith(_ATTACHABLE_PREFIX):
            try:
                out[name] = int_value_int64(q)
            except QuantityError:
                # An unreadable limit is taken as no room at all, never as no limit.
                out[name] = 0
    if csi_node is not None:
        for d in csi_node.spec.drivers:
            if d.allocatable is not None and d.allocatable.count is not None:
                out[attach_limit_key(d.name)] = d.allocatable.count
    return out


if TYPE_CHECKING:
    _pre_filter: type[PreFilterPlugin] = NodeVolumeLimits
    _filter: type[FilterPlugin] = NodeVolumeLimits
    _enqueue_extensions: type[EnqueueExtensions] = NodeVolumeLimits
