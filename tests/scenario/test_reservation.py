"""Reservations through `simulate`: reserve pods scheduled and held, owners allocated from them (spec 4.3)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from koordsched.backends.sim.report import render_table, to_json
from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, SimResult, simulate
from tests.builders import pod_manifest, yaml_doc
from tests.scenario.helpers import WriteYaml

NODES = """
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {pool: a}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {pool: b}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
"""


def reservation(
    name: str,
    cpu: str = "3",
    node: str | None = "n1",
    owners: str = "[{labelSelector: {matchLabels: {app: owner}}}]",
    extra: str = "",
    meta: str = "",
) -> str:
    pin = f"nodeName: {node}" if node else ""
    return f"""
---
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata: {{name: {name}{meta}}}
spec:
  template:
    spec:
      schedulerName: koord-scheduler
      {pin}
      containers: [{{name: c, resources: {{requests: {{cpu: "{cpu}", memory: 2Gi}}}}}}]
  owners: {owners}
  {extra}
"""


def pod(name: str, cpu: str = "2", labels: str = "{}", annotations: str = "{}", spec: str = "") -> str:
    """A pod document; ``labels`` and ``annotations`` are YAML flow mappings, ``spec`` YAML spec fields."""
    return yaml_doc(
        pod_manifest(
            name,
            cpu,
            "1Gi",
            uid="",
            labels=yaml.safe_load(labels),
            annotations=yaml.safe_load(annotations),
            **(yaml.safe_load(spec) if spec else {}),
        )
    )


def run(write_yaml: WriteYaml, *docs: str) -> SimResult:
    return simulate([write_yaml(NODES + "".join(docs))])


def resv(result: SimResult, name: str) -> Any:
    return next(r for r in result.reservations if r.name == name)


def test_reservation_is_scheduled_as_a_pod_and_holds_its_node(write_yaml: WriteYaml) -> None:
    result = run(write_yaml, reservation("r1"), pod("other", spec="nodeSelector: {pool: a}"))
    r = resv(result, "r1")
    assert (r.phase, r.node, r.owners) == ("Available", "n1", [])
    assert r.remaining == {"cpu": 3000, "memory": 2 * 1024**3}
    other = result.pod("default/other")
    # 3 of n1's 4 cpus are held: a pod that is no owner cannot take them.
    assert other.status == UNSCHEDULABLE
    assert "1 Insufficient cpu" in other.message
    usage = {n.name: n.resources["cpu"] for n in result.nodes}
    assert usage["n1"] == (3000, 4000)
    # Koordinator's Bind records Scheduled on the Reservation (cluster-scoped).
    scheduled = [e for e in result.port.events if e.name == "r1"]
    assert [(e.reason, e.namespace, e.message) for e in scheduled] == [
        ("Scheduled", "", "Successfully assigned r1 to n1")
    ]


def test_owner_allocates_from_its_reservation_and_allocate_once_ends_it(write_yaml: WriteYaml) -> None:
    result = run(write_yaml, reservation("r1"), pod("owner", cpu="2", labels="{app: owner}"))
    owner = result.pod("default/owner")
    assert (owner.status, owner.node) == (SCHEDULED, "n1")
    allocated = json.loads(owner.annotations["scheduling.koordinator.sh/reservation-allocated"])
    assert allocated == {"name": "r1"}  # a hand-written Reservation has no uid to name
    r = resv(result, "r1")
    # allocateOnce (the default): the first owner ends the reservation; what it had left is free again.
    assert (r.phase, r.owners) == ("Succeeded", ["default/owner"])
    assert {n.name: n.resources["cpu"] for n in result.nodes}["n1"] == (2000, 4000)


def test_owner_uses_reserved_capacity_beyond_node_free(write_yaml: WriteYaml) -> None:
    # n1: 4 cpus, 3 reserved; a filler takes the free one. Only the owner (3 cpus) still fits there.
    result = run(
        write_yaml,
        reservation("r1", extra="allocateOnce: false"),
        pod("filler", cpu="1", spec="nodeSelector: {pool: a}"),
        pod("owner", cpu="3", labels="{app: owner}", spec="nodeSelector: {pool: a}"),
        pod("late", cpu="1", spec="nodeSelector: {pool: a}"),
    )
    assert result.pod("default/filler").node == "n1"
    assert result.pod("default/owner").node == "n1"
    assert result.pod("default/late").status == UNSCHEDULABLE
    r = resv(result, "r1")
    assert (r.phase, r.owners, r.remaining["cpu"]) == ("Available", ["default/owner"], 0)
    assert r.allocated["cpu"] == 3000
    # Nothing counted twice: filler 1 + owner 3, the reservation's remainder is 0.
    assert {n.name: n.resources["cpu"] for n in result.nodes}["n1"] == (4000, 4000)


def test_owner_never_takes_another_reservations_remainder(write_yaml: WriteYaml) -> None:
    result = run(
        write_yaml,
        reservation("ra", cpu="2", extra="allocateOnce: false"),
        reservation("rb", cpu="2", extra="allocateOnce: false"),
        pod("owner", cpu="3", labels="{app: owner}", spec="nodeSelector: {pool: a}"),
    )
    # Each reservation holds 2 of n1's 4 cpus: 3 fit through neither alone.
    owner = result.pod("default/owner")
    assert owner.status == UNSCHEDULABLE, owner
    assert "Insufficient cpu by node" in owner.message


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ('{scheduling.koordinator.sh/reservation-affinity: \'{"name": "missing"}\'}', None),
        ("{scheduling.koordinator.sh/reservation-affinity: ''}", "n1"),
        ('{scheduling.koordinator.sh/reservation-affinity: \'{"name": "r1"}\'}', "n1"),
        (
            '{scheduling.koordinator.sh/reservation-affinity: \'{"reservationSelector": {"tier": "gold"}}\'}',
            None,
        ),
    ],
)
def test_reservation_affinity(write_yaml: WriteYaml, annotations: str, expected: str | None) -> None:
    result = run(write_yaml, reservation("r1"), pod("p", labels="{app: owner}", annotations=annotations))
    p = result.pod("default/p")
    assert p.node == expected
    if expected is None:
        assert "no reservations match reservation affinity" in p.message


def test_affinity_without_any_reservation_is_unschedulable(write_yaml: WriteYaml) -> None:
    ann = "{scheduling.koordinator.sh/reservation-affinity: '{}'}"
    result = run(write_yaml, pod("p", annotations=ann))
    p = result.pod("default/p")
    assert p.status == UNSCHEDULABLE
    assert p.message == (
        "0/2 nodes are available: node(s) no reservations match reservation affinity. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
    )


def test_reservation_ignored_pod_may_use_reserved_capacity(write_yaml: WriteYaml) -> None:
    result = run(
        write_yaml,
        reservation("r1"),
        pod(
            "ignoring",
            cpu="3",
            labels="{scheduling.koordinator.sh/reservation-ignored: 'true'}",
            spec="nodeSelector: {pool: a}",
        ),
    )
    p = result.pod("default/ignoring")
    assert p.node == "n1"
    assert "scheduling.koordinator.sh/reservation-allocated" not in p.annotations
    assert resv(result, "r1").owners == []


def test_restricted_reservation_bounds_the_owner(write_yaml: WriteYaml) -> None:
    ann = '{scheduling.koordinator.sh/reservation-affinity: \'{"name": "r1"}\'}'
    result = run(
        write_yaml,
        reservation("r1", cpu="2", extra="allocatePolicy: Restricted"),
        pod("big", cpu="3", labels="{app: owner}", annotations=ann),
    )
    big = result.pod("default/big")
    assert big.status == UNSCHEDULABLE
    assert "Reservation(s) Insufficient cpu, requested: 3000, used: 0, capacity: 2000" in big.message


def test_aligned_reservation_tops_up_from_the_node(write_yaml: WriteYaml) -> None:
    ann = '{scheduling.koordinator.sh/reservation-affinity: \'{"name": "r1"}\'}'
    result = run(
        write_yaml,
        reservation("r1", cpu="2", extra="allocatePolicy: Aligned"),
        pod("big", cpu="3", labels="{app: owner}", annotations=ann),
    )
    assert result.pod("default/big").node == "n1"


def test_exact_match(write_yaml: WriteYaml) -> None:
    exact = '{scheduling.koordinator.sh/exact-match-reservation: \'{"resourceNames": ["cpu"]}\'}'
    result = run(
        write_yaml,
        reservation("r1", cpu="3"),
        pod("near", cpu="2", labels="{app: owner}", annotations=exact, spec="nodeSelector: {pool: b}"),
        pod("same", cpu="3", labels="{app: owner}", annotations=exact),
    )
    assert "scheduling.koordinator.sh/reservation-allocated" not in result.pod("default/near").annotations
    same = result.pod("default/same")
    assert same.node == "n1"
    assert "scheduling.koordinator.sh/reservation-allocated" in same.annotations


def test_reservation_order_prefers_the_lower_order(write_yaml: WriteYaml) -> None:
    result = run(
        write_yaml,
        reservation(
            "ra", cpu="1", node="n1", meta=", labels: {scheduling.koordinator.sh/reservation-order: '2'}"
        ),
        reservation(
            "rb", cpu="1", node="n2", meta=", labels: {scheduling.koordinator.sh/reservation-order: '1'}"
        ),
        pod("owner", cpu="1", labels="{app: owner}"),
    )
    assert result.pod("default/owner").node == "n2"
    assert resv(result, "rb").owners == ["default/owner"]


def test_owner_by_object_and_by_controller(write_yaml: WriteYaml) -> None:
    by_object = "[{object: {name: web-0, namespace: default}}]"
    by_controller = "[{controller: {kind: ReplicaSet, name: web, namespace: default}}]"
    refs = "ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: u1, controller: true}]"
    docs = (
        reservation("r-obj", cpu="1", node="n1", owners=by_object),
        reservation("r-ctl", cpu="1", node="n2", owners=by_controller),
        pod("web-0", cpu="1"),
        f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: web-1, {refs}}}
spec:
  schedulerName: koord-scheduler
  containers: [{{name: c, resources: {{requests: {{cpu: "1"}}}}}}]
""",
    )
    result = run(write_yaml, *docs)
    assert resv(result, "r-obj").owners == ["default/web-0"]
    assert resv(result, "r-ctl").owners == ["default/web-1"]


