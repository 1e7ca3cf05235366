"""Job-level preemption on random small clusters, checked against a brute-force search.

Nodes of a few CPUs hold running pods of random priority, job and preemptibility; a
high-priority gang of identical members arrives. When a member fits nowhere, Coscheduling's
PostFilter preempts for the whole gang. The properties:

* only pods of strictly lower priority without a non-preemptible label are evicted;
* it preempts exactly when some set of victims makes room for every pending member (a gang
  never preempts for part of itself), and then it takes no more victim jobs than the fewest
  any plan needs (the search below tries every set of jobs);
* through ``simulate``, the gang ends up all bound or none bound.

The same for network-topology gangs (MustGather Block or Spine on random trees), at the end.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordsched.api.core import Pod
from koordsched.backends.sim.runner import SCHEDULED, simulate
from koordsched.plugins.registry import in_tree_registry
from tests.builders import (
    BLOCK_LABEL,
    SPINE_LABEL,
    node,
    node_manifest,
    pod_manifest,
    spine_block_topology,
    yaml_docs,
)
from tests.plugins.coscheduling.job_helpers import (
    GANG,
    HIGH,
    TOPOLOGY_SPEC,
    coscheduling,
    member,
    profile,
    run_until_failure,
    topology_member,
    topology_world,
    victim,
    world,
)

JOB = "scheduling.koordinator.sh/questioned-object-key"
NON_PREEMPTIBLE = {"scheduling.koordinator.sh/disable-preemptible": "true"}


@dataclass(frozen=True)
class Running:
    name: str
    node: int
    cpu: int
    priority: int
    job: str
    preemptible: bool

    def labels(self) -> dict[str, str]:
        out = {JOB: self.job} if self.job else {}
        return out if self.preemptible else {**out, **NON_PREEMPTIBLE}

    @property
    def eligible(self) -> bool:
        return self.priority < HIGH and self.preemptible


@dataclass(frozen=True)
class Cluster:
    capacity: tuple[int, ...]
    running: tuple[Running, ...]
    members: int
    cpu: int


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    capacity = tuple(draw(st.lists(st.integers(2, 6), min_size=1, max_size=3)))
    running: list[Running] = []
    for n, cap in enumerate(capacity):
        # Nodes nearly full, so that the gang mostly needs preemption.
        free = cap - draw(st.integers(0, 1))
        i = 0
        while free > 0:
            cpu = min(draw(st.integers(1, 3)), free)
            free -= cpu
            running.append(
                Running(
                    f"r{n}-{i}",
                    n,
                    cpu,
                    draw(st.sampled_from([10, 20, 30, HIGH])),
                    draw(st.sampled_from(["", "job-a", "job-b", "job-c"])),
                    draw(st.booleans()) or draw(st.booleans()),
                )
            )
            i += 1
    return Cluster(capacity, tuple(running), draw(st.integers(1, 3)), draw(st.integers(1, 3)))


def fewest_jobs(cluster: Cluster, free: list[int], pending: int) -> int | None:
    """The fewest victim jobs whose eligible pods, all evicted, make room for ``pending``
    members of ``cluster.cpu`` each (None: no set does)."""
    jobs = sorted({r.job for r in cluster.running if r.eligible})
    for k in range(len(jobs) + 1):
        for chosen in combinations(jobs, k):
            room = list(free)
            for r in cluster.running:
                if r.eligible and r.job in chosen:
                    room[r.node] += r.cpu
            if sum(f // cluster.cpu for f in room) >= pending:
                return k
    return None


def pods_of(cluster: Cluster) -> list[Pod]:
    pods = [victim(r.name, f"n{r.node}", str(r.cpu), r.priority, labels=r.labels()) for r in cluster.running]
    pods += [member(f"m-{i}", str(cluster.cpu), size=cluster.members) for i in range(cluster.members)]
    return pods


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_job_preemption_evicts_only_what_the_fewest_jobs_need(cluster: Cluster) -> None:
    fits_now = sum(
        (cap - sum(r.cpu for r in cluster.running if r.node == n)) // cluster.cpu
        for n, cap in enumerate(cluster.capacity)
    )
    if fits_now >= cluster.members:
        return  # the gang fits without preemption: nothing to check
    nodes = [node(f"n{n}", str(cap), "64Gi") for n, cap in enumerate(cluster.capacity)]
    sched, port = world(nodes, pods_of(cluster))
    run_until_failure(sched)
    gang = coscheduling(sched).cache.get("default/train")
    assert gang is not None
    # Free CPUs at PostFilter: members already waiting at Permit hold theirs.
    free = [
        cap - sum(r.cpu for r in cluster.running if r.node == n) for n, cap in enumerate(cluster.capacity)
    ]
    for uid in gang.waiting:
        held = sched.waiting_pods.get(uid)
        assert held is not None
        free[int(held.node_name[1:])] -= cluster.cpu
    pending = cluster.members - len(gang.waiting)
    by_name = {r.name: r for r in cluster.running}
    evicted = [by_name[v] for _, _, vs in port.preempted for v in vs]
    assert all(r.eligible for r in evicted), evicted
    best = fewest_jobs(cluster, free, pending)
    if best is None:
        assert evicted == [] and not any(port.nominated.values())
        return
    nominated = [n for n in port.nominated.values() if n]
    assert len(nominated) == pending, port.nominated
    assert len({r.job for r in evicted}) == best, (evicted, best)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(cluster=clusters())
def test_a_preempting_gang_binds_whole_or_not_at_all(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("jp")
    (root / "profile.yaml").write_bytes(profile())
    docs = [node_manifest(f"n{n}", str(cap), "64Gi", 110) for n, cap in enumerate(cluster.capacity)]
    docs += [
        pod_manifest(
            r.name,
            str(r.cpu),
            None,
            node_name=f"n{r.node}",
            priority=r.priority,
            labels=r.labels(),
            status={"phase": "Running"},
        )
        for r in cluster.running
    ]
    notes = {GANG + "name": "train", GANG + "min-available": str(cluster.members)}
    docs += [
        pod_manifest(f"m-{i}", str(cluster.cpu), None, priority=HIGH, annotations=notes)
        for i in range(cluster.members)
    ]
    (root / "cluster.yaml").write_text(yaml_docs(*docs))
    result = simulate([root / "cluster.yaml"], config_path=root / "profile.yaml")
    bound = [result.pod(f"default/m-{i}").status == SCHEDULED for i in range(cluster.members)]
    assert all(bound) or not any(bound), bound
    by_name = {r.name: r for r in cluster.running}
    for p in result.pods:
        if p.status == "Preempted":
            assert by_name[p.name].eligible, p.name


# --- network-topology gangs ------------------------------------------------------------------------
#
# Random spine/block trees of small nodes, nearly full of running pods; a MustGather gang (Block
# or Spine) of identical members with job-level preemption on. The properties, besides the victim
# rule: a plan exists exactly when evicting some victim jobs gives one domain of the layer room for
# every member (brute force over domains and sets of jobs), and then the preemption takes no more
# victim jobs than the fewest such a set has, with every member nominated inside one domain; through
# ``simulate`` the gang binds whole in one domain exactly then (its victims' deletion requeues it).


@dataclass(frozen=True)
class TopologyCluster:
    #: node name -> (spine, block)
    layout: tuple[tuple[str, tuple[str, str]], ...]
    capacity: tuple[tuple[str, int], ...]
    running: tuple[Running, ...]
    members: int
    cpu: int
    layer: str

    def domain(self, node: str) -> str:
        spine, block = dict(self.layout)[node]
        return spine if self.layer == "SpineLayer" else block

    def spec(self) -> str:
        return json.dumps({"gatherStrategy": [{"layer": self.layer, "strategy": "MustGather"}]})

    def free(self) -> dict[str, int]:
        left = dict(self.capacity)
        for r in self.running:
            left[f"t{r.node}"] -= r.cpu
        return left


@st.composite
def topology_clusters(draw: st.DrawFn) -> TopologyCluster:
    layout: list[tuple[str, tuple[str, str]]] = []
    capacity: list[tuple[str, int]] = []
    running: list[Running] = []
    shape = draw(st.lists(st.lists(st.integers(1, 2), min_size=1, max_size=2), min_size=1, max_size=2))
    n = 0
    for s, blocks in enumerate(shape):
        for b, count in enumerate(blocks):
            for _ in range(count):
                name, cap = f"t{n}", draw(st.integers(1, 4))
                layout.append((name, (f"s{s}", f"b{s}{b}")))
                capacity.append((name, cap))
                free, i = cap - draw(st.integers(0, 1)), 0
                while free > 0:
                    cpu = min(draw(st.integers(1, 2)), free)
                    free -= cpu
                    running.append(
                        Running(
                            f"r{n}-{i}",
                            n,
                            cpu,
                            draw(st.sampled_from([10, 20, HIGH])),
                            draw(st.sampled_from(["", "job-a", "job-b", "job-c"])),
                            draw(st.booleans()) or draw(st.booleans()),
                        )
                    )
                    i += 1
                n += 1
    return TopologyCluster(
        tuple(layout),
        tuple(capacity),
        tuple(running),
        draw(st.integers(1, 3)),
        draw(st.integers(1, 2)),
        draw(st.sampled_from(["BlockLayer", "SpineLayer"])),
    )


def fewest_jobs_in_a_domain(cluster: TopologyCluster) -> int | None:
    """The fewest victim jobs whose eligible pods, all evicted, give some domain of the layer room
    for every member (None: no set does; 0: it fits as it is)."""
    free = cluster.free()
    jobs = sorted({r.job for r in cluster.running if r.eligible})
    domains = {cluster.domain(name) for name, _ in cluster.layout}
    for k in range(len(jobs) + 1):
        for chosen in combinations(jobs, k):
            room = dict(free)
            for r in cluster.running:
                if r.eligible and r.job in chosen:
                    room[f"t{r.node}"] += r.cpu
            for d in domains:
                if (
                    sum(f // cluster.cpu for name, f in room.items() if cluster.domain(name) == d)
                    >= cluster.members
                ):
                    return k
    return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology_clusters())
def test_topology_job_preemption_takes_the_fewest_jobs_within_one_domain(cluster: TopologyCluster) -> None:
    best = fewest_jobs_in_a_domain(cluster)
    if best == 0:
        return  # the gang fits without preemption
    pods = [victim(r.name, f"t{r.node}", str(r.cpu), r.priority, labels=r.labels()) for r in cluster.running]
    pods += [topology_member(f"m-{i}", str(cluster.cpu)) for i in range(cluster.members)]
    cpus = {name: str(cap) for name, cap in cluster.capacity}
    sched, port = topology_world(
        dict(cluster.layout), pods, members=cluster.members, node_cpu=cpus, spec=cluster.spec()
    )
    run_until_failure(sched)
    by_name = {r.name: r for r in cluster.running}
    evicted = [by_name[v] for _, _, vs in port.preempted for v in vs]
    assert all(r.eligible for r in evicted), evicted
    nominated = [n for n in port.nominated.values() if n]
    if best is None:
        assert evicted == [] and nominated == [], (evicted, port.nominated)
        return
    assert len(nominated) == cluster.members, port.nominated
    assert len({cluster.domain(n) for n in nominated}) == 1, port.nominated
    assert len({r.job for r in evicted}) == best, (evicted, best)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(cluster=topology_clusters())
def test_a_preempting_topology_gang_binds_whole_in_one_domain(
    cluster: TopologyCluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("jt")
    (root / "profile.yaml").write_bytes(profile(aware=True))
    capacity = dict(cluster.capacity)
    docs: list[dict[str, Any]] = [spine_block_topology()]
    docs += [
        node_manifest(name, str(capacity[name]), "64Gi", 110, labels={SPINE_LABEL: s, BLOCK_LABEL: b})
        for name, (s, b) in cluster.layout
    ]
    docs += [
        pod_manifest(
            r.name,
            str(r.cpu),
            None,
            node_name=f"t{r.node}",
            priority=r.priority,
            labels=r.labels(),
            status={"phase": "Running"},
        )
        for r in cluster.running
    ]
    docs.append(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {
                "name": "job",
                "namespace": "default",
                "annotations": {TOPOLOGY_SPEC: cluster.spec()},
            },
            "spec": {"minMember": cluster.members},
        }
    )
    group = {"pod-group.scheduling.sigs.k8s.io": "job"}
    docs += [
        pod_manifest(f"m-{i}", str(cluster.cpu), None, priority=HIGH, labels=group)
        for i in range(cluster.members)
    ]
    (root / "cluster.yaml").write_text(yaml_docs(*docs))
    registry = in_tree_registry(network_topology_manager=True)
    result = simulate([root / "cluster.yaml"], config_path=root / "profile.yaml", registry=registry)
    members = [result.pod(f"default/m-{i}") for i in range(cluster.members)]
    bound = [m for m in members if m.status == SCHEDULED]
    assert len(bound) in (0, cluster.members), [(m.name, m.status) for m in members]  # whole or nothing
    assert len({cluster.domain(m.node) for m in bound if m.node}) <= 1  # never two domains
    assert bool(bound) == (fewest_jobs_in_a_domain(cluster) is not None)
    by_name = {r.name: r for r in cluster.running}
    for p in result.pods:
        if p.status == "Preempted":
            assert by_name[p.name].eligible, p.name
