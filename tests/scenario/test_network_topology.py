"""Network-topology-aware gangs through `simulate`, as users run it (spec A).

The default profile with ``awareNetworkTopology: true`` and ``--enable-network-topology-manager``;
rows name the spec A.10 case they restate. A property test: on random spine/block trees a
MustGather gang never spans two domains of its layer, binds whole or not at all, and binds
exactly when some domain of that layer has room for it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordsched.backends.sim.report import render_table, to_json
from koordsched.backends.sim.runner import SCHEDULED, SimResult, simulate
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

ROOT = Path(__file__).resolve().parents[2]
SPINE, BLOCK = SPINE_LABEL, BLOCK_LABEL
SPEC = "gang.scheduling.koordinator.sh/network-topology-spec"
EIGHT = EIGHT_NODES
TOPOLOGY = spine_block_topology()


def aware_profile(directory: Path) -> Path:
    """The bundled profile with ``awareNetworkTopology: true``."""
    text = (ROOT / "config" / "koord-scheduler.yaml").read_text()
    args = (
        "    pluginConfig:\n      - name: Coscheduling\n        args:\n"
        "          apiVersion: kubescheduler.config.k8s.io/v1\n          kind: CoschedulingArgs\n"
        "          awareNetworkTopology: true\n"
    )
    assert "    pluginConfig:\n" in text
    path = directory / "aware.yaml"
    path.write_text(text.replace("    pluginConfig:\n", args, 1))
    return path


def cluster(
    spec: str | None, members: int, *, cpu: str = "16", node_cpu: str = "16", busy: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [TOPOLOGY]
    for name, (s, b) in sorted(EIGHT.items()):
        docs.append(node_manifest(name, node_cpu, "64Gi", 110, labels={SPINE: s, BLOCK: b}))
    running = {"phase": "Running"}
    # A pod already there fills the node.
    docs.extend(
        pod_manifest(f"busy-{name}", node_cpu, None, uid="", node_name=name, status=running) for name in busy
    )
    notes = {SPEC: spec} if spec is not None else {}
    docs.append(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "job", "namespace": "default", "annotations": notes},
            "spec": {"minMember": members},
        }
    )
    docs.extend(
        pod_manifest(f"pod-{i}", cpu, None, uid="", labels={"pod-group.scheduling.sigs.k8s.io": "job"})
        for i in range(1, members + 1)
    )
    return docs


def run(tmp_path: Path, docs: list[dict[str, Any]], *, manager: bool = True) -> SimResult:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml_docs(*docs))
    registry = in_tree_registry(network_topology_manager=True) if manager else None
    return simulate([path], config_path=aware_profile(tmp_path), registry=registry)


def placed(result: SimResult) -> dict[str, str | None]:
    return {p.key.partition("/")[2]: p.node for p in result.pods if p.key.startswith("default/pod-")}


def rules(strategy: str) -> str:
    both = [{"layer": "BlockLayer", "strategy": strategy}, {"layer": "SpineLayer", "strategy": strategy}]
    return json.dumps({"gatherStrategy": both})


PREFER_BOTH = rules("PreferGather")
MUST_BOTH = rules("MustGather")


@pytest.mark.parametrize(
    ("case", "docs", "plan", "domain"),
    [
        (
            "A.10 8 empty 16-CPU nodes; 4 pods x 16 CPU; PreferGather Block and Spine",
            cluster(PREFER_BOTH, 4),
            {"pod-1": "node-1", "pod-2": "node-8", "pod-3": "node-2", "pod-4": "node-7"},
            "SpineLayer/s1",
        ),
        (
            "A.10 same nodes; 2 pods; MustGather Block and Spine",
            cluster(MUST_BOTH, 2),
            {"pod-1": "node-1", "pod-2": "node-8"},
            "SpineLayer/s1 > BlockLayer/b1",
        ),
        (
            "A.10 nodes fitting 2 pods each; 2 pods; PreferGather",
            cluster(PREFER_BOTH, 2, cpu="8"),
            {"pod-1": "node-1", "pod-2": "node-1"},
            "SpineLayer/s1 > BlockLayer/b1 > NodeTopologyLayer/node-1",
        ),
        (
            "A.1 {} still turns topology on: the deepest domain that fits",
            cluster("{}", 2, cpu="8"),
            {"pod-1": "node-1", "pod-2": "node-1"},
            "SpineLayer/s1 > BlockLayer/b1 > NodeTopologyLayer/node-1",
        ),
    ],
)
def test_plans_through_simulate(
    tmp_path: Path, case: str, docs: list[dict[str, Any]], plan: dict[str, str], domain: str
) -> None:
    result = run(tmp_path, docs)
    assert placed(result) == plan, case
    (gang,) = result.summary.gangs
    assert gang.complete and gang.topology_domain == domain
    assert to_json(result)["gangs"][0]["topologyDomain"] == domain
    assert "DOMAIN" in render_table(result)


def test_must_gather_spine_without_room_fails_with_koordinators_message(tmp_path: Path) -> None:
    """A.10 MustGather Spine; 4 pods; s1 and s2 each have only 3 free nodes."""
    docs = cluster(
        '{"gatherStrategy":[{"layer":"SpineLayer","strategy":"MustGather"}]}', 4, busy=("node-7", "node-5")
    )
    result = run(tmp_path, docs)
    assert all(node is None for node in placed(result).values())
    message = result.pod("default/pod-1").message
    assert message.startswith(
        "0/8 nodes are available: no candidate topology nodes can accommodate job, desiredOfferSlot: 4, "
        "topology topologyNode SpineLayer/s1: 3;topology topologyNode SpineLayer/s2: 3, "
        "0/8 nodes are available: 8 Insufficient cpu.."
    ), message


def test_without_the_manager_a_topology_gang_has_no_tree(tmp_path: Path) -> None:
    """A.1/A.3: no --enable-network-topology-manager, no snapshot: UAU `no cluster network topology`."""
    result = run(tmp_path, cluster(PREFER_BOTH, 2), manager=False)
    assert all(node is None for node in placed(result).values())
    assert "no cluster network topology" in result.pod("default/pod-1").message


@pytest.mark.parametrize(
    ("case", "spec"),
    [("A.10 annotation absent: no requirement", None), ("A.10 invalid JSON: no requirement", "{bad")],
)
def test_no_requirement_schedules_as_a_plain_gang(tmp_path: Path, case: str, spec: str | None) -> None:
    result = run(tmp_path, cluster(spec, 3))
    assert all(node is not None for node in placed(result).values()), case
    assert result.summary.gangs[0].topology_domain == ""
    if spec is not None:
        # Koordinator only logs it; the user sees it here too.
        assert any("network-topology-spec" in w for w in result.warnings), result.warnings


# --- property -------------------------------------------------------------------------------------


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    spines=st.lists(
        st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=3), min_size=1, max_size=3),
        min_size=1,
        max_size=3,
    ),
    members=st.integers(1, 8),
    layer=st.sampled_from(["BlockLayer", "SpineLayer"]),
)
def test_must_gather_gangs_stay_in_one_domain(
    tmp_path: Path, spines: list[list[list[int]]], members: int, layer: str
) -> None:
    """spines[s][b] lists each node's free 1-cpu slots (node cpu = slots)."""
    docs: list[dict[str, Any]] = [TOPOLOGY]
    domain_of: dict[str, str] = {}
    capacity: dict[str, int] = {}
    for s, blocks in enumerate(spines):
        for b, nodes in enumerate(blocks):
            for n, slots in enumerate(nodes):
                name = f"n{s}-{b}-{n}"
                labels = {SPINE: f"s{s}", BLOCK: f"b{s}-{b}"}
                docs.append(node_manifest(name, str(slots) if slots else "0", "8Gi", 110, labels=labels))
                key = labels[SPINE] if layer == "SpineLayer" else labels[BLOCK]
                domain_of[name] = key
                capacity[key] = capacity.get(key, 0) + slots
    spec = json.dumps({"gatherStrategy": [{"layer": layer, "strategy": "MustGather"}]})
    docs.append(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "job", "namespace": "default", "annotations": {SPEC: spec}},
            "spec": {"minMember": members},
        }
    )
    docs.extend(
        pod_manifest(f"pod-{i}", "1", None, uid="", labels={"pod-group.scheduling.sigs.k8s.io": "job"})
        for i in range(members)
    )
    out = tmp_path / f"c{len(list(tmp_path.iterdir()))}"
    out.mkdir()
    result = run(out, docs)
    bound = [p for p in result.pods if p.status == SCHEDULED]
    assert len(bound) in (0, members)  # whole or nothing
    assert len({domain_of[p.node] for p in bound if p.node}) <= 1  # never two domains of the layer
    assert (len(bound) == members) == any(c >= members for c in capacity.values())


