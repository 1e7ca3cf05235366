"""Gangs through `simulate` with the default profile, as users run it (Coscheduling, spec 4.4).

A gang never half binds: either min-available members are assumed together and all bind, or
none does, and each says why in Koordinator's words.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordsched.backends.sim.report import render_table, to_json
from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, simulate
from tests.builders import container, node_manifest, pod_manifest, yaml_docs
from tests.scenario.helpers import WriteYaml

ROOT = Path(__file__).resolve().parents[2]
GANG = "gang.scheduling.koordinator.sh/"


def node(name: str, cpu: str = "2") -> dict[str, Any]:
    return node_manifest(name, cpu, "8Gi", 10, hostname=False, capacity=False)


def member(
    name: str,
    cpu: str = "1",
    *,
    gang: str = "train",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    **gang_keys: str,
) -> dict[str, Any]:
    notes = {GANG + "name": gang, GANG + "min-available": "3"} if gang else {}
    notes.update({GANG + k.replace("_", "-"): v for k, v in gang_keys.items()})
    notes.update(annotations or {})
    return pod_manifest(name, cpu, None, uid="", labels=labels, annotations=notes)


def write(write_yaml: WriteYaml, *docs: dict[str, Any]) -> Path:
    return write_yaml(yaml_docs(*docs))


def test_gang_of_three_with_room_for_two_binds_nobody(write_yaml: WriteYaml) -> None:
    result = simulate([write(write_yaml, node("n1"), *(member(n) for n in ("w0", "w1", "w2")))])
    assert {p.key: (p.status, p.node) for p in result.pods} == {
        f"default/{n}": (UNSCHEDULABLE, None) for n in ("w0", "w1", "w2")
    }
    fit = "0/1 nodes are available: 1 Insufficient cpu."
    rejected = (
        f'Gang "default/train" gets rejected due to member Pod "w2" is unschedulable with reason "{fit}"'
    )
    assert result.pod("default/w0").message == rejected
    assert result.pod("default/w1").message == rejected
    assert result.pod("default/w2").message.startswith(fit)
    assert (
        'Gang "default/train" gets rejected due to pod is unschedulable' in result.pod("default/w2").message
    )
    # Nothing stays assumed: the node is as empty as it started.
    assert [n.resources["cpu"][0] for n in result.nodes] == [0]
    (gang,) = result.summary.gangs
    assert (gang.id, gang.min_member, gang.members, gang.bound, gang.complete) == (
        "default/train",
        3,
        3,
        0,
        False,
    )
    assert "1 gang: 0 complete, 1 incomplete" in render_table(result)


def test_the_same_gang_with_a_second_node_binds_every_member(write_yaml: WriteYaml) -> None:
    result = simulate([write(write_yaml, node("n1"), node("n2"), *(member(n) for n in ("w0", "w1", "w2")))])
    assert [p.status for p in result.pods] == [SCHEDULED] * 3
    assert to_json(result)["summary"]["gangs"] == {"complete": 1, "incomplete": 0}
    (gang,) = to_json(result)["gangs"]
    assert gang == {
        "name": "default/train",
        "minMember": 3,
        "mode": "Strict",
        "members": 3,
        "bound": 3,
        "waiting": 0,
        "complete": True,
    }


def test_members_listed_before_their_peers_say_nothing_of_the_wait(write_yaml: WriteYaml) -> None:
    # w0 is fed first, while its gang is one of three: held at PreEnqueue until w1 and w2 come in.
    # Nothing is said of that hold (the initial list was not in), so each member's only event is
    # its Scheduled one.
    result = simulate([write(write_yaml, node("n1"), node("n2"), *(member(n) for n in ("w0", "w1", "w2")))])
    for name in ("w0", "w1", "w2"):
        assert [e.reason for e in result.port.events_for(f"default/{name}")] == ["Scheduled"]


def test_gang_short_of_children_stays_gated_with_koordinators_reason(write_yaml: WriteYaml) -> None:
    result = simulate([write(write_yaml, node("n1", "8"), member("w0"), member("w1"))])
    for name in ("w0", "w1"):
        pod = result.pod(f"default/{name}")
        assert (pod.status, pod.attempts) == (UNSCHEDULABLE, 0)
        assert (
            pod.message
            == f"gang child pod not collect enough, gangName: default/train, podName: default/{name}"
        )
        # Said on the pod too (event and condition), once: no cycle ever ran for it.
        (event,) = result.port.events_for(f"default/{name}")
        assert (event.reason, event.message) == ("FailedScheduling", pod.message)


def test_pod_group_gang_waits_for_its_pod_group(write_yaml: WriteYaml) -> None:
    labels = {"pod-group.scheduling.sigs.k8s.io": "pg"}
    pods = [member(f"w{i}", gang="", labels=labels) for i in range(2)]
    result = simulate([write(write_yaml, node("n1", "8"), *pods)])
    assert result.pod("default/w0").message == (
        "gang has not init, gangName: default/pg, podName: default/w0; PodGroup default/pg not found"
    )
    pg = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "default"},
        "spec": {"minMember": 2},
    }
    result = simulate([write(write_yaml, node("n1", "8"), pg, *pods)])
    assert [p.status for p in result.pods] == [SCHEDULED] * 2


def test_non_strict_gang_times_out_on_virtual_time(write_yaml: WriteYaml) -> None:
    pods = [member(f"w{i}", mode="NonStrict", waiting_time="30s") for i in range(3)]
    result = simulate([write(write_yaml, node("n1"), *pods)])
    # Two members are assumed and wait; NonStrict does not reject them when the third fails, so
    # they are released by the 30 s timeout, which the simulator reaches without sleeping.
    for name in ("w0", "w1"):
        assert result.pod(f"default/{name}").message == (
            "rejected due to timeout after waiting 30s at plugin Coscheduling"
        )
    assert all(p.node is None for p in result.pods)
    assert [n.resources["cpu"][0] for n in result.nodes] == [0]
    assert result.summary.wall_seconds < 30


def test_gang_group_binds_only_when_every_gang_of_the_group_can(write_yaml: WriteYaml) -> None:
    groups = json.dumps(["default/a", "default/b"])
    pods = [member(f"a{i}", gang="a", min_available="2", groups=groups) for i in range(2)]
    pods += [member(f"b{i}", gang="b", min_available="2", groups=groups) for i in range(2)]
    # Room for three of the four: gang a alone would fit, but its group cannot.
    result = simulate([write(write_yaml, node("n1", "3"), *pods)])
    assert all(p.node is None for p in result.pods)
    result = simulate([write(write_yaml, node("n1", "4"), *pods)])
    assert all(p.status == SCHEDULED for p in result.pods)


# --- all or nothing across DeviceShare and NodeNUMAResource --------------------------------------


def h800_node() -> list[dict[str, Any]]:
    """gpu-h800-0 of examples/gpu-numa-cluster.yaml: 8 GPUs, 2 NUMA nodes of 96 CPUs, its Device and NRT."""
    docs = yaml.safe_load_all((ROOT / "examples" / "gpu-numa-cluster.yaml").read_text())
    return [d for d in docs if isinstance(d, dict) and d.get("metadata", {}).get("name") == "gpu-h800-0"]


def gpu_pod(pod_name: str, gpus: int, cpus: int, priority: int, **gang: str) -> dict[str, Any]:
    res = {"cpu": str(cpus), "memory": "16Gi", "nvidia.com/gpu": str(gpus)}
    annotations = {
        "scheduling.koordinator.sh/numa-topology-spec": json.dumps({"numaTopologyPolicy": "SingleNUMANode"})
    }
    if gang:
        annotations.update({GANG + k.replace("_", "-"): v for k, v in gang.items()})
    return pod_manifest(
        pod_name,
        uid="",
        labels={"koordinator.sh/qosClass": "LSR"},
        annotations=annotations,
        priority=priority,
        containers=[container("c", res, limits=res)],
    )


def test_rejected_gang_frees_every_gpu_and_cpuset_it_had_assumed(write_yaml: WriteYaml) -> None:
    # Three members of 4 GPUs and 32 CPUs on one NUMA node each: two NUMA nodes, room for two.
    members = [gpu_pod(f"m{i}", 4, 32, 100, name="train", min_available="3") for i in range(3)]
    # Tried after the gang (lower priority): fits only if the gang left nothing assumed.
    whole = gpu_pod("whole-node", 8, 64, 0)
    whole["metadata"]["annotations"] = {}
    result = simulate([write(write_yaml, *h800_node(), *members, whole)])
    assert [result.pod(f"default/m{i}").node for i in range(3)] == [None, None, None]
    assert result.pod("default/m0").message.startswith(
        'Gang "default/train" gets rejected due to member Pod "m2"'
    )
    big = result.pod("default/whole-node")
    assert (big.status, big.node) == (SCHEDULED, "gpu-h800-0")
    allocated = json.loads(big.annotations["scheduling.koordinator.sh/device-allocated"])
    assert sorted(g["minor"] for g in allocated["gpu"]) == list(range(8))
    status = json.loads(big.annotations["scheduling.koordinator.sh/resource-status"])
    assert status["cpuset"]


def test_gpu_gang_with_room_binds_all_members_on_distinct_numa_nodes(write_yaml: WriteYaml) -> None:
    members = [gpu_pod(f"m{i}", 4, 32, 100, name="train", min_available="2") for i in range(2)]
    result = simulate([write(write_yaml, *h800_node(), *members)])
    assert [p.status for p in result.pods] == [SCHEDULED] * 2
    minors = [
        {g["minor"] for g in json.loads(p.annotations["scheduling.koordinator.sh/device-allocated"])["gpu"]}
        for p in result.pods
    ]
    assert minors[0].isdisjoint(minors[1]) and minors[0] | minors[1] == set(range(8))


async def test_permit_waits_are_measured_as_kube_scheduler_labels_them(write_yaml: WriteYaml) -> None:
    from koordsched.backends.sim.loader import kind_specs, load_cluster
    from koordsched.backends.sim.runner import simulate_cluster
    from koordsched.config.default_profile import default_profile_path
    from koordsched.config.load import load_config
    from koordsched.observability.metrics import SchedulerMetrics
    from koordsched.plugins.registry import in_tree_registry

    registry = in_tree_registry()
    config = load_config(default_profile_path().read_bytes(), registry)
    path = write(write_yaml, node("n1", "8"), *(member(n) for n in ("w0", "w1", "w2")))
    metrics = SchedulerMetrics()
    result = await simulate_cluster(
        load_cluster([path], kind_specs(registry)), config, registry, metrics=metrics
    )
    assert result.summary.scheduled == 3

    def count(result_label: str) -> float:
        value = metrics.registry.get_sample_value(
            "scheduler_permit_wait_duration_seconds_count", {"result": result_label}
        )
        return value or 0.0

    # Two members waited and were allowed; the third completed the gang without waiting.
    assert (count("Success"), count("Unschedulable")) == (2.0, 0.0)


def test_gang_with_room_for_one_member_ends_instead_of_churning(write_yaml: WriteYaml) -> None:
    # Four members, min 3, room for one: each round one member waits and the next failure rejects
    # it. A member activated by the failed round does not start another one, so the run ends.
    pods = [member(f"w{i}", "3") for i in range(4)]
    result = simulate([write(write_yaml, node("n1", "4"), node("n2", "1"), *pods)])
    assert all(p.node is None for p in result.pods)
    assert max(p.attempts for p in result.pods) <= 2
    assert [n.resources["cpu"][0] for n in result.nodes] == [0, 0]


@pytest.mark.parametrize(
    ("annotations", "reason"),
    [
        (
            {GANG + "groups": "default/pg"},
            "annotation gang.scheduling.koordinator.sh/groups: must be a JSON list",
        ),
        ({GANG + "groups": '{"a": 1}'}, "Expected `array`, got `object`"),
        ({GANG + "groups": "[1, 2]"}, "Expected `str`, got `int`"),
        (
            {GANG + "groups": '["pg"]'},
            'annotation gang.scheduling.koordinator.sh/groups: "pg" is not a gang id',
        ),
    ],
)
def test_pod_group_with_unreadable_annotations_is_refused_on_every_member(
    write_yaml: WriteYaml, annotations: dict[str, str], reason: str
) -> None:
    """Issue 24, item 1: as an annotation gang's, the PodGroup gang is refused with its reason."""
    labels = {"pod-group.scheduling.sigs.k8s.io": "pg"}
    pods = [member(f"w{i}", gang="", labels=labels) for i in range(2)]
    pg = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "default", "annotations": annotations},
        "spec": {"minMember": 2},
    }
    result = simulate([write(write_yaml, node("n1", "8"), pg, *pods)])
    prefix = "gang has not init, gangName: default/pg, podName: default/{}; PodGroup default/pg: "
    for name in ("w0", "w1"):
        pod = result.pod(f"default/{name}")
        assert pod.status == UNSCHEDULABLE
        assert pod.message.startswith(prefix.format(name)) and reason in pod.message, pod.message
        (event,) = result.port.events_for(f"default/{name}")
        assert (event.reason, event.message) == ("FailedScheduling", pod.message)
    (warning,) = [w for w in result.warnings if w.startswith("gang default/pg is refused: ")]
    assert reason in warning and warning.endswith("; its pods are not scheduled")


def test_unreadable_total_number_is_defaulted_to_min_with_a_warning_on_each_member(
    write_yaml: WriteYaml,
) -> None:
    """Issue 24, item 7: as Koordinator (which logs it), total-number "two" counts min-available."""
    labels = {"pod-group.scheduling.sigs.k8s.io": "pg"}
    pods = [member(f"w{i}", gang="", labels=labels) for i in range(2)]
    pg = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "default", "annotations": {GANG + "total-number": "two"}},
        "spec": {"minMember": 2},
    }
    result = simulate([write(write_yaml, node("n1", "8"), pg, *pods)])
    note = (
        "gang default/pg: PodGroup default/pg: annotation gang.scheduling.koordinator.sh/total-number: "
        'invalid value "two": strconv.ParseInt: parsing "two": invalid syntax; read as 2, the gang\'s '
        "min-available, as Koordinator does"
    )
    for name in ("w0", "w1"):
        assert result.pod(f"default/{name}").status == SCHEDULED
        warned = [e for e in result.port.events_for(f"default/{name}") if e.reason == "GangValueDefaulted"]
        assert [(e.type, e.message) for e in warned] == [("Warning", note)]
        assert f"default/{name}: {note}" in result.warnings
