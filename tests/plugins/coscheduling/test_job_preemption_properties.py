"""Job-level preemption on random small clusters, checked against a brute-force search.

Nodes of a few CPUs hold running pods of random priority, job and preemptibility; a
high-priority gang of identical members arrives. When a member fits nowhere, Coscheduling's
PostFilter preempts for the whole gang. The properties:

* only pods of strictly lower priority without a non-preemptible label are evicted;
* it preempts exactly when some set of victims makes room for every pending member (a gang
  never preempts for part of itself), and then it takes no more victim jobs than the fewest
  any plan needs (the search below tries every set of jobs);
* through ``simulate``, the gang ends up all bound or none bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordsched.api.core import Pod
from koordsched.backends.sim.runner import SCHEDULED, simulate
from tests.builders import node, node_manifest, pod_manifest, yaml_docs
from tests.plugins.coscheduling.job_helpers import (
    GANG,
    HIGH,
    coscheduling,
    member,
    profile,
    run_until_failure,
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
