"""Network-topology-aware gangs, unit level: the tree, the solver's steps and the annotations.

Each table row names the spec A.10 (or A.2/A.4/A.5) case it restates.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from koordsched.api.field_errors import Refused
from koordsched.api.network_topology import (
    ClusterNetworkTopology,
    GatherRule,
    NetworkTopologySpec,
    TopologySpecError,
    check_cluster_network_topology,
    parse_network_topology_spec,
    pod_count_multiples,
    sort_pods_by_index,
    topology_index,
)
from koordsched.framework.status import Code
from koordsched.framework.types import PodInfo
from koordsched.plugins.coscheduling.network_topology.manager import detail_status_body
from koordsched.plugins.coscheduling.network_topology.solver import (
    JobRequirements,
    OfferSlots,
    _Counters,
    apply_multiples,
    distribute,
    must_gather_layer,
    place,
)
from koordsched.plugins.coscheduling.network_topology.tree import (
    TopologyError,
    Tree,
    build_tree,
    order_layers,
)
from tests.builders import BLOCK_LABEL, EIGHT_NODES, SPINE_LABEL, make_node, make_pod, spine_block_topology

SPINE, BLOCK = SPINE_LABEL, BLOCK_LABEL
EIGHT = EIGHT_NODES


def topology(*layers: dict[str, Any]) -> ClusterNetworkTopology:
    body = {"metadata": {"name": "default"}, "spec": {"networkTopologySpec": list(layers)}}
    return msgspec.convert(body, ClusterNetworkTopology)


SPINE_BLOCK = msgspec.convert(spine_block_topology(), ClusterNetworkTopology)


def eight_node_tree() -> Tree:
    nodes = [make_node(n, labels={SPINE: s, BLOCK: b}) for n, (s, b) in EIGHT.items()]
    return build_tree(SPINE_BLOCK, nodes)


def test_status_of_the_eight_node_tree() -> None:
    """A.10 'Tree: 8 nodes with spine/block labels': root nodeNum 8 with [s1,s2], spines 4, blocks
    2 without childTopologyNames, depth first in name order."""
    body = detail_status_body(eight_node_tree().detail_status())
    assert [(e["topologyInfo"]["topologyName"], e["nodeNum"], e.get("childTopologyNames")) for e in body] == [
        ("", 8, ["s1", "s2"]),
        ("s1", 4, ["b1", "b2"]),
        ("b1", 2, None),
        ("b2", 2, None),
        ("s2", 4, ["b3", "b4"]),
        ("b3", 2, None),
        ("b4", 2, None),
    ]
    assert body[0]["topologyInfo"] == {"topologyLayer": "ClusterTopologyLayer", "topologyName": ""}
    assert "parentTopologyInfo" not in body[0]
    assert body[2]["childTopologyLayer"] == "NodeTopologyLayer"
    assert body[2]["parentTopologyInfo"] == {"topologyLayer": "SpineLayer", "topologyName": "s1"}


@pytest.mark.parametrize(
    ("case", "labels", "leaf_parent"),
    [
        ("A.10 node lacks only the label of the layer above Node: virtual domain", {SPINE: "s1"}, "n"),
        ("A.10 node lacks a higher-layer label: left out", {BLOCK: "b1"}, None),
        ("A.2 first non-empty labelKey names the domain", {SPINE: "s1", BLOCK: "b9"}, "b9"),
    ],
)
def test_placing_a_node(case: str, labels: dict[str, str], leaf_parent: str | None) -> None:
    tree = build_tree(SPINE_BLOCK, [make_node("n", labels=labels)])
    leaf = tree.leaves.get("n")
    assert (leaf.parent.name if leaf is not None and leaf.parent else None) == leaf_parent, case


def test_first_non_empty_label_key_wins() -> None:
    """A.1 labelKey is "any of": the first key with a non-empty value."""
    obj = topology(
        {"topologyLayer": "BlockLayer", "labelKey": ["a", "b"]},
        {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"},
    )
    tree = build_tree(obj, [make_node("n", labels={"a": "", "b": "blk"})])
    assert tree.leaves["n"].parent is not None and tree.leaves["n"].parent.name == "blk"


def test_domains_are_keyed_by_layer_and_name() -> None:
    """A.2 [QUIRK]: two spines naming the same block share it (under the spine seen first)."""
    nodes = [
        make_node("a", labels={SPINE: "s1", BLOCK: "b"}),
        make_node("b", labels={SPINE: "s2", BLOCK: "b"}),
    ]
    tree = build_tree(SPINE_BLOCK, nodes)
    assert tree.leaves["a"].parent is tree.leaves["b"].parent
    assert sorted(tree.root.children["s1"].children) == ["b"]
    assert tree.root.children["s2"].children == {}  # s2 is there, its block is s1's


@pytest.mark.parametrize(
    ("case", "layers", "error"),
    [
        (
            "A.1 NodeTopologyLayer missing",
            [{"topologyLayer": "BlockLayer"}],
            'topology layer "NodeTopologyLayer" not found in spec',
        ),
        (
            "A.1 chain runs past the top before every position is filled",
            [{"topologyLayer": "X"}, {"topologyLayer": "NodeTopologyLayer"}],
            'topology layer "" not found in spec',
        ),
        (
            "A.1 an extra layer off the chain",
            [
                {"topologyLayer": "Spare"},
                {"topologyLayer": "BlockLayer"},
                {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"},
            ],
            'topology layer "" not found in spec',
        ),
    ],
)
def test_layer_ordering_errors(case: str, layers: list[dict[str, Any]], error: str) -> None:
    with pytest.raises(TopologyError) as err:
        order_layers(topology(*layers).spec.network_topology_spec)
    assert str(err.value) == error, case


def test_layer_order_and_ancestors() -> None:
    """A.1: index 0 the top layer; unknown layers and the root get index 0 [QUIRK]."""
    tree = eight_node_tree()
    assert [layer.topology_layer for layer in tree.layers] == [
        "SpineLayer",
        "BlockLayer",
        "NodeTopologyLayer",
    ]
    assert tree.is_ancestor("SpineLayer", "BlockLayer")
    assert not tree.is_ancestor("BlockLayer", "SpineLayer")
    assert not tree.is_ancestor("ClusterTopologyLayer", "SpineLayer")


def test_refused_objects_name_their_field() -> None:
    with pytest.raises(Refused) as err:
        check_cluster_network_topology(
            topology({"topologyLayer": ""}, {"topologyLayer": "ClusterTopologyLayer"})
        )
    message = str(err.value)
    assert message.startswith('ClusterNetworkTopology.scheduling.koordinator.sh "default" is invalid: [')
    assert "spec.networkTopologySpec[0].topologyLayer: Required value" in message
    assert 'spec.networkTopologySpec[1].topologyLayer: Invalid value: "ClusterTopologyLayer"' in message
    with pytest.raises(Refused, match=r"spec.networkTopologySpec: Required value"):
        check_cluster_network_topology(topology())
    check_cluster_network_topology(SPINE_BLOCK)


# --- annotations ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "raw", "expected"),
    [
        ("A.10 annotation absent", None, None),
        ("A.10 annotation empty", "", None),
        ("A.1 {} turns topology on", "{}", NetworkTopologySpec()),
        (
            "A.1 a rule",
            '{"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather","podCountMultiple":4}]}',
            NetworkTopologySpec(
                gather_strategy=(GatherRule(layer="BlockLayer", strategy="MustGather", pod_count_multiple=4),)
            ),
        ),
    ],
)
def test_spec_annotation(case: str, raw: str | None, expected: NetworkTopologySpec | None) -> None:
    assert parse_network_topology_spec(raw) == expected, case


def test_invalid_spec_json_is_an_error() -> None:
    """A.10 invalid JSON → error (the gang then has no topology requirement)."""
    with pytest.raises(TopologySpecError, match="network-topology-spec"):
        parse_network_topology_spec("{not json")


@pytest.mark.parametrize(
    ("case", "spec", "multiples"),
    [
        (
            "A.10 podCountMultiple <= 1 ignored",
            NetworkTopologySpec(gather_strategy=(GatherRule(layer="B", pod_count_multiple=1),)),
            {},
        ),
        ("A.10 nil spec", None, {}),
        (
            "A.4 every rule with a multiple, whatever its strategy",
            NetworkTopologySpec(
                gather_strategy=(
                    GatherRule(layer="B", strategy="PreferGather", pod_count_multiple=4),
                    GatherRule(layer="S", strategy="MustGather", pod_count_multiple=8),
                )
            ),
            {"B": 4, "S": 8},
        ),
    ],
)
def test_pod_count_multiples(case: str, spec: NetworkTopologySpec | None, multiples: dict[str, int]) -> None:
    assert pod_count_multiples(spec) == multiples, case


def test_sort_pods_by_index() -> None:
    """A.10 SortPodsByIndex: indexed pods first by index, then the rest by name; unparsable = none."""
    key = "gang.scheduling.koordinator.sh/network-topology-index"
    pods = [
        make_pod("c"),
        make_pod("b", annotations={key: "x"}),
        make_pod("z", annotations={key: "1"}),
        make_pod("a", annotations={key: "2"}),
        make_pod("y", annotations={key: "1"}),
    ]
    assert [p.metadata.name for p in sort_pods_by_index(pods)] == ["y", "z", "a", "b", "c"]
    assert topology_index(None) == -1
    assert topology_index(make_pod("n")) == -1


# --- solver -----------------------------------------------------------------------------------------


def two_blocks() -> Tree:
    """A.4's tests: spine s1, blocks b1{n1,n2} and b2{n3,n4}."""
    labels = {"n1": "b1", "n2": "b1", "n3": "b2", "n4": "b2"}
    return build_tree(SPINE_BLOCK, [make_node(n, labels={SPINE: "s1", BLOCK: b}) for n, b in labels.items()])