def test_unschedulable_reservation_stays_pending_with_the_reason(write_yaml: WriteYaml) -> None:
    result = run(write_yaml, reservation("huge", cpu="9"), reservation("lost", cpu="1", node="n9"))
    huge = resv(result, "huge")
    assert (huge.phase, huge.node) == ("Pending", None)
    assert huge.message == "0/2 nodes are available: 2 Insufficient cpu."
    lost = resv(result, "lost")
    assert (
        lost.message
        == "0/2 nodes are available: 2 node(s) didn't match the nodeName specified by reservation."
    )


def test_expired_reservation_fails_and_frees_its_node(write_yaml: WriteYaml) -> None:
    meta = ", creationTimestamp: '2020-01-01T00:00:00Z'"
    result = run(
        write_yaml,
        reservation("old", extra="ttl: 1h", meta=meta),
        pod("other", cpu="4", spec="nodeSelector: {pool: a}"),
    )
    assert resv(result, "old").phase == "Failed"
    assert resv(result, "old").message == "Expired"
    assert result.pod("default/other").node == "n1"


def test_invalid_reservation_is_reported_and_holds_nothing(write_yaml: WriteYaml) -> None:
    result = run(
        write_yaml, reservation("bad", owners="[]"), pod("other", cpu="4", spec="nodeSelector: {pool: a}")
    )
    assert any("Reservation bad" in w and "spec.owners" in w for w in result.warnings), result.warnings
    assert result.pod("default/other").node == "n1"


