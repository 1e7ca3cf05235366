"""Which pods a job-level preemption may evict, the "job" each belongs to, and what a node's
victims cost (Koordinator v1.7 ``preemption.go``, spec B.1 and B.3 step 6).

A victim is a bound pod of strictly lower priority than the trigger pod that neither label
marks as non-preemptible. As in our per-pod preemption, an assumed pod (its allocation lives in
the plugins that reserved it) and a reserve pod (it stands for a Reservation) are never victims.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from koordsched.api.core import Pod
from koordsched.api.reservation import is_reserve_pod
from koordsched.framework.interface import Handle
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.types import PodInfo

#: A pod with this label set to "true" is never a victim.
LABEL_DISABLE_PREEMPTIBLE = "scheduling.koordinator.sh/disable-preemptible"
#: A pod with this label set to "false" is never a victim.
LABEL_QUOTA_PREEMPTIBLE = "quota.scheduling.koordinator.sh/preemptible"
#: The victim's job for costing; victims without it share the job "" (Koordinator's quirk).
LABEL_JOB_KEY = "scheduling.koordinator.sh/questioned-object-key"


def job_of(pod: PodInfo) -> str:
    labels = pod.pod.metadata.labels
    return labels.get(LABEL_JOB_KEY, "") if labels else ""


def preemptible_by(preemptor: PodInfo, other: PodInfo) -> bool:
    """Koordinator's victim rule: strictly lower priority, neither non-preemptible label."""
    if other.priority >= preemptor.priority:
        return False
    labels = other.pod.metadata.labels
    if not labels:
        return True
    return labels.get(LABEL_DISABLE_PREEMPTIBLE) != "true" and labels.get(LABEL_QUOTA_PREEMPTIBLE) != "false"


def potential_victims(handle: Handle, preemptor: PodInfo, info: NodeInfo) -> list[PodInfo]:
    """The pods on ``info`` the preemptor may evict, in the node's order."""
    return [
        p
        for p in info.pods.values()
        if preemptible_by(preemptor, p) and not handle.is_assumed(p.uid) and not is_reserve_pod(p.pod)
    ]


def terminating_by_preemption(pod: Pod) -> bool:
    """Deleted, with ``DisruptionTarget`` True for ``PreemptionByScheduler``: a victim leaving."""
    if not pod.metadata.deletion_timestamp:
        return False
    return any(
        c.type == "DisruptionTarget" and c.status == "True" and c.reason == "PreemptionByScheduler"
        for c in pod.status.conditions
    )


def priority_ranks(victims: Iterable[PodInfo]) -> dict[int, int]:
    """Each distinct victim priority's rank, ascending from 0 (the lowest)."""
    return {p: i for i, p in enumerate(sorted({v.priority for v in victims}))}


def job_priorities(victims: Iterable[PodInfo]) -> dict[str, int]:
    """Each victim job's priority: that of its first victim seen."""
    out: dict[str, int] = {}
    for v in victims:
        out.setdefault(job_of(v), v.priority)
    return out


def node_cost(victims: Sequence[PodInfo], ranks: Mapping[int, int]) -> int:
    """The sum of the ranks of the node's distinct victim jobs, each at its first victim's priority."""
    return sum(ranks[p] for p in job_priorities(victims).values())


def reprieve_order(victims: Sequence[PodInfo]) -> list[PodInfo]:
    """The order victims are tried for a reprieve: priority descending, then job, then name."""
    return sorted(victims, key=lambda v: (-v.priority, job_of(v), v.pod.metadata.name))