SLOTS = {"n1": 5, "n2": 7, "n3": 6, "n4": 4}


def counters(tree: Tree, slots: dict[str, int], multiples: dict[str, int]) -> _Counters:
    c = _Counters()
    c.roll_up(tree, slots, c.slot)
    apply_multiples(tree, c, multiples)
    return c


def by_name(tree: Tree, c: _Counters) -> dict[str, int]:
    return {d.name: c.slot.get(d, 0) for d in tree.domains() if d.name}


@pytest.mark.parametrize(
    ("case", "multiples", "expected"),
    [
        (
            "A.4 Nodex4",
            {"NodeTopologyLayer": 4},
            {"n1": 4, "n2": 4, "n3": 4, "n4": 4, "b1": 8, "b2": 8, "s1": 16},
        ),
        ("A.4 Blockx8", {"BlockLayer": 8}, {"n1": 5, "n2": 7, "n3": 6, "n4": 4, "b1": 8, "b2": 8, "s1": 16}),
        (
            "A.4 Nodex2 plus Blockx8",
            {"NodeTopologyLayer": 2, "BlockLayer": 8},
            {"n1": 4, "n2": 6, "n3": 6, "n4": 4, "b1": 8, "b2": 8, "s1": 16},
        ),
        (
            "A.4 no multiples: plain roll-up",
            {},
            {"n1": 5, "n2": 7, "n3": 6, "n4": 4, "b1": 12, "b2": 10, "s1": 22},
        ),
    ],
)
def test_pod_count_multiple_pass(case: str, multiples: dict[str, int], expected: dict[str, int]) -> None:
    tree = two_blocks()
    assert by_name(tree, counters(tree, SLOTS, multiples)) == expected, case


