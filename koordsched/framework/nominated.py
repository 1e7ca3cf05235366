"""Nominated pods in filtering, and pods placed or removed hypothetically on one node.

kube-scheduler's ``RunFilterPluginsWithNominatedPods``: a node that pods of equal or higher
priority were nominated to (by an earlier preemption) is checked twice: once as if those pods
were already there, and once without them (they may not end up there). It fits only if both
pass. The preemption dry run uses the same check on a node with its victims taken off.

The snapshot is the cache (see docs/architecture.md): there is no NodeInfo copy to change, so a
hypothetical change is made on the node's row itself, through ``Snapshot.add_pod`` /
``remove_pod`` (every listener follows: DeviceShare's devices, NodeNUMAResource's cpusets, the
topology counts), together with the PreFilter AddPod/RemovePod extensions on a cloned cycle
state, as upstream does; :class:`Trial` undoes the row changes before the cycle goes on. The
extensions are called while the pod is off the row, so a plugin that reads what a pod holds
from its listener state (NodeNUMAResource) finds nothing to count twice.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

import numpy as np

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.diagnosis import Diagnosis
from koordsched.framework.interface import Handle, Rows
from koordsched.framework.plugin_calls import PluginCalls
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SUCCESS, Code, PluginError, Status
from koordsched.framework.steps import BatchFilter, FilterStep
from koordsched.framework.types import PodInfo


class ClusterPods(Protocol):
    """What the framework needs to know of pods beyond the snapshot (the scheduler implements it)."""

    def any_nominated(self) -> bool:
        """Whether any pod is nominated to any node (the common answer, False, costs nothing more)."""

    def nominated_on(self, node_name: str) -> Sequence[PodInfo]:
        """The pods nominated to ``node_name``."""

    def nominated_nodes(self) -> Collection[str]:
        """The nodes some pod is nominated to."""

    def node_of(self, uid: str) -> str | None:
        """The node the pod is nominated to, if any."""

    def assumed(self, uid: str) -> bool:
        """Whether the pod is assumed (its bind not confirmed yet)."""


class Framework(Protocol):
    """The parts of :class:`~koordsched.framework.runtime.Framework` used here."""

    handle: Handle
    filters: list[FilterStep]
    cluster_pods: ClusterPods
    calls: PluginCalls

    def run_pre_filter_add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node_name: str
    ) -> Status: ...
    def run_pre_filter_remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node_name: str
    ) -> Status: ...
    def pre_filter_extensions_active(self, state: CycleState) -> bool: ...
    def filter_rows(
        self, state: CycleState, pod: PodInfo, rows: Rows, diagnosis: Diagnosis, *, nominees: bool = True
    ) -> Rows: ...


class NoClusterPods:
    """No nominations and no assumed pods: a framework used without a scheduler (tests, tools)."""

    def any_nominated(self) -> bool:
        return False

    def nominated_on(self, node_name: str) -> Sequence[PodInfo]:
        return ()

    def nominated_nodes(self) -> Collection[str]:
        return ()

    def node_of(self, uid: str) -> str | None:
        return None

    def assumed(self, uid: str) -> bool:
        return False


class Trial:
    """Pods added to and removed from one node's row; :meth:`undo` puts the row back as it was."""

    __slots__ = ("_added", "_fw", "_removed", "info", "state")

    def __init__(self, fw: Framework, state: CycleState, info: NodeInfo) -> None:
        self._fw = fw
        #: A clone: the extensions' changes must not reach the cycle's own state.
        self.state = state.clone()
        self.info = info
        self._added: list[PodInfo] = []
        self._removed: list[PodInfo] = []

    def add(self, pod: PodInfo, other: PodInfo) -> Status:
        status = self._fw.run_pre_filter_add_pod(self.state, pod, other, self.info.name)
        self._fw.handle.snapshot.add_pod(self.info, other)
        self._added.append(other)
        return status

    def remove(self, pod: PodInfo, other: PodInfo) -> Status:
        self._fw.handle.snapshot.remove_pod(self.info, other)
        self._removed.append(other)
        return self._fw.run_pre_filter_remove_pod(self.state, pod, other, self.info.name)

    def put_back(self, pod: PodInfo, other: PodInfo) -> Status:
        """Add back a pod this trial removed (a reprieved victim)."""
        self._removed.remove(other)
        status = self._fw.run_pre_filter_add_pod(self.state, pod, other, self.info.name)
        self._fw.handle.snapshot.add_pod(self.info, other)
        return status

    def undo(self) -> None:
        snap = self._fw.handle.snapshot
        for other in reversed(self._added):
            if other.uid in self.info.pods:
                snap.remove_pod(self.info, other)
        for other in self._removed:
            if other.uid not in self.info.pods:
                snap.add_pod(self.info, other)
        self._added.clear()
        self._removed.clear()


def _verdict(fw: Framework, step: FilterStep, state: CycleState, pod: PodInfo, info: NodeInfo) -> Status:
    """One Filter plugin's verdict on one node; a failing plugin's Error, named, is its verdict."""
    name = step.plugin.name
    try:
        if isinstance(step, BatchFilter):
            one = np.asarray([info.row], dtype=np.int64)
            code = int(fw.calls.value("Filter", name, False, step.plugin.filter_batch, state, pod, one)[0])
            return SUCCESS if code == 0 else step.plugin.explain(state, pod, code)
        return fw.calls.status("Filter", name, False, step.plugin.filter, state, pod, info)
    except PluginError as err:
        return err.status


