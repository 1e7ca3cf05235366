"""The descheduler's view of the cluster, read from a scheduler's cache (:class:`SchedulerHandle`).

Both backends feed a :class:`~koordsched.scheduler.scheduler.Scheduler` with the cluster's
events (the simulator from manifests, the kube backend from its reflectors); the descheduler
reads the bound pods per node, the NodeMetrics and priority classes from it, and asks it
whether a pod would fit elsewhere. One cache, so what the descheduler judges and what the
scheduler will do agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from koordsched.api.core import Node, Pod
from koordsched.api.kinds import DEVICES, NODE_METRICS
from koordsched.api.slo import NodeMetric
from koordsched.descheduler.framework import Evictor
from koordsched.descheduler.migration.filters import Workload, workload_of
from koordsched.descheduler.nodefit import SchedulerNodeFit
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare import GpuCapacities, gpu_capacities
from koordsched.scheduler.scheduler import Scheduler


@dataclass
class SchedulerHandle:
    sched: Scheduler
    evictor_impl: Evictor | None = None

    def __post_init__(self) -> None:
        self._fit = SchedulerNodeFit(self.sched)
        #: Snapshot generation -> the bound pods by workload (limits ask per job, per tick).
        self._by_workload: tuple[int, dict[Workload, list[Pod]]] = (-1, {})

    def nodes(self) -> list[Node]:
        return [info.node for info in self.sched.cache.snapshot.infos]

    def pods_on(self, node: str) -> list[Pod]:
        info = self.sched.cache.snapshot.by_name.get(node)
        if info is None:
            return []
        return [pi.pod for pi in info.pods.values() if pi.pod.spec.node_name == node]

    def pod_infos_on(self, node: str) -> list[PodInfo]:
        """The bound pods of ``node`` as the scheduler holds them (requests parsed, allocations)."""
        info = self.sched.cache.snapshot.by_name.get(node)
        if info is None:
            return []
        return [pi for pi in info.pods.values() if pi.pod.spec.node_name == node]

    def gpus(self) -> GpuCapacities:
        """Each node's healthy GPUs from its Device CR, as DeviceShare reads them."""
        store = self.sched.objects.get(DEVICES.kind)
        return gpu_capacities(store.values()) if store is not None else {}

    def all_pods(self) -> list[Pod]:
        snap = self.sched.cache.snapshot
        return [p for info in snap.infos for p in self.pods_on(info.name)]

    def node_metric(self, node: str) -> NodeMetric | None:
        store = self.sched.objects.get(NODE_METRICS.kind)
        obj = store.get(node) if store is not None else None
        return obj if isinstance(obj, NodeMetric) else None

    def wall(self) -> float:
        return self.sched.clock.wall()

    @property
    def evictor(self) -> Evictor:
        if self.evictor_impl is None:
            raise RuntimeError("SchedulerHandle.evictor_impl was not set")
        return self.evictor_impl

    @property
    def node_fit(self) -> SchedulerNodeFit:
        return self._fit

    # --- what the MigrationController's filters and limits read ---------------------------------

    def node_labels(self, node: str) -> dict[str, str] | None:
        info = self.sched.cache.snapshot.by_name.get(node)
        return dict(info.node.metadata.labels) if info is not None else None

    def fits_elsewhere(self, pod: Pod) -> bool:
        """Some node other than the pod's own would take its replacement now."""
        others = [info.name for info in self.sched.cache.snapshot.infos if info.name != pod.spec.node_name]
        return bool(self._fit.fits(pod, others))

    def priority_of_class(self, name: str) -> int | None:
        pc = self.sched.priorities.get(name)
        return pc.value if pc is not None else None

    def _workload_pods(self, workload: Workload) -> list[Pod]:
        gen = self.sched.cache.snapshot.generation
        if self._by_workload[0] != gen:
            index: dict[Workload, list[Pod]] = {}
            for p in self.all_pods():
                w = workload_of(p)
                if w is not None:
                    index.setdefault(w, []).append(p)
            self._by_workload = (gen, index)
        return self._by_workload[1].get(workload, [])

    def replicas_of(self, workload: Workload) -> int | None:
        """The workload's pods on nodes (the controller's own replica count is not read)."""
        return len(self._workload_pods(workload)) or None

    def unavailable_of(self, workload: Workload) -> int:
        """The workload's bound pods that are not running, or report Ready=False. (A manifest's pod
        without a status is taken as running: the simulator's input often has none.)"""
        out = 0
        for p in self._workload_pods(workload):
            not_ready = any(c.type == "Ready" and c.status != "True" for c in p.status.conditions)
            if p.status.phase in ("Pending", "Failed", "Succeeded", "Unknown") or not_ready:
                out += 1
        return out
