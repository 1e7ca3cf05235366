"""Node fit through the scheduler itself: would the pod's replacement be placed on these nodes?

The replacement is the pod as its controller would create it again: unbound, same spec, a new
uid. It goes through the profile's PreFilter and every Filter (resources, affinity, taints,
spread, DeviceShare, NUMA, LoadAwareScheduling with its estimator...) exactly as a cycle would,
without Reserve, so nothing is assumed. A plugin error answers "does not fit": a pod is only
moved where the scheduler is known to accept it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import msgspec
import numpy as np

from koordsched.api.core import Pod
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.diagnosis import Diagnosis
from koordsched.framework.runtime import Framework
from koordsched.scheduler.podinfo import InvalidPodError, new_pod_info
from koordsched.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)

#: Appended to the uid (or key) of the pod a replacement stands for.
REPLACEMENT_SUFFIX = "-replacement"


def replacement_pod(pod: Pod) -> Pod:
    """The pod unbound, as its controller would recreate it (status and nodeName cleared)."""
    meta = msgspec.structs.replace(pod.metadata, uid=(pod.metadata.uid or pod.key) + REPLACEMENT_SUFFIX)
    spec = msgspec.structs.replace(pod.spec, node_name="")
    return msgspec.structs.replace(pod, metadata=meta, spec=spec, status=type(pod.status)())


class SchedulerNodeFit:
    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched

    def framework_for(self, pod: Pod) -> Framework:
        """The pod's own profile; a pod of another scheduler is judged by the first profile."""
        fws = self.sched.frameworks
        return fws.get(pod.spec.scheduler_name) or next(iter(fws.values()))

    def fits(self, pod: Pod, nodes: Sequence[str]) -> list[str]:
        snap = self.sched.cache.snapshot
        try:
            info = new_pod_info(replacement_pod(pod), self.sched.priorities)
        except InvalidPodError as err:
            log.info("pod %s cannot be re-created as it is: %s", pod.key, err)
            return []
        fw = self.framework_for(pod)
        state = CycleState()
        try:
            pre, status = fw.run_pre_filter(state, info)
            if not status.ok:
                return []
            allowed = pre.node_names if pre is not None else None
            rows = [
                snap.by_name[n].row for n in nodes if n in snap.by_name and (allowed is None or n in allowed)
            ]
            if not rows:
                return []
            feasible, _ = fw.find_feasible(
                state, info, np.asarray(rows, dtype=np.int64), len(rows), Diagnosis(num_all_nodes=snap.n)
            )
        except Exception as err:  # a plugin failure means "not known to fit", never a crash
            log.warning("node fit for pod %s failed: %s", pod.key, err)
            return []
        names = {snap.infos[int(r)].name for r in feasible}
        return [n for n in nodes if n in names]