def run_filters(fw: Framework, state: CycleState, pod: PodInfo, info: NodeInfo) -> Status:
    """Every Filter plugin on one node in profile order: the first rejection (upstream's RunFilterPlugins)."""
    for step in fw.filters:
        if step.plugin.name in state.skip_filter:
            continue
        status = _verdict(fw, step, state, pod, info)
        if not status.ok:
            return status.with_plugin(step.plugin.name)
    return SUCCESS


def filter_verdicts(
    fw: Framework, state: CycleState, pod: PodInfo, info: NodeInfo
) -> list[tuple[str, Status]]:
    """Every Filter plugin's verdict on one node, without stopping at a rejection (``--explain``)."""
    skip = state.skip_filter
    return [
        (
            step.plugin.name,
            Status(Code.SKIP) if step.plugin.name in skip else _verdict(fw, step, state, pod, info),
        )
        for step in fw.filters
    ]


def nominees(fw: Framework, state: CycleState, pod: PodInfo, info: NodeInfo) -> list[PodInfo]:
    """Pods nominated to ``info`` that ``pod`` must leave room for: equal or higher priority, not
    itself, not of its own job (``CycleState.same_job_nominees``)."""
    same_job = state.same_job_nominees
    return [
        p
        for p in fw.cluster_pods.nominated_on(info.name)
        if p.priority >= pod.priority
        and p.uid != pod.uid
        and p.uid not in info.pods
        and p.uid not in same_job
    ]


def run_filters_with_nominated(fw: Framework, state: CycleState, pod: PodInfo, info: NodeInfo) -> Status:
    """Upstream's two passes: with the node's nominees added, then (if there were any) without."""
    nominated = nominees(fw, state, pod, info) if fw.cluster_pods.any_nominated() else []
    if nominated:
        trial = Trial(fw, state, info)
        try:
            for other in nominated:
                s = trial.add(pod, other)
                if not s.ok:
                    return s
            status = run_filters(fw, trial.state, pod, info)
        finally:
            trial.undo()
        if not status.ok:
            return status
    return run_filters(fw, state, pod, info)


def recheck_with_nominated(
    fw: Framework, state: CycleState, pod: PodInfo, feasible: Rows, reject: RejectFn
) -> Rows:
    """Of rows that passed the filters, those that still pass with their nominees added.

    The first pass of upstream's two (with nominees) runs here after the second: a node passes
    only if both do either way; a node that fails with its nominees is reported with that reason.
    """
    snap = fw.handle.snapshot
    # Few nodes hold nominees: look at those among the feasible rows, not at every row.
    rows = [
        info.row for name in fw.cluster_pods.nominated_nodes() if (info := snap.by_name.get(name)) is not None
    ]
    if not rows:
        return feasible
    candidates = np.intersect1d(feasible, np.asarray(rows, dtype=np.int64))
    if not fw.pre_filter_extensions_active(state):
        return _recheck_together(fw, state, pod, feasible, candidates, reject)
    dropped: list[int] = []
    for row in candidates.tolist():
        info = snap.infos[row]
        nominated = nominees(fw, state, pod, info)
        if not nominated:
            continue
        trial = Trial(fw, state, info)
        try:
            status = SUCCESS
            for other in nominated:
                status = trial.add(pod, other)
                if not status.ok:
                    break
            if status.ok:
                status = run_filters(fw, trial.state, pod, info)
        finally:
            trial.undo()
        if status.ok:
            continue
        if status.code is Code.ERROR:
            raise NominatedFilterError(status)
        reject(row, status)
        dropped.append(row)
    if not dropped:
        return feasible
    return feasible[~np.isin(feasible, np.asarray(dropped, dtype=np.int64))]


def _recheck_together(
    fw: Framework, state: CycleState, pod: PodInfo, feasible: Rows, candidates: Rows, reject: RejectFn
) -> Rows:
    """:func:`recheck_with_nominated` when no PreFilter state follows added pods: every node's
    nominees are added at once and the filters run once over those rows (no row's filters read
    another row's pods)."""
    snap = fw.handle.snapshot
    added: list[tuple[NodeInfo, PodInfo]] = []
    rows: list[int] = []
    diagnosis = Diagnosis(num_all_nodes=len(candidates))
    try:
        for row in candidates.tolist():
            info = snap.infos[row]
            nominated = nominees(fw, state, pod, info)
            if not nominated:
                continue
            for other in nominated:
                snap.add_pod(info, other)
                added.append((info, other))
            rows.append(row)
        if not rows:
            return feasible
        passed = fw.filter_rows(state, pod, np.asarray(rows, dtype=np.int64), diagnosis, nominees=False)
        statuses = diagnosis.node_statuses(state, pod, snap)
    finally:
        for info, other in reversed(added):
            snap.remove_pod(info, other)
    dropped = sorted(set(rows) - set(passed.tolist()))
    if not dropped:
        return feasible
    for row in dropped:
        reject(row, statuses[snap.infos[row].name])
    return feasible[~np.isin(feasible, np.asarray(dropped, dtype=np.int64))]


class RejectFn(Protocol):
    def __call__(self, row: int, status: Status) -> None: ...


class NominatedFilterError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status
