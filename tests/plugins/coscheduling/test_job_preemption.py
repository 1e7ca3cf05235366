"""Job-level preemption (Coscheduling ``enablePreemption``): the edge cases of Koordinator's
``preemption_test.go`` (spec B.6), each row naming the case it restates, plus our own rows
(labels, budgets, fewest jobs, never half a gang). The cycles run on the bundled profile."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from koordsched.api.core import Pod
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import Code, Status
from tests.builders import EIGHT_NODES, MANUAL_TWELVE_NODES, node, pod_info
from tests.plugins.coscheduling.job_helpers import (
    HIGH,
    LOW,
    MID,
    coscheduling,
    cycle_message,
    failure,
    job_preemption,
    member,
    run_until_failure,
    topology_member,
    topology_world,
    victim,
    world,
)
from tests.plugins.defaultpreemption.helpers import pdb

JOB = "scheduling.koordinator.sh/questioned-object-key"
ATTEMPTED = "preemption already attempted by default/{} with message {}"
TERMINATING = {
    "deletion_timestamp": "2026-05-01T00:00:00Z",
    "status": {
        "phase": "Running",
        "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}],
    },
}


def nodes(n: int = 2, cpu: str = "32") -> list[Pod]:
    return [node(f"node-{i}", cpu, "256Gi") for i in range(1, n + 1)]


def four_low() -> list[Pod]:
    """2 nodes x 32 CPU, each holding 2 low-priority 16-CPU pods (existing-pod-1..4)."""
    return [victim(f"existing-pod-{i}", f"node-{(i + 1) // 2}") for i in range(1, 5)]


@dataclass
class Row:
    name: str
    nodes: list[Pod]
    pods: list[Pod]
    #: The trigger's PostFilter message, after kube-scheduler's FitError ("" on success).
    message: str = ""
    #: Success: victim names (all nodes), and each member's nomination.
    victims: list[str] = field(default_factory=list)
    nominated: dict[str, str] = field(default_factory=dict)
    #: The round's recorded message (``preemption already attempted by ...``).
    cycle: str = ""


ROWS = [
    Row(
        "trigger pod has preemptionPolicy: Never",
        nodes(),
        [*four_low(), member("m-0", preemptionPolicy="Never"), member("m-1", preemptionPolicy="Never")],
        message="preemption: not eligible due to preemptionPolicy=Never.",
        cycle=ATTEMPTED.format("m-0", "not eligible due to preemptionPolicy=Never."),
    ),
    Row(
        "all nodes UAU",
        nodes(),
        [*four_low(), member("m-0", nodeSelector={"zone": "x"}), member("m-1", nodeSelector={"zone": "x"})],
        message="preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
    ),
    Row(
        "only higher- or equal-priority pods on nodes",
        nodes(),
        [
            victim("eq-1", "node-1", "32", HIGH),
            victim("hi-2", "node-2", "32", HIGH + 1),
            member("m-0"),
            member("m-1"),
        ],
        message="preemption: 0/2 nodes are available: 2 no potential victims.",
    ),
    Row(
        "2 nodes x 32 CPU, 2 low-priority 16-CPU pods each; gang of 2 x 16 CPU",
        nodes(),
        [*four_low(), member("m-0"), member("m-1")],
        victims=["existing-pod-1", "existing-pod-2"],
        nominated={"m-0": "node-1", "m-1": "node-1"},
        cycle=ATTEMPTED.format("m-0", "preempt success, alreadyWaitingForBound: 0/2"),
    ),
    Row(
        "one member already waiting in Permit (ours: it fits node-3 beside the full nodes)",
        [*nodes(), node("node-3", "16", "256Gi")],
        [*four_low(), member("m-0"), member("m-1")],
        victims=["existing-pod-2"],
        nominated={"m-1": "node-1"},
        cycle=ATTEMPTED.format("m-1", "preempt success, alreadyWaitingForBound: 1/2"),
    ),
    Row(
        "ours: disable-preemptible and quota preemptible=false pods are never victims",
        nodes(),
        [
            victim("a", "node-1", "32", labels={"scheduling.koordinator.sh/disable-preemptible": "true"}),
            victim("b", "node-2", "32", labels={"quota.scheduling.koordinator.sh/preemptible": "false"}),
            member("m-0"),
            member("m-1"),
        ],
        message="preemption: 0/2 nodes are available: 2 no potential victims.",
    ),
    Row(
        "ours: room for one member only: nothing is evicted (never half a gang)",
        nodes(2, "16"),
        [victim("low-1", "node-1"), victim("hi-2", "node-2", priority=HIGH), member("m-0"), member("m-1")],
        message="preemption: 0/2 nodes are available: 1 Insufficient cpu, 1 no potential victims.",
    ),
    Row(
        "ours: the plan takes one victim job where the greedy choice would take two",
        # node-1: two lowest-priority jobs (cost 0); node-2: one job of priority MID (cost 1).
        nodes(),
        [
            victim("j1", "node-1", labels={JOB: "job-1"}),
            victim("j2", "node-1", labels={JOB: "job-2"}),
            victim("k", "node-2", "32", MID, labels={JOB: "job-3"}),
            member("m-0"),
            member("m-1"),
        ],
        victims=["k"],
        nominated={"m-0": "node-2", "m-1": "node-2"},
    ),
    Row(
        "ours: a victim whose budget allows no disruption is reprieved first",
        nodes(1),
        [
            victim("guarded", "node-1", labels={"app": "db"}),
            victim("free", "node-1", labels={"app": "web"}),
            member("m-0", size=1),
        ],
        victims=["free"],
        nominated={"m-0": "node-1"},
    ),
    Row(
        "B.3 step 5: a member's earlier nomination is a same-job nominee, not room taken",
        # m-1 was nominated to node-1 by an earlier round; the new plan puts m-0 there.
        nodes(2, "16"),
        [
            victim("low-1", "node-1"),
            victim("low-2", "node-2"),
            member("m-0"),
            member("m-1", status={"nominatedNodeName": "node-1"}),
        ],
        victims=["low-1", "low-2"],
        nominated={"m-0": "node-1", "m-1": "node-2"},
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_job_preemption(row: Row) -> None:
    budgets = [pdb("db", {"app": "db"}, 0)]
    sched, port = world(row.nodes, row.pods, budgets)
    trigger = run_until_failure(sched)
    name = trigger.pod.metadata.name
    if row.message:
        # kube-scheduler's FitError ends the PostFilter's message with a period of its own.
        assert failure(sched, port, name).endswith(row.message + "."), failure(sched, port, name)
        assert port.preempted == []
    else:
        assert sorted(v for _, _, vs in port.preempted for v in vs) == sorted(row.victims)
        assert {k: v for k, v in port.nominated.items() if v} == row.nominated
        scheduler = "koord-scheduler"
        for v in row.victims:
            assert port.conditions[v] == (
                f"{scheduler}: preempting to accommodate higher priority pods, "
                f"preemptor: default/train, triggerPod: default/{name}"
            )
    if row.cycle:
        assert cycle_message(sched, "default/train") == row.cycle


def test_the_victim_event_names_each_victims_own_node() -> None:
    # Members on two nodes: each node's victims are evicted under that node's name.
    sched, port = world(nodes(), [*four_low(), member("m-0", "32"), member("m-1", "32")])
    run_until_failure(sched)
    assert sorted(port.preempted) == [
        ("m-0", "node-1", ["existing-pod-1", "existing-pod-2"]),
        ("m-0", "node-2", ["existing-pod-3", "existing-pod-4"]),
    ]
    assert port.nominated == {"m-0": "node-1", "m-1": "node-2"}


def test_context_already_has_a_preemption_message() -> None:
    # B.6 "Context already has a preemption message": Unschedulable, that message unchanged.
    sched, _ = world(nodes(), [*four_low(), member("m-0"), member("m-1")])
    trigger = run_until_failure(sched)
    gang = coscheduling(sched).cache.get("default/train")
    assert gang is not None
    first = cycle_message(sched, "default/train")
    result, status = job_preemption(sched).preempt(CycleState(), trigger, gang, {})
    assert (result, status.code, status.message()) == (None, Code.UNSCHEDULABLE, first)


def test_gang_with_no_pending_pods() -> None:
    # B.6 "Gang with no pending pods": the trigger is not one of the gang's pending children.
    sched, _ = world(
        nodes(),
        [
            victim(
                "m-bound",
                "node-1",
                "16",
                HIGH,
                annotations={
                    "gang.scheduling.koordinator.sh/name": "train",
                    "gang.scheduling.koordinator.sh/min-available": "1",
                },
            )
        ],
    )
    gang = coscheduling(sched).cache.get("default/train")
    assert gang is not None
    trigger = pod_info(member("trigger-pod", size=1), HIGH)
    result, status = job_preemption(sched).preempt(CycleState(), trigger, gang, {})
    assert (result, status.code, status.message()) == (None, Code.UNSCHEDULABLE, "no pending pods")
    assert cycle_message(sched, "default/train") == (
        "preemption already attempted by default/trigger-pod with message no pending pods"
    )


def test_a_member_nominated_to_a_node_with_a_terminating_victim() -> None:
    # B.6: a member nominated to a node holding a lower-priority pod terminating because of
    # scheduler preemption: not eligible.
    leaving = victim("leaving", "node-1", **TERMINATING)
    nominated = member("m-1", status={"nominatedNodeName": "node-1"})
    sched, port = world(
        nodes(), [*four_low()[2:], leaving, victim("other", "node-1"), member("m-0"), nominated]
    )
    trigger = run_until_failure(sched)
    assert failure(sched, port, trigger.pod.metadata.name).endswith(
        "preemption: not eligible due to terminating pod on the nominated node.."
    )


def test_without_enable_preemption_the_per_pod_preemption_runs() -> None:
    sched, port = world(nodes(), [*four_low(), member("m-0"), member("m-1")], enable=False)
    run_until_failure(sched)
    assert coscheduling(sched).job_preemption is None
    # DefaultPreemption evicts for the one member it ran for (on one node).
    assert len(port.preempted) == 1


def test_the_other_members_report_the_first_attempt() -> None:
    # The manual: other members report "preemption: preemption already attempted by ...".
    sched, _ = world(
        nodes(2, "16"),
        [
            victim("hi-1", "node-1", priority=HIGH),
            victim("hi-2", "node-2", priority=HIGH),
            member("m-0"),
            member("m-1"),
        ],
    )
    first = run_until_failure(sched)
    gang = coscheduling(sched).cache.get("default/train")
    assert gang is not None
    _, status = coscheduling(sched).post_filter(
        CycleState(),
        pod_info(member("m-1"), HIGH),
        {
            "node-1": Status.unschedulable("Insufficient cpu"),
            "node-2": Status.unschedulable("Insufficient cpu"),
        },
    )
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message() == (
        f"preemption: preemption already attempted by default/{first.pod.metadata.name} with message "
        "0/2 nodes are available: 2 no potential victims."
    )
    assert LOW < MID < HIGH


def test_the_kube_port_writes_the_job_preemption_condition_message() -> None:
    from koordsched.backends.kube.port import disruption_patch

    target = victim("v", "node-1")
    job = "koord-scheduler: preempting to accommodate higher priority pods, preemptor: a, triggerPod: b"
    assert (
        disruption_patch(target, "koord-scheduler", message=job)["status"]["conditions"][0]["message"] == job
    )
    plain = disruption_patch(target, "koord-scheduler")["status"]["conditions"][0]["message"]
    assert plain == "koord-scheduler: preempting to accommodate a higher priority pod"


def test_a_nomination_patch_keeps_the_member_plannable() -> None:
    # The status-only update our nominatedNodeName patch brings carries no PodInfo: the member is
    # still pending and a later round's preemption must still find it.
    sched, _ = world(nodes(), [*four_low(), member("m-0"), member("m-1")])
    run_until_failure(sched)
    jp = job_preemption(sched)
    old = jp.members["uid-m-1"].pod
    patched = member("m-1", status={"nominatedNodeName": "node-1"})
    jp.on_pod(old, patched, None)
    assert jp.members["uid-m-1"].pod is patched
    # A change of spec without a PodInfo (the pod cannot be parsed any more) still drops it.
    jp.on_pod(patched, member("m-1", "17"), None)
    assert "uid-m-1" not in jp.members


# --- network-topology gangs (spec A.7; B.6's topology rows) ---------------------------------------

SOLVER_EIGHT = (
    "no candidate topology nodes can accommodate job, desiredOfferSlot: 4, "
    "topology topologyNode SpineLayer/s1: 3;topology topologyNode SpineLayer/s2: 3, "
    "0/8 nodes are available: 8 Insufficient cpu."
)


@dataclass
class TopologyRow:
    name: str
    layout: dict[str, tuple[str, str]]
    #: Running pods (name, node, cpu, priority).
    running: list[tuple[str, str, str, int]]
    members: list[str]
    cpu: str = "16"
    #: The trigger's own FailedScheduling message ends with this.
    message: str = ""
    victims: list[str] = field(default_factory=list)
    nominated: dict[str, str] = field(default_factory=dict)
    cycle: str = ""
    #: Another member's message, after the trigger's round (member -> message end).
    others: dict[str, str] = field(default_factory=dict)


PODS_1_4 = [f"pod-{i}" for i in range(1, 5)]
HP = [f"hp-training-pod-{i}" for i in range(4)]
TOPOLOGY_ROWS = [
    TopologyRow(
        "Topology, MustGather Spine; 4 pods; s1 has 3 free nodes plus a low-priority pod on node-1",
        EIGHT_NODES,
        [("existing-pod-1", "node-1", "16", LOW), ("hi-5", "node-5", "16", HIGH + 1)],
        PODS_1_4,
        # Schedule fails with the A.4 message; the preemption's success adds nothing to it.
        message=f"0/8 nodes are available: {SOLVER_EIGHT}",
        victims=["existing-pod-1"],
        nominated={"pod-1": "node-1", "pod-2": "node-8", "pod-3": "node-2", "pod-4": "node-7"},
        cycle=ATTEMPTED.format("pod-1", "preempt success, alreadyWaitingForBound: 0/4"),
    ),
    TopologyRow(
        # Ours: node-1's blocking pod has high priority; a small low-priority pod beside it is a
        # potential victim, but taking it off makes no room, so the solver's message stands.
        "Topology, but the only blocking pod has high priority",
        EIGHT_NODES,
        [
            ("hi-1", "node-1", "15", HIGH + 1),
            ("existing-pod-1", "node-1", "1", LOW),
            ("hi-5", "node-5", "16", HIGH + 1),
        ],
        PODS_1_4,
        message=f"preemption: {SOLVER_EIGHT}",
        cycle=ATTEMPTED.format("pod-1", SOLVER_EIGHT),
    ),
    TopologyRow(
        "ours: topology, no lower-priority pod anywhere: the dry run's own FitError",
        EIGHT_NODES,
        [("hi-1", "node-1", "16", HIGH + 1), ("hi-5", "node-5", "16", HIGH + 1)],
        PODS_1_4,
        message="preemption: 0/8 nodes are available: 8 no potential victims.",
    ),
    TopologyRow(
        "Manual: 12 nodes; MustGather Spine; 4 x 8-CPU pods; node-0, node-1, node-5 busy with "
        "low-priority pods",
        MANUAL_TWELVE_NODES,
        [(f"low-priority-pod-{i}", f"node-{i}", "8", LOW) for i in (0, 1, 5)],
        HP,
        cpu="8",
        victims=["low-priority-pod-5"],
        nominated=dict(zip(HP, ["node-5", "node-6", "node-7", "node-8"], strict=True)),
        cycle=ATTEMPTED.format("hp-training-pod-0", "preempt success, alreadyWaitingForBound: 0/4"),
        others={
            m: "preemption: "
            + ATTEMPTED.format("hp-training-pod-0", "preempt success, alreadyWaitingForBound: 0/4")
            for m in HP[1:]
        },
    ),
]


@pytest.mark.parametrize("row", TOPOLOGY_ROWS, ids=[r.name for r in TOPOLOGY_ROWS])
def test_topology_job_preemption(row: TopologyRow) -> None:
    running = [victim(n, at, cpu, prio) for n, at, cpu, prio in row.running]
    members = [topology_member(m, row.cpu) for m in row.members]
    sched, port = topology_world(row.layout, [*running, *members], members=len(members), node_cpu=row.cpu)
    trigger = run_until_failure(sched)
    name = trigger.pod.metadata.name
    assert name == row.members[0]
    got = failure(sched, port, name)
    assert got.endswith(row.message + "."), got
    if row.victims:
        assert sorted(v for _, _, vs in port.preempted for v in vs) == sorted(row.victims)
        assert {k: v for k, v in port.nominated.items() if v} == row.nominated
        for v in row.victims:
            assert port.conditions[v] == (
                "koord-scheduler: preempting to accommodate higher priority pods, "
                f"preemptor: default/job, triggerPod: default/{name}"
            )
    else:
        assert port.preempted == []
        assert not any(port.nominated.values())  # the PostFilterResult nominates ""
    if row.cycle:
        assert cycle_message(sched, "default/job") == row.cycle
    for other, message in row.others.items():
        info = sched.queue.pop()
        assert info is not None and info.pod.metadata.name == other
        assert sched.schedule_one(info) is None
        assert failure(sched, port, other).endswith(message + "."), failure(sched, port, other)


def test_topology_plan_invalid_once_the_round_tried_more_than_one_pod() -> None:
    # B.3 step 6.4: pod-1 was placed by the round's plan (it waits at Permit); pod-2's planned
    # node filled up meanwhile, so its preemption refuses to plan within this round.
    sched, port = topology_world(EIGHT_NODES, [topology_member(m) for m in PODS_1_4], members=4)
    first = sched.queue.pop()
    assert first is not None and first.pod.metadata.name == "pod-1"
    assert sched.schedule_one(first) is not None
    ctx = coscheduling(sched).topology.contexts["default/job"]
    planned = ctx.plan["default/pod-2"]
    sched.on_pod_add(victim("late", planned, "16", LOW))
    trigger = run_until_failure(sched)
    assert trigger.pod.metadata.name == "pod-2"
    assert failure(sched, port, "pod-2").endswith("preemption: plan become invalid, wait for the next round.")
    assert port.preempted == []
