"""The gang cache: gangs by id, fed by pod events and PodGroup objects (Koordinator's GangCache).

Pod events arrive through ``on_pod`` (the plugin is a pod-event listener), for every pod,
bound or not, before the queue sees the pod, so a pod already counts as a child of its gang
when PreEnqueue asks. PodGroups are read from the handle's store when a gang is looked up:
a new object version (a new Struct) re-reads the spec.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping

from koordsched.api.core import Pod
from koordsched.api.podgroup import PodGroup
from koordsched.framework.types import PodInfo
from koordsched.plugins.coscheduling.gang import (
    Gang,
    GangGroup,
    GangSpecError,
    from_pod_group,
    gang_id_of,
    spec_from_pod,
    spec_from_pod_group,
)

log = logging.getLogger(__name__)


class GangCache:
    def __init__(
        self,
        pod_groups: Mapping[str, PodGroup],
        default_timeout: float,
        now: Callable[[], float],
    ) -> None:
        self._pod_groups = pod_groups
        self.default_timeout = default_timeout
        self._now = now
        self._gangs: dict[str, Gang] = {}
        self._groups: dict[str, GangGroup] = {}
        #: gang ids once satisfied (a member bound): irreversible, kept apart from the group so a
        #: group made later (a PodGroup seen after its bound pods) still knows it.
        self._satisfied: set[str] = set()

    def __iter__(self) -> Iterator[Gang]:
        for gid in list(self._gangs):
            gang = self.get(gid)
            if gang is not None:
                yield gang

    def __len__(self) -> int:
        return len(self._gangs)

    # --- lookups ---------------------------------------------------------------------------------

    def get(self, gang_id: str) -> Gang | None:
        gang = self._gangs.get(gang_id)
        if gang is None:
            pg = self._pod_groups.get(gang_id)
            if pg is None:
                return None
            # A PodGroup without pods yet is still a gang (Koordinator creates it on PodGroup add).
            gang = self._gangs[gang_id] = Gang(gang_id, pod_group_based=True)
        if gang.pod_group_based:
            self._refresh(gang)
        return gang

    def _refresh(self, gang: Gang) -> None:
        pg = self._pod_groups.get(gang.id)
        if pg is gang.source:
            return
        gang.source = pg
        if pg is None:
            gang.spec, gang.init_error = None, ""
            return
        try:
            gang.spec = spec_from_pod_group(pg, gang.id, self.default_timeout)
        except GangSpecError as err:
            # As for an annotation gang: not initialised, the reason shown on every member.
            reason = f"PodGroup {gang.id}: {err}"
            if gang.init_error != reason:
                log.warning("gang %s not initialised: %s", gang.id, reason)
            gang.spec, gang.init_error = None, reason
            return
        gang.init_error = ""
        gang.create_time = pg.metadata.creation_timestamp or ""

    def group(self, gang: Gang) -> GangGroup:
        gid = gang.group_id()
        group = self._groups.get(gid)
        if group is None:
            group = self._groups[gid] = GangGroup(gid, last_schedule_time=self._now())
        if not group.once_satisfied and gang.spec is not None:
            group.once_satisfied = any(g in self._satisfied for g in gang.spec.group)
        return group

    def group_gangs(self, gang: Gang) -> list[tuple[str, Gang | None]]:
        """Every gang id of ``gang``'s group with its gang (None when not in the cache)."""
        ids = gang.spec.group if gang.spec is not None else (gang.id,)
        return [(gid, gang if gid == gang.id else self.get(gid)) for gid in ids]

    def total_children(self, gang: Gang) -> int:
        """Koordinator's totalChildrenNum summed over the group's gangs (those known)."""
        return sum(
            g.spec.total_children for _, g in self.group_gangs(gang) if g is not None and g.spec is not None
        )

    # --- pod events ------------------------------------------------------------------------------

    def on_pod(self, old: Pod | None, new: Pod | None) -> Gang | None:
        """Record a pod change; returns the gang that gained a child (None otherwise)."""
        old_id = gang_id_of(old) if old is not None else ""
        new_id = gang_id_of(new) if new is not None else ""
        if old is not None and old_id and old_id != new_id:
            self._remove_child(old_id, old.identity)
        if new is None:
            if old is not None and old_id:
                self._remove_child(old_id, old.identity)
            return None
        if not new_id:
            return None
        if new.status.phase in ("Succeeded", "Failed"):
            self._remove_child(new_id, new.identity)
            ended = self._gangs.get(new_id)
            if ended is not None:
                ended.finished[new.identity] = new.status.phase
            return None
        gang = self._gangs.get(new_id)
        if gang is None:
            gang = self._gangs[new_id] = Gang(new_id, pod_group_based=from_pod_group(new))
        if not gang.pod_group_based and gang.spec is None:
            self._init_from_pod(gang, new)
        uid = new.identity
        added = uid not in gang.children
        gang.children[uid] = new
        if added:
            gang.shells[uid] = PodInfo(new, {})
        if new.spec.node_name:
            gang.bound[uid] = new
            gang.waiting.pop(uid, None)
            self.mark_satisfied(gang)
        return gang if added else None

    def _init_from_pod(self, gang: Gang, pod: Pod) -> None:
        try:
            gang.spec = spec_from_pod(pod, gang.id, self.default_timeout)
        except GangSpecError as err:
            reason = f"pod {pod.metadata.namespace}/{pod.metadata.name}: {err}"
            if gang.init_error != reason:
                log.warning("gang %s not initialised: %s", gang.id, reason)
            gang.init_error = reason
            return
        gang.init_error = ""
        gang.create_time = pod.metadata.creation_timestamp or ""

    def _remove_child(self, gang_id: str, uid: str) -> None:
        gang = self._gangs.get(gang_id)
        if gang is None:
            return
        gang.children.pop(uid, None)
        gang.shells.pop(uid, None)
        gang.waiting.pop(uid, None)
        gang.bound.pop(uid, None)
        gang.finished.pop(uid, None)
        group = self._groups.get(gang.group_id())
        if group is not None:
            group.child_round.pop(uid, None)
            group.child_time.pop(uid, None)
        if not gang.children and not gang.pod_group_based:
            # An annotation gang lives as long as its pods.
            del self._gangs[gang_id]
            self._satisfied.discard(gang_id)
        elif not gang.children and gang.pod_group_based and gang_id not in self._pod_groups:
            del self._gangs[gang_id]

    def mark_satisfied(self, gang: Gang) -> None:
        self._satisfied.add(gang.id)
        if gang.spec is not None:
            self.group(gang).once_satisfied = True

    def once_satisfied(self, gang: Gang) -> bool:
        return self.group(gang).once_satisfied if gang.spec is not None else gang.id in self._satisfied
