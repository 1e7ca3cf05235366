"""A scheduler on the bundled profile with Coscheduling's ``enablePreemption``, and gang pods."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from koordsched.api.core import Node, Pod
from koordsched.api.kinds import CLUSTER_NETWORK_TOPOLOGIES, POD_GROUPS
from koordsched.api.network_topology import ClusterNetworkTopology
from koordsched.api.podgroup import PodGroup
from koordsched.api.policy import PodDisruptionBudget
from koordsched.config.default_profile import default_profile_path
from koordsched.framework.types import PodInfo
from koordsched.plugins.coscheduling import Coscheduling
from koordsched.plugins.coscheduling.job_preemption import JobPreemption
from koordsched.plugins.registry import in_tree_registry
from koordsched.scheduler.scheduler import Scheduler
from tests.builders import BLOCK_LABEL, SPINE_LABEL, node, pod, spine_block_topology
from tests.plugins.defaultpreemption.helpers import Recorder
from tests.plugins.defaultpreemption.helpers import world as preemption_world

GANG = "gang.scheduling.koordinator.sh/"
LOW, MID, HIGH = 10, 50, 100


def profile(enable: bool = True, *, aware: bool = False) -> bytes:
    """The bundled profile with CoschedulingArgs ``enablePreemption`` (on or off), and
    ``awareNetworkTopology`` when ``aware`` (network-topology gangs)."""
    text = default_profile_path().read_text()
    marker = "    pluginConfig:\n"
    assert marker in text
    topology = ", awareNetworkTopology: true" if aware else ""
    args = (
        "      - name: Coscheduling\n"
        "        args: {apiVersion: kubescheduler.config.k8s.io/v1, kind: CoschedulingArgs,"
        f" enablePreemption: {'true' if enable else 'false'}{topology}}}\n"
    )
    return text.replace(marker, marker + args, 1).encode()


def world(
    nodes: Iterable[Node],
    pods: Iterable[Pod],
    pdbs: Iterable[PodDisruptionBudget] = (),
    *,
    enable: bool = True,
) -> tuple[Scheduler, Recorder]:
    return preemption_world(nodes, pods, pdbs, profile=profile(enable))


def coscheduling(sched: Scheduler) -> Coscheduling:
    found = sched.frameworks["koord-scheduler"].plugins["Coscheduling"]
    assert isinstance(found, Coscheduling)
    return found


def job_preemption(sched: Scheduler) -> JobPreemption:
    jp = coscheduling(sched).job_preemption
    assert jp is not None
    return jp


def cycle_message(sched: Scheduler, group: str) -> str:
    attempt = job_preemption(sched).attempts.get(group)
    return attempt.message if attempt is not None else ""


def member(
    name: str,
    cpu: str = "16",
    priority: int = HIGH,
    *,
    gang: str = "train",
    size: int = 2,
    annotations: Mapping[str, str] | None = None,
    **kw: Any,
) -> Pod:
    """A pending gang member (annotation gang ``gang`` of min-available ``size``)."""
    notes = {GANG + "name": gang, GANG + "min-available": str(size), **(annotations or {})}
    return pod(name, cpu, None, uid=f"uid-{name}", priority=priority, annotations=notes, **kw)


def victim(
    name: str,
    node: str,
    cpu: str = "16",
    priority: int = LOW,
    *,
    labels: Mapping[str, str] | None = None,
    **kw: Any,
) -> Pod:
    """A running pod."""
    kw.setdefault("status", {"phase": "Running"})
    return pod(name, cpu, None, uid=f"uid-{name}", node_name=node, priority=priority, labels=labels, **kw)


def run_until_failure(sched: Scheduler) -> PodInfo:
    """Schedule queued pods in queue order until one fails; that pod (the trigger)."""
    while True:
        info = sched.queue.pop()
        assert info is not None, "every pod fitted"
        if sched.schedule_one(info) is None:
            return info


def failure(sched: Scheduler, port: Recorder, name: str) -> str:
    return port.failures.get(name, "")


# --- network-topology gangs (spec A.7) ------------------------------------------------------------

TOPOLOGY_SPEC = "gang.scheduling.koordinator.sh/network-topology-spec"
MUST_GATHER_SPINE = '{"gatherStrategy":[{"layer":"SpineLayer","strategy":"MustGather"}]}'


def topology_member(name: str, cpu: str = "16", priority: int = HIGH, *, group: str = "job") -> Pod:
    """A pending member of PodGroup ``group``."""
    labels = {"pod-group.scheduling.sigs.k8s.io": group}
    return pod(name, cpu, None, uid=f"uid-{name}", priority=priority, labels=labels)


def topology_world(
    layout: Mapping[str, tuple[str, str]],
    pods: Iterable[Pod],
    *,
    members: int,
    node_cpu: str | Mapping[str, str] = "16",
    spec: str = MUST_GATHER_SPINE,
) -> tuple[Scheduler, Recorder]:
    """Nodes of ``layout`` (name -> (spine, block)) labelled for ``spine_block_topology``, each of
    ``node_cpu`` (or its own from a mapping), the tree manager on, PodGroup ``job`` of ``members``
    with the topology ``spec``, Coscheduling with ``enablePreemption`` and ``awareNetworkTopology``."""

    def cpu(name: str) -> str:
        return node_cpu if isinstance(node_cpu, str) else node_cpu[name]

    nodes = [
        node(name, cpu(name), "256Gi", labels={SPINE_LABEL: s, BLOCK_LABEL: b})
        for name, (s, b) in layout.items()
    ]
    group = msgspec.convert(
        {
            "metadata": {"name": "job", "namespace": "default", "annotations": {TOPOLOGY_SPEC: spec}},
            "spec": {"minMember": members},
        },
        PodGroup,
    )
    topology = msgspec.convert(spine_block_topology(), ClusterNetworkTopology)
    objects = [
        (CLUSTER_NETWORK_TOPOLOGIES.kind, "default", topology),
        (POD_GROUPS.kind, "default/job", group),
    ]
    return preemption_world(
        nodes,
        pods,
        profile=profile(aware=True),
        registry=in_tree_registry(network_topology_manager=True),
        objects=objects,
    )
