"""Reservations and cpusets through `simulate` (spec 4.2 restore, tryAllocateFromReservation).

n1: 2 NUMA nodes x 4 cores x 2 threads (CPUs 0-7 on node 0, 8-15 on node 1, siblings adjacent); a
bound pod holds CPUs 0-3. The LSR pods ask for 4 whole CPUs each.
"""

from __future__ import annotations

import json
from typing import Any

from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, SimResult, simulate
from tests.scenario.helpers import WriteYaml
from tests.scenario.test_unreadable_allocations import numa_cluster

STATUS = "scheduling.koordinator.sh/resource-status"


def reservation(
    name: str, cpus: str, count: int, owner: str, *, policy: str = "Aligned", order: int = 0
) -> str:
    held = json.dumps({"cpuset": cpus})
    labels = {"scheduling.koordinator.sh/reservation-order": str(order)} if order else {}
    doc: dict[str, Any] = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name, "uid": f"{name}-uid", "labels": labels, "annotations": {STATUS: held}},
        "spec": {
            "template": {
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "containers": [
                        {"name": "c", "resources": {"requests": {"cpu": str(count), "memory": "2Gi"}}}
                    ],
                }
            },
            "owners": [{"object": {"name": owner}}],
            "allocatePolicy": policy,
            "allocateOnce": False,
        },
        "status": {
            "phase": "Available",
            "nodeName": "n1",
            "allocatable": {"cpu": str(count), "memory": "2Gi"},
        },
    }
    return "\n---\n" + json.dumps(doc)


def squatter(cpus: str) -> str:
    """A bound pod holding ``cpus`` (outside any reservation)."""
    res = {"cpu": "4", "memory": "1Gi"}
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "squatter",
            "labels": {"koordinator.sh/qosClass": "LSR"},
            "annotations": {STATUS: json.dumps({"cpuset": cpus})},
        },
        "spec": {
            "schedulerName": "koord-scheduler",
            "nodeName": "n1",
            "containers": [{"name": "c", "resources": {"requests": res, "limits": res}}],
        },
    }
    return "\n---\n" + json.dumps(doc)


def cpuset(result: SimResult, name: str) -> set[int]:
    raw = json.loads(result.pod(f"default/{name}").annotations[STATUS])["cpuset"]
    out: set[int] = set()
    for part in raw.split(","):
        first, _, last = part.partition("-")
        out.update(range(int(first), int(last or first) + 1))
    return out


def test_a_cpuset_through_one_reservation_leaves_another_matched_reservations_cpus(
    write_yaml: WriteYaml,
) -> None:
    # lsr-0 owns a (CPUs 14-15, order 1) and b (CPUs 8-11). Through a it takes a's two CPUs and
    # two more that are free, never b's, which stay for b's next owner.
    docs = numa_cluster('{"cpuset":"0-3"}')
    docs += reservation("a", "14-15", 2, "lsr-0", order=1) + reservation("b", "8-11", 4, "lsr-0", order=2)
    result = simulate([write_yaml(docs)])
    got = cpuset(result, "lsr-0")
    assert len(got) == 4 and {14, 15} <= got
    assert not got & {8, 9, 10, 11}, got
    allocated = json.loads(
        result.pod("default/lsr-0").annotations["scheduling.koordinator.sh/reservation-allocated"]
    )
    assert allocated["name"] == "a"


def test_a_restricted_reservation_gives_only_its_own_cpus(write_yaml: WriteYaml) -> None:
    # r (Restricted) holds CPUs 12-15 for lsr-0, but a bound pod (wrongly) sits on 12-15: r has 4
    # cpus left on paper and none in fact. lsr-0 must use r (reservation-affinity): refused with
    # Koordinator's reason, prefixed for the reservation, though the node has CPUs 4-11 free.
    docs = numa_cluster('{"cpuset":"0-3"}').replace(
        '"name": "lsr-0", "labels": {"koordinator.sh/qosClass": "LSR"}, "annotations": {}',
        '"name": "lsr-0", "labels": {"koordinator.sh/qosClass": "LSR"}, "annotations": '
        '{"scheduling.koordinator.sh/reservation-affinity": "{\\"name\\": \\"r\\"}"}',
    )
    assert "reservation-affinity" in docs
    docs += reservation("r", "12-15", 4, "lsr-0", policy="Restricted") + squatter("12-15")
    result = simulate([write_yaml(docs)])
    lsr0 = result.pod("default/lsr-0")
    assert lsr0.status == UNSCHEDULABLE
    assert "Reservation(s) not enough cpus available to satisfy request" in lsr0.message, lsr0.message
    # lsr-1 owns nothing: it gets CPUs from 4-11.
    assert result.pod("default/lsr-1").status == SCHEDULED
    assert cpuset(result, "lsr-1") <= set(range(4, 12))


def test_a_restricted_reservation_with_its_cpus_free_serves_its_owner(write_yaml: WriteYaml) -> None:
    docs = numa_cluster('{"cpuset":"0-3"}') + reservation("r", "12-15", 4, "lsr-0", policy="Restricted")
    result = simulate([write_yaml(docs)])
    assert cpuset(result, "lsr-0") == {12, 13, 14, 15}
