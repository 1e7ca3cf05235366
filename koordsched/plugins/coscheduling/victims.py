"""What evicting some pods does to their gangs, for preemption (``VictimGroups``).

Koordinator's preemption does not look at gangs: it may evict one member of a running gang
and leave the rest holding their nodes below ``minMember``, a job that cannot make progress.
The preemption evaluator asks here which gangs a set of victims would break, ranks such
candidates after those that break none and, when it must break one, takes its other bound
members too (``docs/gangs.md``).
"""

from __future__ import annotations

from collections.abc import Sequence

from koordsched.api.core import Pod
from koordsched.framework.types import PodInfo
from koordsched.plugins.coscheduling.cache import GangCache
from koordsched.plugins.coscheduling.gang import gang_id_of


def groups_broken_by(cache: GangCache, victims: Sequence[PodInfo]) -> dict[str, list[Pod]]:
    """Gang id -> its other bound members, for each gang that holds at least its minimum of bound
    members now and would hold fewer without ``victims``. A gang already below its minimum is not
    broken again: it was not whole."""
    if not len(cache):
        return {}
    taken: dict[str, set[str]] = {}
    for victim in victims:
        gid = gang_id_of(victim.pod)
        if gid:
            taken.setdefault(gid, set()).add(victim.uid)
    out: dict[str, list[Pod]] = {}
    for gid, uids in taken.items():
        gang = cache.get(gid)
        if gang is None or gang.spec is None:
            continue
        held = len(gang.bound)
        left = held - sum(1 for uid in uids if uid in gang.bound)
        if held >= gang.spec.min_required > left:
            out[gid] = [pod for uid, pod in gang.bound.items() if uid not in uids]
    return out