def _outcome(result: SimResult) -> list[tuple[str, str | None, str, str]]:
    return [(p.key, p.node, p.status, p.message) for p in result.pods]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    nodes=st.lists(
        st.tuples(
            st.integers(0, 6),  # cpu
            st.integers(1, 4),  # allowed pods
            st.integers(0, 2),  # 1-cpu pods already there
            st.sampled_from(["", "taint", "cordon"]),
            st.integers(0, 3),  # nvidia.com/gpu
        ),
        min_size=2,
        max_size=9,
    ),
    members=st.integers(1, 7),
    cpu=st.sampled_from(["1", "1", "2"]),
    tolerate=st.booleans(),
    gpu=st.booleans(),
    spec=st.sampled_from(
        [
            MUST_BOTH,
            PREFER_BOTH,
            json.dumps({"gatherStrategy": [{"layer": "SpineLayer", "strategy": "MustGather"}]}),
        ]
    ),
)
def test_counting_copies_decides_as_adding_them(
    tmp_path: Path,
    nodes: list[tuple[int, int, int, str, int]],
    members: int,
    cpu: str,
    tolerate: bool,
    gpu: bool,
    spec: str,
) -> None:
    """The solver's offer slots counted by the filters (``filter_copies``: resources, pod slots,
    taints, cordons, DeviceShare) give the plans, statuses and messages of adding each member in
    turn."""
    from unittest import mock

    from koordsched.framework.runtime import Framework

    docs: list[dict[str, Any]] = [TOPOLOGY]
    running = {"phase": "Running"}
    for i, (node_cpu, allowed, busy, mark, gpus) in enumerate(nodes):
        name = f"node-{i}"
        labels = {SPINE: f"s{i % 2}", BLOCK: f"b{i % 4}"}
        taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if mark == "taint" else None
        docs.append(
            node_manifest(
                name,
                str(node_cpu),
                "64Gi",
                allowed,
                labels=labels,
                taints=taints,
                unschedulable=mark == "cordon",
                **{"nvidia.com/gpu": str(gpus)},
            )
        )
        docs.extend(
            pod_manifest(f"busy-{i}-{k}", "1", None, uid="", node_name=name, status=running)
            for k in range(busy)
        )
    docs.append(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "job", "namespace": "default", "annotations": {SPEC: spec}},
            "spec": {"minMember": members},
        }
    )
    tolerations = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}] if tolerate else []
    for i in range(members):
        doc = pod_manifest(
            f"pod-{i}",
            cpu,
            None,
            uid="",
            labels={"pod-group.scheduling.sigs.k8s.io": "job"},
            requests={"nvidia.com/gpu": "1"} if gpu else None,
        )
        doc["spec"]["tolerations"] = tolerations
        docs.append(doc)
    counted: list[bool] = []
    real = Framework.filter_copies

    def spy(self: Framework, *args: Any) -> Any:
        got = real(self, *args)
        counted.append(got is not None)
        return got

    out = tmp_path / f"c{len(list(tmp_path.iterdir()))}"
    out.mkdir()
    with mock.patch.object(Framework, "filter_copies", spy):
        fast = run(out, docs)
    with mock.patch.object(Framework, "filter_copies", lambda *_: None):
        exact = run(out, docs)
    assert _outcome(fast) == _outcome(exact)
    assert all(counted)  # the filters of these pods always count (no nominated pods here)


