"""Values that flow between the queue, the cache and the plugins."""

from __future__ import annotations

import sys
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from koordsched.api.core import Pod

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
#: Default timeout for a pod waiting at Permit (kube-scheduler's maxTimeout is 15 min).
MAX_PERMIT_TIMEOUT = 15 * 60.0
_NO_PLUGINS: frozenset[str] = frozenset()


class PodInfo:
    """A pod with everything derived from its spec that the scheduler reads more than once.

    Parsed once when the pod enters the queue or the cache, so plugins never re-parse
    quantities or affinity on the hot path. Queue bookkeeping lives here too, as in
    kube-scheduler's QueuedPodInfo.
    """

    __slots__ = (
        "_extra",
        "attempts",
        "gated",
        "gating_message",
        "gating_plugin",
        "initial_attempt_timestamp",
        "key",
        "pod",
        "preemption_policy",
        "priority",
        "requests",
        "timestamp",
        "uid",
        "unschedulable_plugins",
    )

    def __init__(self, pod: Pod, requests: dict[str, int], priority: int = 0) -> None:
        self.pod = pod
        # Interned: every PodInfo of a pod (pending, then bound) and every record naming it (the
        # simulator's attempts, the loader's keys) then hold one string.
        self.key = sys.intern(f"{pod.metadata.namespace}/{pod.metadata.name}")
        self.uid = pod.identity
        self.requests = requests
        self.priority = priority
        #: ``spec.preemptionPolicy``, else its PriorityClass's (as the Priority admission plugin sets it).
        self.preemption_policy: str | None = pod.spec.preemption_policy
        self.timestamp = 0.0
        self.initial_attempt_timestamp: float | None = None
        self.attempts = 0
        #: Replaced, never changed in place: every PodInfo starts with the one empty set.
        self.unschedulable_plugins: AbstractSet[str] = _NO_PLUGINS
        self.gated = False
        self.gating_plugin: str | None = None
        #: What the gating PreEnqueue plugin said (e.g. a gang's "not collect enough").
        self.gating_message = ""
        self._extra: dict[str, Any] | None = None

    @property
    def extra(self) -> dict[str, Any]:
        """Per-plugin parsed data keyed by plugin name (e.g. parsed device requests).

        Created on first use: most pods never need one, and a large cluster holds a PodInfo
        per bound pod (an empty dict is 64 bytes)."""
        extra = self._extra
        if extra is None:
            extra = self._extra = {}
        return extra

    @extra.setter
    def extra(self, value: dict[str, Any]) -> None:
        self._extra = value

    def keep_extra(self, earlier: PodInfo) -> None:
        """Take over ``earlier``'s parsed data (the same pod, unchanged): its dict, when it holds any."""
        self._extra = earlier._extra or None

    def __repr__(self) -> str:
        return f"PodInfo({self.key})"


class ActionType(Enum):
    ADD = "Add"
    UPDATE = "Update"
    DELETE = "Delete"


@dataclass(frozen=True)
class ClusterEvent:
    """A kind of change in the cluster that may make a rejected pod schedulable."""

    resource: str  # "Node", "Pod", "AssignedPod", "PriorityClass", or a CRD kind
    action: ActionType
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or f"{self.resource}{self.action.value}"


#: Well-known events, labelled as kube-scheduler labels them in queue metrics.
NODE_ADD = ClusterEvent("Node", ActionType.ADD, "NodeAdd")
NODE_UPDATE = ClusterEvent("Node", ActionType.UPDATE, "NodeUpdate")
NODE_DELETE = ClusterEvent("Node", ActionType.DELETE, "NodeDelete")
ASSIGNED_POD_ADD = ClusterEvent("AssignedPod", ActionType.ADD, "AssignedPodAdd")
ASSIGNED_POD_UPDATE = ClusterEvent("AssignedPod", ActionType.UPDATE, "AssignedPodUpdate")
ASSIGNED_POD_DELETE = ClusterEvent("AssignedPod", ActionType.DELETE, "AssignedPodDelete")
UNSCHEDULED_POD_UPDATE = ClusterEvent("Pod", ActionType.UPDATE, "UnscheduledPodUpdate")


@dataclass
class PreFilterResult:
    """A PreFilter's narrowing of the candidate nodes; ``None`` node_names means all nodes."""

    node_names: set[str] | None = None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return PreFilterResult(set(other.node_names))
        return PreFilterResult(self.node_names & other.node_names)


@dataclass
class PostFilterResult:
    """A PostFilter's outcome: the node to nominate (``""`` clears a nomination; a plugin returns
    no result at all to leave it as it is) and, for preemption, the pods to evict there."""

    nominated_node_name: str = ""
    victims: list[PodInfo] = field(default_factory=list)
    #: Job-level preemption (Coscheduling): the other members and the node each is nominated to
    #: (``""`` clears a member's nomination). With it, each victim's event names its own node.
    members: list[tuple[PodInfo, str]] = field(default_factory=list)
    #: The victims' ``DisruptionTarget`` message ("": kube-scheduler's own).
    victim_message: str = ""


@dataclass
class BindingPlan:
    """What the binding cycle sends: annotations merged by PreBind plugins, carried on the Binding,
    and labels merged onto the pod (a Binding carries no labels: the kube port patches them first)."""

    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