def test_report_lists_reservations_in_table_and_json(write_yaml: WriteYaml) -> None:
    result = run(
        write_yaml,
        reservation("r1", extra="allocateOnce: false"),
        pod("owner", cpu="1", labels="{app: owner}"),
    )
    table = render_table(result)
    assert "RESERVATION  PHASE      NODE  OWNERS         LEFT" in table
    assert "r1           Available  n1    default/owner  cpu=2,memory=1Gi" in table
    out = to_json(result)["reservations"]
    assert out == [
        {
            "name": "r1",
            "phase": "Available",
            "node": "n1",
            "owners": ["default/owner"],
            "allocatable": {"cpu": 3, "memory": 2 * 1024**3},
            "allocated": {"cpu": 1, "memory": 1024**3},
            "remaining": {"cpu": 2, "memory": 1024**3},
            "message": "",
        }
    ]


# --- devices: the owner gets the reservation's own GPUs (spec 4.1 restore) ------------------------

GPU_RES = (
    '{"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100", '
    '"koordinator.sh/gpu-memory": "80Gi"}'
)
GPU_NODE = """
apiVersion: v1
kind: Node
metadata: {name: g1}
status: {allocatable: {cpu: "32", memory: 64Gi, pods: "110", nvidia.com/gpu: "8"}}
---
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Device
metadata: {name: g1}
spec:
  devices:
""" + "".join(
    f"  - {{type: gpu, minor: {m}, id: GPU-{m}, health: true, resources: {GPU_RES}}}\n" for m in range(8)
)