@pytest.mark.parametrize(
    ("case", "multiples", "want", "domain", "expected"),
    [
        ("A.4 want 15, no multiples", {}, 15, "s1", {"n1": 5, "n2": 7, "n3": 3, "n4": 0}),
        (
            "A.4 want 20 with Blockx8 (16: the candidate fails)",
            {"BlockLayer": 8},
            20,
            "s1",
            {"n2": 7, "n1": 1, "n3": 6, "n4": 2},
        ),
    ],
)
def test_distribution(
    case: str, multiples: dict[str, int], want: int, domain: str, expected: dict[str, int]
) -> None:
    tree = two_blocks()
    c = counters(tree, SLOTS, multiples)
    start = next(d for d in tree.domains() if d.name == domain)
    out: dict[str, int] = {}
    _, total = distribute(c, multiples, start, want, out)
    assert out == expected, case
    assert total == sum(expected.values())


def test_distribution_block_of_five_and_five_with_node_multiple() -> None:
    """A.4 'Block {5,5} with Nodex4, want 10 → 4 + 4 = 8'."""
    tree = two_blocks()
    multiples = {"NodeTopologyLayer": 4}
    c = counters(tree, {"n1": 5, "n2": 5}, multiples)
    b1 = next(d for d in tree.domains() if d.name == "b1")
    out: dict[str, int] = {}
    assert distribute(c, multiples, b1, 10, out)[1] == 8
    assert out == {"n1": 4, "n2": 4}


