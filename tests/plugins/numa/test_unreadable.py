"""CPU and NUMA allocations that cannot be read: never counted as holding nothing.

A bound pod whose ``resource-status`` cannot be read (or names CPUs or NUMA nodes the node's NRT
does not have, or a negative amount), and an NRT whose CPU holdings cannot be read, make the node
offer no CPU binding and no NUMA alignment until the pod goes away or the object is fixed.
"""

from __future__ import annotations

import json
import logging
import time

import msgspec
import pytest

from koordsched.api.koordinator import (
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_POD_CPU_ALLOCS,
    ANNOTATION_RESOURCE_STATUS,
    LABEL_NUMA_TOPOLOGY_POLICY,
)
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.types import PodInfo
from tests.plugins.numa.helpers import Env, make_node, make_nrt, make_pod, pod_info

STATUS = ANNOTATION_RESOURCE_STATUS
REASON = (
    "node(s) resource allocation of pod default/bad unreadable (scheduling.koordinator.sh/resource-status): "
)


def env_with(status: str) -> tuple[Env, PodInfo]:
    env = Env()
    env.add_node(make_node("n0"), make_nrt("n0"))
    env.add_node(make_node("n1"), make_nrt("n1"))
    bad = env.place(
        make_pod("bad", {"cpu": "4"}, qos="LSR", node_name="n0", annotations={STATUS: status}), "n0"
    )
    return env, bad


@pytest.mark.parametrize(
    ("status", "error"),
    [
        ('{"cpuset":"0-3"', "Input data was truncated"),
        ('{"cpuset":4}', "Expected `str`, got `int` - at `$.cpuset`"),
        ('{"numaNodeResources":{"node":0}}', "Expected `array`, got `object` - at `$.numaNodeResources`"),
        (
            '{"cpuset":"0-999999999"}',
            "invalid cpuset '0-999999999': CPU 999999999 is out of range (0 to 8191)",
        ),
        ('{"cpuset":"14-17"}', "cpus 16-17 are not in the node's CPU topology"),
        (
            '{"numaNodeResources":[{"node":5,"resources":{"cpu":"4"}}]}',
            "NUMA node 5 is not in the node's NodeResourceTopology",
        ),
        ('{"numaNodeResources":[{"node":0,"resources":{"cpu":"-4"}}]}', "NUMA node 0: negative cpu -4000"),
    ],
)
def test_a_node_binds_no_cpu_while_a_bound_pods_cpus_cannot_be_read(status: str, error: str) -> None:
    # Before: the pod counted as holding nothing, and its CPUs went to the next LSR pod
    # ("0-999999999" built a set of a billion CPUs first).
    started = time.monotonic()
    env, _ = env_with(status)
    for pod in (
        make_pod("lsr", {"cpu": "2"}, qos="LSR"),
        make_pod("numa", {"cpu": "2"}, numa_policy="SingleNUMANode"),
    ):
        statuses = env.filter(pod_info(pod))
        assert statuses["n1"] is None
        refused = statuses["n0"]
        assert refused is not None and refused.reasons == (REASON + error,), pod.metadata.name
    assert time.monotonic() - started < 5
    # A pod that binds nothing and asks no NUMA policy is not concerned.
    assert env.filter(pod_info(make_pod("plain", {"cpu": "2"})))["n0"] is None


def test_reserve_and_hints_refuse_as_the_filter_does() -> None:
    env, _ = env_with("{")
    pod = pod_info(make_pod("lsr", {"cpu": "2"}, qos="LSR"))
    state = CycleState()
    env.plugin.pre_filter(state, pod)
    refused = env.plugin.reserve(state, pod, "n0")
    assert refused.reasons == (REASON + "Input data was truncated",)
    hints, status = env.plugin.get_pod_topology_hints(state, pod, env.snap.by_name["n0"])
    assert hints is None and status.reasons == refused.reasons


def test_a_numa_policy_node_aligns_nothing_for_any_pod() -> None:
    env = Env()
    env.add_node(make_node("n0", labels={LABEL_NUMA_TOPOLOGY_POLICY: "SingleNUMANode"}), make_nrt("n0"))
    env.place(make_pod("bad", {"cpu": "4"}, node_name="n0", annotations={STATUS: "[]"}), "n0")
    status = env.filter(pod_info(make_pod("plain", {"cpu": "2"})))["n0"]
    assert status is not None and status.reasons[0].startswith(REASON)


