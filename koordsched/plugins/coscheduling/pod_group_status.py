"""What a PodGroup's status should say (Koordinator's PodGroup controller, spec 4.4).

Pure: the kube backend's controller compares the result with the object's status and writes
the difference. ``scheduled`` is the number of members bound, as the gang cache knows it.
"""

from __future__ import annotations

import msgspec

from koordsched.api.core import Pod
from koordsched.api.podgroup import (
    PHASE_FAILED,
    PHASE_FINISHED,
    PHASE_PENDING,
    PHASE_PRE_SCHEDULING,
    PHASE_RUNNING,
    PHASE_SCHEDULED,
    PHASE_SCHEDULING,
    PodGroup,
    PodGroupStatus,
)


def _occupied_by(pods: list[Pod]) -> str:
    """``<namespace>/<owner name>`` of the first pod's owners, sorted and joined (scheduler-plugins)."""
    first = pods[0]
    refs = sorted(f"{first.metadata.namespace}/{ref.name}" for ref in first.metadata.owner_references)
    return ",".join(refs)


def next_status(
    pg: PodGroup, pods: list[Pod], scheduled: int, finished: dict[str, str], now: str
) -> PodGroupStatus:
    """The status after one controller pass; ``finished`` maps uid -> phase of members that ended.

    Steps the phase machine until it settles, so one write carries the whole change.
    """
    status = msgspec.structs.replace(pg.status)
    minimum = pg.spec.min_member
    for _ in range(4):
        before = status.phase
        status = _step(status, minimum, pods, scheduled, finished, now)
        if status.phase == before:
            break
    return status


def _step(
    status: PodGroupStatus, minimum: int, pods: list[Pod], scheduled: int, finished: dict[str, str], now: str
) -> PodGroupStatus:
    replace = msgspec.structs.replace
    total = len(pods) + len(finished)
    if not status.phase:
        return replace(status, phase=PHASE_PENDING)
    if status.phase == PHASE_PENDING:
        if total >= minimum > 0:
            occupied = _occupied_by(pods) if pods else status.occupied_by
            return replace(status, phase=PHASE_PRE_SCHEDULING, occupied_by=occupied or status.occupied_by)
        return status
    running = sum(1 for p in pods if p.status.phase == "Running")
    succeeded = sum(1 for phase in finished.values() if phase == "Succeeded")
    failed = sum(1 for phase in finished.values() if phase == "Failed")
    status = replace(status, running=running, succeeded=succeeded, failed=failed, scheduled=scheduled)
    if total == 0:
        return replace(status, phase=PHASE_PENDING)
    phase = status.phase
    if scheduled < minimum:
        if phase in (PHASE_PRE_SCHEDULING, PHASE_SCHEDULING, PHASE_SCHEDULED):
            phase = PHASE_SCHEDULING
    elif phase in (PHASE_PRE_SCHEDULING, PHASE_SCHEDULING):
        phase = PHASE_SCHEDULED
    if phase == PHASE_SCHEDULED and running + succeeded >= minimum:
        phase = PHASE_RUNNING
    if failed > 0 and failed + running + succeeded >= minimum:
        phase = PHASE_FAILED
    if succeeded >= minimum:
        phase = PHASE_FINISHED
    start = status.schedule_start_time
    if phase == PHASE_SCHEDULING and not start:
        start = now
    return replace(status, phase=phase, schedule_start_time=start)