def domain(tree: Tree, name: str) -> Any:
    return next(d for d in tree.domains() if d.name == name)


@pytest.mark.parametrize(
    ("case", "slots", "a", "b", "lower_first", "a_first"),
    [
        (
            "A.10 comparator b1 (2) vs b4 (3), lowerFirst",
            {"node-1": 1, "node-8": 1, "node-4": 1, "node-5": 1, "node-3": 1},
            "b1",
            "b4",
            True,
            True,
        ),
        (
            "A.10 comparator b1 (2) vs b4 (3), lowerFirst=false",
            {"node-1": 1, "node-8": 1, "node-4": 1, "node-5": 1, "node-3": 1},
            "b1",
            "b4",
            False,
            False,
        ),
        (
            "A.10 equal slots, parents 3 vs 4: child of the smaller parent first",
            {"node-1": 1, "node-8": 1, "node-2": 1, "node-3": 1, "node-6": 1, "node-4": 1, "node-5": 1},
            "b1",
            "b3",
            True,
            True,
        ),
    ],
)
def test_comparator(
    case: str, slots: dict[str, int], a: str, b: str, lower_first: bool, a_first: bool
) -> None:
    tree = eight_node_tree()
    c = counters(tree, slots, {})
    assert c.less(domain(tree, a), domain(tree, b), lower_first) is a_first, case


def test_comparator_scores_then_names() -> None:
    """A.10 'equal slot chains, scores 200 vs 100 → higher score first'; then the name."""
    tree = eight_node_tree()
    c = counters(tree, {"node-1": 1, "node-8": 1, "node-2": 1, "node-7": 1}, {})
    c.roll_up(tree, {"node-2": 200, "node-1": 100}, c.score)
    assert c.less(domain(tree, "b2"), domain(tree, "b1"), True)
    c2 = counters(tree, {"node-1": 1, "node-8": 1, "node-2": 1, "node-7": 1}, {})
    assert c2.less(domain(tree, "b1"), domain(tree, "b2"), True)


def infos(n: int) -> list[PodInfo]:
    return [PodInfo(make_pod(f"pod-{i}"), {}) for i in range(1, n + 1)]


ALL_ONE = OfferSlots(dict.fromkeys(EIGHT, 1), {})


@pytest.mark.parametrize(
    ("case", "rules", "pods", "slots", "plan", "domain_name"),
    [
        (
            "A.10 4 pods, PreferGather Block and Spine: spine s1, blocks b1 then b2",
            [("BlockLayer", "PreferGather"), ("SpineLayer", "PreferGather")],
            4,
            ALL_ONE,
            {"pod-1": "node-1", "pod-2": "node-8", "pod-3": "node-2", "pod-4": "node-7"},
            "s1",
        ),
        (
            "A.10 2 pods, MustGather Block and Spine: block b1",
            [("BlockLayer", "MustGather"), ("SpineLayer", "MustGather")],
            2,
            ALL_ONE,
            {"pod-1": "node-1", "pod-2": "node-8"},
            "b1",
        ),
        (
            "A.10 nodes fitting 2 pods each; 2 pods; PreferGather: both on node-1",
            [("BlockLayer", "PreferGather")],
            2,
            OfferSlots(dict.fromkeys(EIGHT, 2), {}),
            {"pod-1": "node-1", "pod-2": "node-1"},
            "node-1",
        ),
    ],
)
def test_plans(
    case: str,
    rules: list[tuple[str, str]],
    pods: int,
    slots: OfferSlots,
    plan: dict[str, str],
    domain_name: str,
) -> None:
    tree = eight_node_tree()
    spec = NetworkTopologySpec(
        gather_strategy=tuple(GatherRule(layer=layer, strategy=s) for layer, s in rules)
    )
    job = JobRequirements(must_gather_layer(spec, tree), pods, pod_count_multiples(spec))
    result = place(infos(pods), slots, tree, job, num_nodes=8)
    assert result.ok, result.status.message()
    assert {k.partition("/")[2]: v for k, v in result.plan.items()} == plan, case
    assert result.domain is not None and result.domain.name == domain_name