def gpu_pod(name: str, gpus: int, labels: str = "{}", annotations: str = "{}") -> str:
    """A pod document asking ``gpus`` GPUs; ``labels`` and ``annotations`` are YAML flow mappings."""
    gpu = {"nvidia.com/gpu": str(gpus)}
    return yaml_doc(
        pod_manifest(
            name,
            None,
            None,
            uid="",
            labels=yaml.safe_load(labels),
            annotations=yaml.safe_load(annotations),
            requests=gpu,
            limits=gpu,
        )
    )


def held_gpus(minors: range) -> str:
    entries = [
        {
            "minor": m,
            "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"},
        }
        for m in minors
    ]
    return json.dumps(json.dumps({"gpu": entries}))


def minors_of(result: SimResult, key: str) -> list[int]:
    raw = result.pod(key).annotations["scheduling.koordinator.sh/device-allocated"]
    return [e["minor"] for e in json.loads(raw)["gpu"]]


def test_owner_gets_the_reserved_gpus_and_others_cannot_take_them(write_yaml: WriteYaml) -> None:
    # An Available reservation (scheduled earlier) holds GPUs 4-7 of g1.
    available = f"""
---
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata:
  name: gpus
  uid: r-uid-1
  annotations: {{scheduling.koordinator.sh/device-allocated: {held_gpus(range(4, 8))}}}
spec:
  template:
    spec:
      schedulerName: koord-scheduler
      containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: "4"}}}}}}]
  owners: [{{labelSelector: {{matchLabels: {{app: train}}}}}}]
status:
  phase: Available
  nodeName: g1
  allocatable: {{nvidia.com/gpu: "4"}}
"""
    # The owner comes first: with the reservation lent to it, all 8 GPUs are free in its cycle, and
    # it still takes the reservation's own.
    docs = (
        GPU_NODE
        + available
        + gpu_pod("train", 4, "{app: train}")
        + gpu_pod("other-1", 4)
        + gpu_pod("other-2", 4)
    )
    result = simulate([write_yaml(docs)])
    assert minors_of(result, "default/other-1") == [0, 1, 2, 3]
    # GPUs 4-7 are held for the owner: a second pod that is no owner finds none.
    other2 = result.pod("default/other-2")
    assert other2.status == UNSCHEDULABLE
    train = result.pod("default/train")
    assert train.node == "g1"
    assert minors_of(result, "default/train") == [4, 5, 6, 7]
    allocated = json.loads(train.annotations["scheduling.koordinator.sh/reservation-allocated"])
    assert allocated == {"name": "gpus", "uid": "r-uid-1"}
    assert resv(result, "gpus").phase == "Succeeded"


