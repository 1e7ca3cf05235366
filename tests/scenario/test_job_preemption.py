"""Job-level preemption through `simulate` (Coscheduling ``enablePreemption: true``).

A high-priority gang on a full cluster evicts, for all its members at once, the victims one plan
needs, and then binds whole; a gang that would only fit in part evicts nobody and binds nobody
(where the per-pod preemption of the same profile without the arg evicts for one member).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from koordsched.backends.sim.runner import PREEMPTED, SCHEDULED, UNSCHEDULABLE, simulate
from koordsched.plugins.registry import in_tree_registry
from tests.builders import (
    BLOCK_LABEL,
    EIGHT_NODES,
    SPINE_LABEL,
    node_manifest,
    pod_manifest,
    spine_block_topology,
    yaml_docs,
)
from tests.plugins.coscheduling.job_helpers import GANG, HIGH, LOW, profile
from tests.scenario.helpers import WriteYaml


def nodes(n: int, cpu: str = "32") -> list[dict[str, Any]]:
    return [node_manifest(f"node-{i}", cpu, "256Gi", 110) for i in range(1, n + 1)]


def low(name: str, node: str, cpu: str = "16", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return pod_manifest(
        name, cpu, None, node_name=node, priority=LOW, labels=labels, status={"phase": "Running"}
    )


def members(n: int, cpu: str = "16", size: int | None = None) -> list[dict[str, Any]]:
    notes = {GANG + "name": "train", GANG + "min-available": str(size or n)}
    return [pod_manifest(f"m-{i}", cpu, None, priority=HIGH, annotations=notes) for i in range(n)]


def run(write_yaml: WriteYaml, tmp_path: Path, docs: list[dict[str, Any]], *, enable: bool = True) -> Any:
    config = tmp_path / "profile.yaml"
    config.write_bytes(profile(enable))
    return simulate([write_yaml(yaml_docs(*docs))], config_path=config)


def test_a_gang_preempts_for_all_its_members_and_binds_whole(write_yaml: WriteYaml, tmp_path: Path) -> None:
    # B.6: 2 nodes x 32 CPU with 2 low-priority 16-CPU pods each; a gang of 2 x 16 CPU.
    docs = nodes(2) + [low(f"existing-pod-{i}", f"node-{(i + 1) // 2}") for i in range(1, 5)] + members(2)
    result = run(write_yaml, tmp_path, docs)
    assert [(p.name, p.status) for p in result.pods if p.status == PREEMPTED] == [
        ("existing-pod-1", PREEMPTED),
        ("existing-pod-2", PREEMPTED),
    ]
    assert [(result.pod(f"default/m-{i}").status, result.pod(f"default/m-{i}").node) for i in range(2)] == [
        (SCHEDULED, "node-1"),
        (SCHEDULED, "node-1"),
    ]
    message = result.pod("default/existing-pod-1").message
    assert message == (
        "koord-scheduler: preempting to accommodate higher priority pods, "
        "preemptor: default/train, triggerPod: default/m-0"
    )
    (report,) = result.summary.gangs
    assert report.complete and report.bound == 2


def test_a_gang_with_room_for_half_of_it_evicts_nobody(write_yaml: WriteYaml, tmp_path: Path) -> None:
    # node-2's pod has the gang's priority: evicting node-1's would make room for one member of two.
    high = pod_manifest("b", "16", None, node_name="node-2", priority=HIGH, status={"phase": "Running"})
    docs = [*nodes(2, "16"), low("a", "node-1"), high, *members(2)]
    result = run(write_yaml, tmp_path, docs)
    assert [p.name for p in result.pods if p.status == PREEMPTED] == []
    assert [result.pod(f"default/m-{i}").status for i in range(2)] == [UNSCHEDULABLE] * 2
    assert "preemption: 0/2 nodes are available: 1 Insufficient cpu, 1 no potential victims." in (
        result.pod("default/m-0").message
    )
    # Without enablePreemption the per-pod preemption evicts 'a' for one member (who cannot bind).
    per_pod = run(write_yaml, tmp_path, docs, enable=False)
    assert [p.name for p in per_pod.pods if p.status == PREEMPTED] == ["a"]
    assert [per_pod.pod(f"default/m-{i}").status for i in range(2)] == [UNSCHEDULABLE] * 2


# --- network-topology gangs (spec A.7, B.6) -------------------------------------------------------

SPEC = "gang.scheduling.koordinator.sh/network-topology-spec"
MUST_SPINE = '{"gatherStrategy":[{"layer":"SpineLayer","strategy":"MustGather"}]}'


def topology_gang(members: int, spec: str = MUST_SPINE, cpu: str = "16") -> list[dict[str, Any]]:
    """PodGroup ``job`` with the topology spec, and its pending members pod-1..pod-N."""
    group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "default", "annotations": {SPEC: spec}},
        "spec": {"minMember": members},
    }
    label = {"pod-group.scheduling.sigs.k8s.io": "job"}
    pods = [pod_manifest(f"pod-{i}", cpu, None, priority=HIGH, labels=label) for i in range(1, members + 1)]
    return [group, *pods]


def run_topology(write_yaml: WriteYaml, tmp_path: Path, docs: list[dict[str, Any]]) -> Any:
    config = tmp_path / "topology-profile.yaml"
    config.write_bytes(profile(aware=True))
    registry = in_tree_registry(network_topology_manager=True)
    return simulate([write_yaml(yaml_docs(*docs))], config_path=config, registry=registry)


def test_a_topology_gang_preempts_and_binds_in_the_same_run(write_yaml: WriteYaml, tmp_path: Path) -> None:
    # B.6 "Topology, MustGather Spine; 4 pods; s1 has 3 free nodes plus a low-priority pod on
    # node-1" (s2's node-5 holds a pod of higher priority). The victims' deletion brings the gang
    # back at once, and its retry does not count its own members' nominations against it.
    docs: list[dict[str, Any]] = [spine_block_topology()]
    docs += [
        node_manifest(name, "16", "64Gi", 110, labels={SPINE_LABEL: s, BLOCK_LABEL: b})
        for name, (s, b) in sorted(EIGHT_NODES.items())
    ]
    docs += [low("existing-pod-1", "node-1"), low("high-5", "node-5")]
    docs[-1]["spec"]["priority"] = HIGH + 1
    docs += topology_gang(4)
    result = run_topology(write_yaml, tmp_path, docs)
    assert [p.name for p in result.pods if p.status == PREEMPTED] == ["existing-pod-1"]
    placed = {f"pod-{i}": result.pod(f"default/pod-{i}") for i in range(1, 5)}
    assert {n: (p.status, p.node) for n, p in placed.items()} == {
        "pod-1": (SCHEDULED, "node-1"),
        "pod-2": (SCHEDULED, "node-8"),
        "pod-3": (SCHEDULED, "node-2"),
        "pod-4": (SCHEDULED, "node-7"),
    }
    (report,) = result.summary.gangs
    assert report.complete and report.topology_domain == "SpineLayer/s1"
    assert result.pod("default/existing-pod-1").message == (
        "koord-scheduler: preempting to accommodate higher priority pods, "
        "preemptor: default/job, triggerPod: default/pod-1"
    )


ROOT = Path(__file__).resolve().parents[2]


def test_the_example_preempts_one_job_for_the_whole_gang() -> None:
    """examples/job-preemption.yaml with its profile: batch-a's pods on cpu-1 and cpu-3 go, the
    gang binds there; with the default profile each member preempts for itself (two jobs)."""
    example = ROOT / "examples" / "job-preemption.yaml"
    result = simulate([example], config_path=ROOT / "examples" / "profiles" / "job-preemption.yaml")
    assert sorted((p.name, p.node) for p in result.pods if p.status == PREEMPTED) == [
        ("batch-a-1", "cpu-1"),
        ("batch-a-2", "cpu-1"),
        ("batch-a-3", "cpu-3"),
        ("batch-a-4", "cpu-3"),
    ]
    assert {(p.name, p.status, p.node) for p in result.pods if p.name.startswith("train-")} == {
        ("train-0", SCHEDULED, "cpu-1"),
        ("train-1", SCHEDULED, "cpu-3"),
    }
    (report,) = result.summary.gangs
    assert report.complete
    per_pod = simulate([example])
    assert sorted(p.name for p in per_pod.pods if p.status == PREEMPTED) == [
        "batch-a-0",
        "batch-a-3",
        "batch-a-4",
        "batch-b-0",
    ]