def test_lowest_must_gather_layer_wins() -> None:
    """A.4 step 1 (and A.10 TopologyKeyToExplain=BlockLayer): Block before Spine, whatever the order."""
    tree = eight_node_tree()
    for rules in (
        (("SpineLayer", "MustGather"), ("BlockLayer", "MustGather")),
        (("BlockLayer", "MustGather"), ("SpineLayer", "MustGather")),
    ):
        spec = NetworkTopologySpec(
            gather_strategy=tuple(GatherRule(layer=layer, strategy=s) for layer, s in rules)
        )
        assert must_gather_layer(spec, tree) == "BlockLayer"
    assert must_gather_layer(NetworkTopologySpec(), tree) == ""


def test_must_gather_spine_that_no_spine_holds() -> None:
    """A.10 MustGather Spine; 4 pods; s1 and s2 each have only 3 free nodes: Koordinator's message."""
    from koordsched.framework.status import Status

    tree = eight_node_tree()
    full = {"node-7", "node-5"}
    insufficient = Status.unschedulable("Insufficient cpu")
    slots = OfferSlots(
        {n: 0 if n in full else 1 for n in EIGHT},
        dict.fromkeys(EIGHT, insufficient),
    )
    job = JobRequirements("SpineLayer", 4)
    result = place(infos(4), slots, tree, job, num_nodes=8)
    assert result.status.code is Code.UNSCHEDULABLE
    assert result.status.message() == (
        "no candidate topology nodes can accommodate job, desiredOfferSlot: 4, topology topologyNode "
        "SpineLayer/s1: 3;topology topologyNode SpineLayer/s2: 3, "
        "0/8 nodes are available: 8 Insufficient cpu."
    )


def test_failure_names_the_multiples_and_the_root() -> None:
    """A.4 step 9: the root prints as ClusterTopologyLayer/: N; multiples as a suffix."""
    tree = two_blocks()
    job = JobRequirements("", 20, {"BlockLayer": 8, "NodeTopologyLayer": 2})
    result = place(infos(20), OfferSlots(dict(SLOTS), {}), tree, job, num_nodes=4)
    assert result.status.message() == (
        "no candidate topology nodes can accommodate job, desiredOfferSlot: 20, topology topologyNode "
        "ClusterTopologyLayer/: 16, 0/4 nodes are available:; podCountMultiple constraints: "
        "BlockLayer=8, NodeTopologyLayer=2"
    )


def test_pods_are_assigned_by_name_not_index() -> None:
    """A.4 step 8b [QUIRK]: names sort as strings, so pod-10 goes before pod-2."""
    tree = eight_node_tree()
    pods = [PodInfo(make_pod(n), {}) for n in ("pod-2", "pod-10")]
    result = place(pods, ALL_ONE, tree, JobRequirements("BlockLayer", 2), num_nodes=8)
    assert result.plan == {"default/pod-10": "node-1", "default/pod-2": "node-8"}


# --- PreFilter pin and the status controller ----------------------------------------------------------


def _gang_plugin(
    spec: str | None, *, aware: bool = True, manager: bool = True
) -> tuple[Any, Any, list[PodInfo]]:
    from koordsched.api.kinds import CLUSTER_NETWORK_TOPOLOGIES, POD_GROUPS
    from koordsched.plugins.coscheduling import CoschedulingArgs
    from tests.plugins.coscheduling.helpers import make, pod_group

    plugin, handle = make(CoschedulingArgs(aware_network_topology=aware))
    if manager:
        plugin.topology.enable_manager()
    handle.put(CLUSTER_NETWORK_TOPOLOGIES, SPINE_BLOCK)
    notes = {"network_topology_spec": spec} if spec is not None else {}
    handle.put(POD_GROUPS, pod_group("job", 2, **notes))
    pods = []
    for name in ("pod-1", "pod-2"):
        p = make_pod(name, labels={"pod-group.scheduling.sigs.k8s.io": "job"})
        plugin.on_pod_event(None, p, None)
        pods.append(PodInfo(p, {}))
    return plugin, handle, pods


@pytest.mark.parametrize(
    ("case", "spec", "aware", "second"),
    [
        ("A.10 PreFilter for the next pod with a plan: its planned node", "{}", True, {"node-8"}),
        ("A.10 no spec: nil result", None, True, None),
        ("A.3 awareNetworkTopology off: the annotation is not read", "{}", False, None),
    ],
)
def test_pre_filter_pins_later_pods_to_the_plan(
    case: str, spec: str | None, aware: bool, second: Any
) -> None:
    from koordsched.framework.cycle_state import CycleState

    plugin, _, (first, later) = _gang_plugin(spec, aware=aware)
    result, status = plugin.pre_filter(CycleState(), first)
    assert status.ok and result is None, case  # the first pod: FindOneNode plans
    ctx = plugin.topology.contexts.get("default/job")
    if ctx is not None and ctx.spec is not None:
        ctx.plan = {"default/pod-1": "node-1", "default/pod-2": "node-8"}
    result, status = plugin.pre_filter(CycleState(), later)
    assert status.ok, case
    assert (result.node_names if result is not None else None) == second, case