def test_reserve_pod_allocates_devices_and_writes_them_on_the_reservation(write_yaml: WriteYaml) -> None:
    reserve = """
---
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata: {name: gpus}
spec:
  template:
    spec:
      schedulerName: koord-scheduler
      containers: [{name: c, resources: {requests: {nvidia.com/gpu: "4"}, limits: {nvidia.com/gpu: "4"}}}]
  owners: [{labelSelector: {matchLabels: {app: train}}}]
"""
    result = simulate([write_yaml(GPU_NODE + reserve + gpu_pod("other", 8) + gpu_pod("small", 4))])
    r = resv(result, "gpus")
    assert (r.phase, r.node) == ("Available", "g1")
    # The reservation took 4 GPUs first (reserve pods have the highest priority): 8 no longer fit.
    assert result.pod("default/other").status == UNSCHEDULABLE
    assert result.pod("default/small").node == "g1"
    assert minors_of(result, "default/small") == [4, 5, 6, 7]


def test_legacy_policy_does_not_share_a_node_with_another_policy(write_yaml: WriteYaml) -> None:
    # QUIRK 15 (kept): a legacy ("") reservation and an Aligned one cannot share a node.
    result = run(
        write_yaml,
        reservation("legacy", cpu="1", node="n1", extra="allocateOnce: false"),
        reservation("aligned", cpu="1", node="n1", extra="allocatePolicy: Aligned"),
    )
    assert resv(result, "legacy").phase == "Available"
    aligned = resv(result, "aligned")
    assert aligned.phase == "Pending"
    assert "1 node(s) reservation allocate policy conflict" in aligned.message


def test_operating_mode_pods_and_pre_allocation_are_refused_not_ignored(write_yaml: WriteYaml) -> None:
    result = run(
        write_yaml,
        reservation("pre", extra="preAllocation: true"),
        pod("acting", labels="{scheduling.koordinator.sh/operating-mode: Reservation}"),
    )
    assert any("spec.preAllocation" in w for w in result.warnings), result.warnings
    acting = result.pod("default/acting")
    assert acting.status == UNSCHEDULABLE
    assert "operating-mode: Reservation" in acting.message


# --- CPUs: the owner gets the reservation's own cpuset (spec 4.2 restore) --------------------------


def test_owner_gets_the_reserved_cpuset(write_yaml: WriteYaml) -> None:
    from tests.scenario.test_unreadable_allocations import numa_cluster

    base = numa_cluster('{"cpuset":"0-3"}')  # n1 (2 NUMA nodes x 8 CPUs); a bound pod holds 0-3
    held = json.dumps({"cpuset": "12-15", "numaNodeResources": [{"node": 1, "resources": {"cpu": "4"}}]})
    available = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {
            "name": "cpus",
            "uid": "r-cpus",
            "annotations": {"scheduling.koordinator.sh/resource-status": held},
        },
        "spec": {
            "template": {
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "4", "memory": "2Gi"}}}],
                }
            },
            "owners": [{"object": {"name": "lsr-0"}}],
        },
        "status": {"phase": "Available", "nodeName": "n1", "allocatable": {"cpu": "4", "memory": "2Gi"}},
    }
    result = simulate([write_yaml(base + "\n---\n" + json.dumps(available))])
    owner = result.pod("default/lsr-0")
    status = json.loads(owner.annotations["scheduling.koordinator.sh/resource-status"])
    assert status["cpuset"] == "12-15"
    assert json.loads(owner.annotations["scheduling.koordinator.sh/reservation-allocated"])["name"] == "cpus"
    # lsr-1 is no owner: the reservation's CPUs were never free for it.
    other = json.loads(result.pod("default/lsr-1").annotations["scheduling.koordinator.sh/resource-status"])
    assert other["cpuset"] not in ("0-3", "12-15")


