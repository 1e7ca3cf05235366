"""Reservation and preemption (spec 4.3 PreFilter AddPod/RemovePod, Filter, PostFilter).

During a preemption dry run the victims taken off a node are recorded here, as Koordinator's
Reservation plugin records them: a victim allocated from a reservation gives its requests back
to *that* reservation (``preemptibleInRRs[node][reservation uid]``), any other victim to the
node (``preemptible[node]``). Filter then lets the pod use what a victim frees inside the
reservation it goes through, and never what a victim frees inside another one.

With ``enablePreemption`` the plugin's PostFilter preempts first (Koordinator's wrapper of
DefaultPreemption): the victims are pods of lower priority that are not labelled
``scheduling.koordinator.sh/disable-preemptible: "true"``, and a reserve pod may preempt too.
"""

from __future__ import annotations

from collections.abc import Mapping

from koordsched.api.reservation import is_reserve_pod
from koordsched.framework.reservations import holder_of
from koordsched.framework.types import PodInfo
from koordsched.plugins.defaultpreemption.args import DefaultPreemptionArgs
from koordsched.plugins.defaultpreemption.policy import DefaultPolicy
from koordsched.plugins.reservation.args import ReservationArgs

LABEL_DISABLE_PREEMPTIBLE = "scheduling.koordinator.sh/disable-preemptible"
ERR_PREEMPTION_FAILED = "node(s) preemption failed due to insufficient resources"

#: node -> resource -> amount victims free outside any reservation.
NodePreemptible = dict[str, dict[str, int]]
#: node -> reservation uid -> resource -> amount victims allocated from it free.
ReservedPreemptible = dict[str, dict[str, dict[str, int]]]


def _add(into: dict[str, int], requests: Mapping[str, int], sign: int) -> None:
    for name, amount in requests.items():
        left = into.get(name, 0) + sign * amount
        if left > 0:
            into[name] = left
        else:
            into.pop(name, None)


def record_victim(
    preemptible: NodePreemptible,
    in_rrs: ReservedPreemptible,
    victim: PodInfo,
    node: str,
    removed: bool,
) -> None:
    """RemovePod (``removed``) / AddPod: a victim taken off ``node`` or put back."""
    if is_reserve_pod(victim.pod):
        return  # a reservation is never a victim (no nesting), whoever runs the dry run
    holder = holder_of(victim)
    sign = 1 if removed else -1
    if holder is None:
        per = preemptible.setdefault(node, {})
        _add(per, victim.requests, sign)
        if not per:
            del preemptible[node]
        return
    by_holder = in_rrs.setdefault(node, {})
    per = by_holder.setdefault(holder, {})
    _add(per, victim.requests, sign)
    if not per:
        del by_holder[holder]
    if not by_holder:
        del in_rrs[node]


def preemptible_in_rr(in_rrs: ReservedPreemptible, node: str, uid: str) -> Mapping[str, int]:
    return in_rrs.get(node, {}).get(uid, {})


def held_in_rrs(in_rrs: ReservedPreemptible, node: str, skip: str | None) -> dict[str, int]:
    """What victims free inside reservations on ``node`` other than ``skip``: still theirs."""
    out: dict[str, int] = {}
    for uid, amounts in in_rrs.get(node, {}).items():
        if uid != skip:
            _add(out, amounts, 1)
    return out


def preemption_args(args: ReservationArgs) -> DefaultPreemptionArgs:
    """DefaultPreemption's args from ReservationArgs: unset values take v1beta3's defaults (10 %,
    100); v1 leaves them unset (QUIRK 21), which upstream's validation would refuse."""
    out = DefaultPreemptionArgs()
    if args.min_candidate_nodes_percentage is not None:
        out.min_candidate_nodes_percentage = args.min_candidate_nodes_percentage
    if args.min_candidate_nodes_absolute is not None:
        out.min_candidate_nodes_absolute = args.min_candidate_nodes_absolute
    return out


class ReservationPreemption(DefaultPolicy):
    """The preemption policy of Reservation's PostFilter: DefaultPreemption's, with fewer victims."""

    def potential_victim(self, pod: PodInfo, other: PodInfo) -> bool:
        return (
            other.priority < pod.priority
            and other.pod.metadata.labels.get(LABEL_DISABLE_PREEMPTIBLE) != "true"
            and not is_reserve_pod(other.pod)
        )