def test_a_later_pod_without_a_plan_entry_is_an_error() -> None:
    """A.3: `no planned pods` (Error) for a pod the plan does not name."""
    from koordsched.framework.cycle_state import CycleState

    plugin, _, (first, later) = _gang_plugin("{}")
    plugin.pre_filter(CycleState(), first)
    _, status = plugin.pre_filter(CycleState(), later)
    assert status.code is Code.ERROR and status.message() == "no planned pods"


def test_no_tree_is_unresolvable() -> None:
    """A.3 step 1: with no tree the pod fails UAU `no cluster network topology`."""
    from koordsched.framework.cycle_state import CycleState

    fresh, _, (first, _) = _gang_plugin("{}", manager=False)
    _, status = fresh.pre_filter(CycleState(), first)
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message() == "no cluster network topology"


def test_status_controller_writes_the_tree_once() -> None:
    """A.2: status.detailStatus written through the status subresource when it differs."""
    from koordsched.api.kinds import CLUSTER_NETWORK_TOPOLOGIES
    from koordsched.framework.controllers import ObjectWrite, WriteResult
    from koordsched.framework.snapshot import Snapshot
    from koordsched.plugins.coscheduling.network_topology.manager import TopologyStatusController
    from tests.fakes import FakeHandle

    snap = Snapshot()
    for n, (s, b) in EIGHT.items():
        snap.add_node(make_node(n, labels={SPINE: s, BLOCK: b}), {})
    from koordsched.plugins.coscheduling import Coscheduling

    handle = FakeHandle(snap)
    plugin = Coscheduling(None, handle)
    plugin.topology.enable_manager()
    handle.put(CLUSTER_NETWORK_TOPOLOGIES, SPINE_BLOCK)
    controller = TopologyStatusController([plugin])
    (write,) = controller.reconcile()
    assert isinstance(write, ObjectWrite)
    (patch,) = write.patches
    assert (patch.name, patch.subresource, patch.object_fallback) == ("default", "status", True)
    assert patch.body["status"]["detailStatus"][0]["nodeNum"] == 8
    assert controller.reconcile() == []  # sent, not yet seen back
    controller.applied(write, WriteResult(500, "boom"))
    assert len(controller.reconcile()) == 1  # a failed write is sent again
    stored = msgspec.convert(
        {**msgspec.to_builtins(SPINE_BLOCK), "status": patch.body["status"]}, ClusterNetworkTopology
    )
    handle.put(CLUSTER_NETWORK_TOPOLOGIES, stored)
    assert controller.reconcile() == []  # the object shows it


def test_a_gang_the_solver_rejected_is_requeued_when_room_may_be_freed() -> None:
    """Coscheduling is the rejecting plugin of a topology gang: an assigned pod's deletion (its
    job-level preemption's victims leaving) or a new node brings it back; other gangs stay."""
    from koordsched.framework.cycle_state import CycleState
    from koordsched.framework.status import Status
    from koordsched.framework.types import ASSIGNED_POD_DELETE, NODE_ADD
    from koordsched.plugins.coscheduling.network_topology.solver import SolverResult

    plugin, _, (first, later) = _gang_plugin("{}")
    hints = {
        e.event: e.hint for e in plugin.events_to_register() if e.event in (ASSIGNED_POD_DELETE, NODE_ADD)
    }
    assert set(hints) == {ASSIGNED_POD_DELETE, NODE_ADD}
    hint = hints[ASSIGNED_POD_DELETE]
    assert hint is not None and hints[NODE_ADD] == hint
    assert not hint(later, None, None)  # no round yet
    plugin.pre_filter(CycleState(), first)
    ctx = plugin.topology.contexts["default/job"]
    ctx.result = SolverResult(Status.unschedulable("no candidate topology nodes can accommodate job"))
    assert hint(later, None, None)
    ctx.result = SolverResult(Status())  # planned: nothing to wait for
    assert not hint(later, None, None)
    assert not hint(PodInfo(make_pod("plain"), {}), None, None)