def test_post_filter_counts_why_reservations_did_not_serve(write_yaml: WriteYaml) -> None:
    tainted = reservation(
        "tainted",
        cpu="3",
        node="n1",
        meta=", labels: {tier: silver}",
        extra="taints: [{key: dedicated, value: ml, effect: NoSchedule}]",
    )
    plain = reservation("plain", cpu="3", node="n2", meta=", labels: {tier: silver}")
    gold = '{scheduling.koordinator.sh/reservation-affinity: \'{"reservationSelector": {"tier": "gold"}}\'}'
    tolerate = (
        "{scheduling.koordinator.sh/reservation-affinity: "
        '\'{"tolerations": [{"key": "dedicated", "operator": "Exists"}]}\'}'
    )
    result = run(
        write_yaml,
        tainted,
        plain,
        pod("p", cpu="1", labels="{app: owner}", annotations=gold),
        pod("big", cpu="5", labels="{app: owner}", annotations=tolerate),
    )
    assert result.pod("default/p").message == (
        "0/2 nodes are available: node(s) no reservations match reservation affinity. "
        "1 Reservation(s) didn't match affinity rules, "
        "1 Reservation(s) had untolerated taint {dedicated: ml}, 2 Reservation(s) matched owner total, "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
    )
    assert result.pod("default/big").message == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "2 Reservation(s) for node reason that Insufficient cpu, 2 Reservation(s) matched owner total, "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.."
    )


def test_restricted_reservation_gives_only_its_own_gpus(write_yaml: WriteYaml) -> None:
    # A Restricted reservation holds GPUs 6 and 7, but a bound pod (wrongly) sits on GPU 7 too: the
    # reservation can give its owner one GPU, not two, whatever the node has free elsewhere.
    restricted = f"""
---
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata:
  name: pair
  uid: r-pair
  annotations: {{scheduling.koordinator.sh/device-allocated: {held_gpus(range(6, 8))}}}
spec:
  template:
    spec:
      schedulerName: koord-scheduler
      containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: "2"}}}}}}]
  owners: [{{labelSelector: {{matchLabels: {{app: train}}}}}}]
  allocatePolicy: Restricted
  allocateOnce: false
status:
  phase: Available
  nodeName: g1
  allocatable: {{nvidia.com/gpu: "2"}}
"""
    squatter = f"""
---
apiVersion: v1
kind: Pod
metadata:
  name: squatter
  annotations: {{scheduling.koordinator.sh/device-allocated: {held_gpus(range(7, 8))}}}
spec:
  schedulerName: koord-scheduler
  nodeName: g1
  containers:
  - name: c
    resources: {{requests: {{nvidia.com/gpu: "1"}}, limits: {{nvidia.com/gpu: "1"}}}}
"""
    named = gpu_pod(
        "named", 2, "{app: train}", '{scheduling.koordinator.sh/reservation-affinity: \'{"name": "pair"}\'}'
    )
    result = simulate(
        [write_yaml(GPU_NODE + restricted + squatter + named + gpu_pod("one", 1, "{app: train}"))]
    )
    p = result.pod("default/named")
    assert p.status == UNSCHEDULABLE
    assert "Reservation(s) Insufficient gpu devices" in p.message, p.message
    # One GPU it can give: GPU 6, its own.
    one = result.pod("default/one")
    assert minors_of(result, "default/one") == [6]
    assert json.loads(one.annotations["scheduling.koordinator.sh/reservation-allocated"])["name"] == "pair"


def test_a_reserve_pod_never_preempts(write_yaml: WriteYaml) -> None:
    """Reserve pods default to priority MaxInt32, yet (as in Koordinator, whose Reservation
    PostFilter ends the chain for them) DefaultPreemption never evicts a running pod for one."""
    bound = """
---
apiVersion: v1
kind: Pod
metadata: {name: low-a}
spec:
  schedulerName: koord-scheduler
  nodeName: n1
  priority: 0
  containers: [{name: c, resources: {requests: {cpu: "3", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: low-b}
spec:
  schedulerName: koord-scheduler
  nodeName: n2
  priority: 0
  containers: [{name: c, resources: {requests: {cpu: "3", memory: 1Gi}}}]
"""
    result = run(write_yaml, bound, reservation("r1", cpu="2", node=None))
    assert resv(result, "r1").phase == "Pending"
    assert result.summary.preempted == 0
    assert not [p for p in result.pods if p.status == "Preempted"]
