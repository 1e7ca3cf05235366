"""Small plugins for scenarios the in-tree plugins cannot stage on demand.

A Permit plugin that holds pods (alone, or until a gang of a given size has arrived) and a
PreBind plugin that writes an annotation. They run next to the in-tree plugins, through the
same ``simulate`` path, so what is tested is the simulator's handling of Wait and of the
binding plan, not the fakes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Handle, WaitingPod
from koordsched.framework.registry import PluginSpec, Registry
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.framework.types import BindingPlan, PodInfo
from koordsched.plugins.registry import in_tree_registry

GANG_LABEL = "test.koordsched.io/gang-size"
ANNOTATION = "test.koordsched.io/bound-to"


class HoldAtPermit:
    """Waits pods labelled with a gang size until that many are waiting, then allows them all.

    A pod labelled ``test.koordsched.io/gang-size: "0"`` waits forever.
    """

    name = "HoldAtPermit"

    def __init__(self, args: Any, handle: Handle) -> None:
        self.handle = handle

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        size = pod.pod.metadata.labels.get(GANG_LABEL)
        if size is None:
            return SUCCESS, 0.0
        waiting: list[WaitingPod] = []
        self.handle.iterate_waiting_pods(waiting.append)
        if int(size) and len(waiting) + 1 >= int(size):
            for wp in waiting:
                wp.allow(self.name)
            return SUCCESS, 0.0
        return Status(Code.WAIT), 600.0


class AnnotateNode:
    """PreBind: writes the chosen node into the binding's annotations, as device plugins write allocations."""

    name = "AnnotateNode"

    def __init__(self, args: Any, handle: Handle) -> None:
        pass

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str, plan: BindingPlan) -> Status:
        plan.annotations[ANNOTATION] = node_name
        return SUCCESS


def registry() -> Registry:
    return in_tree_registry().merge(Registry([PluginSpec.of(HoldAtPermit), PluginSpec.of(AnnotateNode)]))


PROFILE = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
profiles:
- schedulerName: koord-scheduler
  plugins:
    permit: {enabled: [{name: HoldAtPermit}]}
    preBind: {enabled: [{name: AnnotateNode}]}
"""


def write_profile(tmp_path: Path) -> Path:
    path = tmp_path / "profile.yaml"
    path.write_text(PROFILE)
    return path