def test_the_node_binds_again_once_the_annotation_is_fixed_and_never_twice() -> None:
    env, bad = env_with('{"cpuset":"0-3"')
    assert env.filter(pod_info(make_pod("lsr", {"cpu": "2"}, qos="LSR")))["n0"] is not None
    # The pod's annotation is fixed: an update removes and adds it, as the cache does.
    node = env.snap.by_name["n0"]
    env.snap.remove_pod(node, bad)
    meta = msgspec.structs.replace(bad.pod.metadata, annotations={STATUS: '{"cpuset":"0-3"}'})
    env.snap.add_pod(node, PodInfo(msgspec.structs.replace(bad.pod, metadata=meta), bad.requests))
    env.snap.remove_node("n1")
    taken = {0, 1, 2, 3}
    for i in range(6):
        name, _, annotations = env.schedule(pod_info(make_pod(f"lsr-{i}", {"cpu": "2"}, qos="LSR")))
        assert name == "n0"
        cpus = json.loads(annotations[STATUS])["cpuset"]
        first, last = (int(x) for x in cpus.split("-"))
        got = set(range(first, last + 1))
        assert not got & taken
        taken |= got
        env.bind(make_pod(f"lsr-{i}", {"cpu": "2"}, qos="LSR"), "n0", annotations)


def test_each_unreadable_pod_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        env, _ = env_with("{")
        for _ in range(3):
            env.filter(pod_info(make_pod("lsr", {"cpu": "2"}, qos="LSR")))
    assert sum("pod default/bad on node n0" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize(
    ("annotations", "error"),
    [
        (
            {ANNOTATION_POD_CPU_ALLOCS: "[{"},
            "invalid node.koordinator.sh/pod-cpu-allocs: Input data was truncated",
        ),
        (
            {
                ANNOTATION_POD_CPU_ALLOCS: json.dumps(
                    [
                        {
                            "namespace": "kube-system",
                            "name": "k",
                            "uid": "u1",
                            "cpuset": "x",
                            "managedByKubelet": True,
                        }
                    ]
                )
            },
            "invalid node.koordinator.sh/pod-cpu-allocs: pod u1: invalid cpuset 'x': 'x' is not a CPU number",
        ),
        (
            {ANNOTATION_KUBELET_CPU_MANAGER_POLICY: json.dumps({"policy": "static", "reservedCPUs": "0-"})},
            "invalid kubelet.koordinator.sh/cpu-manager-policy: invalid cpuset '0-': '' is not a CPU number",
        ),
    ],
)
def test_an_nrt_whose_cpu_holdings_cannot_be_read_binds_nothing(
    annotations: dict[str, str], error: str
) -> None:
    # Koordinator logs these and carries on, handing out the CPUs they record as taken.
    env = Env()
    env.add_node(make_node("n0"), make_nrt("n0", annotations=annotations))
    env.add_node(make_node("n1"), make_nrt("n1"))
    statuses = env.filter(pod_info(make_pod("lsr", {"cpu": "2"}, qos="LSR")))
    assert statuses["n1"] is None
    refused = statuses["n0"]
    assert refused is not None and refused.reasons == (
        f"node(s) NodeResourceTopology n0 unreadable: {error}",
    )


def test_a_problem_is_seen_when_the_nodes_allocations_start_afresh() -> None:
    # The manager drops a node's allocations when its last pod leaves, and the next pod starts a new
    # record at the same version: what was found for the old record must not be reused.
    env = Env()
    env.add_node(make_node("n0"), make_nrt("n0"))
    lsr = pod_info(make_pod("lsr", {"cpu": "2"}, qos="LSR"))
    fine = env.place(
        make_pod("fine", {"cpu": "2"}, node_name="n0", annotations={STATUS: '{"cpuset":"0-1"}'}), "n0"
    )
    assert env.filter(lsr)["n0"] is None
    env.snap.remove_pod(env.snap.by_name["n0"], fine)
    env.place(make_pod("bad", {"cpu": "2"}, node_name="n0", annotations={STATUS: '{"cpuset":"20-21"}'}), "n0")
    refused = env.filter(pod_info(make_pod("lsr2", {"cpu": "2"}, qos="LSR")))["n0"]
    assert refused is not None and refused.reasons == (
        REASON + "cpus 20-21 are not in the node's CPU topology",
    )