# --- network-topology-selector scoring ------------------------------------------------------------

SELECTOR = "scheduling.koordinator.sh/network-topology-selector"


def scoring_profile(directory: Path) -> Path:
    """The aware profile with Coscheduling also scoring (weight 100, so it decides)."""
    text = aware_profile(directory).read_text()
    text = text.replace(
        "      preScore:\n        enabled:\n",
        "      preScore:\n        enabled:\n          - name: Coscheduling\n",
        1,
    )
    text = text.replace(
        "      score:\n        enabled:\n",
        "      score:\n        enabled:\n          - name: Coscheduling\n            weight: 100\n",
        1,
    )
    path = directory / "scoring.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("case", "existing", "expected"),
    [
        ("A.6 the node holding same-selector pods ranks first", ["node-3"], "node-3"),
        (
            "A.6 then its domain: more same-selector pods in block b4 than b3",
            ["node-4", "node-5", "node-3"],
            "node-4",
        ),
    ],
)
def test_selector_scoring_gathers_a_workload(
    tmp_path: Path, case: str, existing: list[str], expected: str
) -> None:
    docs: list[dict[str, Any]] = [TOPOLOGY]
    for name, (s, b) in sorted(EIGHT.items()):
        docs.append(node_manifest(name, "16", "64Gi", 110, labels={SPINE: s, BLOCK: b}))
    running = {"phase": "Running"}
    docs.extend(
        pod_manifest(
            f"old-{i}", "1", None, uid="", node_name=n, status=running, annotations={SELECTOR: "job-a"}
        )
        for i, n in enumerate(existing)
    )
    docs.append(pod_manifest("new", "1", None, uid="", annotations={SELECTOR: "job-a"}))
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml_docs(*docs))
    registry = in_tree_registry(network_topology_manager=True)
    result = simulate([path], config_path=scoring_profile(tmp_path), registry=registry)
    assert result.pod("default/new").node == expected, case


def test_the_example_places_each_job_as_its_comment_says() -> None:
    """examples/network-topology.yaml with its profile: llm-a in b1, llm-b over b3 and b4, llm-c none."""
    registry = in_tree_registry(network_topology_manager=True)
    result = simulate(
        [ROOT / "examples" / "network-topology.yaml"],
        config_path=ROOT / "examples" / "profiles" / "network-topology.yaml",
        registry=registry,
    )
    domains = {g.id: g.topology_domain for g in result.summary.gangs}
    assert domains == {
        "default/llm-a": "SpineLayer/s1 > BlockLayer/b1",
        "default/llm-b": "SpineLayer/s2",
        "default/llm-c": "",
    }
    nodes = {p.key: p.node for p in result.pods}
    assert {nodes[f"default/llm-b-{i}"][:6] for i in range(8)} == {"gpu-b3", "gpu-b4"}
    assert all(nodes[f"default/llm-c-{i}"] is None for i in range(6))
    assert result.pod("default/llm-c-0").message.startswith(
        "0/16 nodes are available: no candidate topology nodes can accommodate job, desiredOfferSlot: 6, "
    )
