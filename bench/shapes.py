"""The decision benchmark's shapes, in one registry: name -> builder, profile, description, checks.

Every shape is run the same way (``bench/decision.py --shape NAME``): build the cluster in
memory, schedule it through the simulator's loop, then add the shape's own checks (zone counts,
gangs complete, owners allocated...) to the result, so a run that got faster by deciding
differently shows it.

A shape's builder takes ``(nodes, pods)``; its modules are imported when the shape is built, so
listing the shapes imports none of them. ``profile`` is the profile the shape runs with when the
command line names none (``None``: the bundled ``config/koord-scheduler.yaml``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from koordsched.api.core import Node, Pod
from koordsched.backends.sim.loader import Cluster, LoadedObject
from koordsched.backends.sim.runner import SimResult

BENCH = Path(__file__).resolve().parent
#: Profile names the command line accepts besides a path.
PROFILES: dict[str, Path | None] = {
    "koord-scheduler": None,
    "default": None,
    "standard": BENCH / "profiles" / "standard.yaml",
    "numa-deviceshare": BENCH / "profiles" / "numa-deviceshare.yaml",
}

Builder = Callable[[int, int], Cluster]
#: (cluster, result, nodes) -> extra fields for the shape's output line.
Checks = Callable[[Cluster, SimResult, int], dict[str, Any]]


@dataclass(frozen=True)
class Shape:
    name: str
    build: Builder
    description: str
    profile: Path | None = None
    #: Adds a NodeMetric to every node after building (bench/node_metrics.py).
    node_metrics: bool = False
    checks: Checks | None = None
    #: The pod count the shape is usually quoted at (``--pods`` overrides it).
    pods: int = 10_000


def basic_cluster(nodes: int, pods: int, distinct: bool = False) -> Cluster:
    """SchedulingBasic; with ``distinct`` every pod asks a different memory amount, so no two pods share
    a request signature and nothing computed for one pod can be reused for the next (worst case)."""
    cluster = Cluster()
    for i in range(nodes):
        name = f"node-{i}"
        alloc = {"cpu": "32", "memory": "256Gi", "pods": "110"}
        node = msgspec.convert(
            {
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": alloc, "capacity": alloc},
            },
            Node,
        )
        cluster.objects.append(LoadedObject("Node", name, node, "node", "bench"))
    for i in range(pods):
        name = f"pod-{i}"
        requests = {"cpu": "100m", "memory": f"{500 * 1024 + i}Ki" if distinct else "500Mi"}
        pod = msgspec.convert(
            {
                "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{i}"},
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "containers": [{"name": "c", "resources": {"requests": requests}}],
                },
            },
            Pod,
        )
        cluster.objects.append(LoadedObject("Pod", f"bench/{name}", pod, "pod", "bench"))
    return cluster


def _from(module: str, attr: str, key: str | None = None) -> Builder:
    """A builder imported when first called: ``module.attr`` or ``module.attr[key]``."""

    def build(nodes: int, pods: int) -> Cluster:
        found = getattr(importlib.import_module(module), attr)
        fn: Builder = found[key] if key is not None else found
        return fn(nodes, pods)

    return build


def _placements(result: SimResult) -> dict[str, str | None]:
    return {p.key: p.node for p in result.pods}


def _preemption_checks(cluster: Cluster, result: SimResult, nodes: int) -> dict[str, Any]:
    return {"preempted": result.summary.preempted, "attempts": sum(p.attempts for p in result.pods)}


def _gang_checks(cluster: Cluster, result: SimResult, nodes: int) -> dict[str, Any]:
    gangs = result.summary.gangs
    return {
        "gangs_complete": sum(1 for g in gangs if g.complete),
        "gangs_incomplete": sum(1 for g in gangs if not g.complete),
    }


def _spread_checks(cluster: Cluster, result: SimResult, nodes: int) -> dict[str, Any]:
    from spread_shapes import zone_counts

    return {"zone_counts": zone_counts(_placements(result))}


def _volume_checks(cluster: Cluster, result: SimResult, nodes: int) -> dict[str, Any]:
    from volume_shapes import check

    found: dict[str, Any] = check(nodes, _placements(result), result.volumes)
    return found


def _affinity_checks(cluster: Cluster, result: SimResult, nodes: int) -> dict[str, Any]:
    # antiaffinity: every pod on a node of its own, so this equals the pods scheduled.
    return {"nodes_used": len({p.node for p in result.pods if p.node})}


def _reservation_checks(cluster: Cluster, result: SimResult, nodes: int) -> dict[str, Any]:
    from reservation_shapes import owners_allocated

    labels = {o.key: o.obj.metadata.labels for o in cluster.objects if o.role == "pod"}
    owners, allocated = owners_allocated({p.key: p.annotations for p in result.pods}, labels)
    return {
        "owners": owners,
        "owners_allocated": allocated,
        "reservations_available": sum(1 for r in result.reservations if r.phase == "Available"),
    }


def _quota_checks(cluster: Cluster, result: SimResult, nodes: int) -> dict[str, Any]:
    return {"quotas": len(result.quotas), "unschedulable": result.summary.unschedulable}


def _shapes() -> dict[str, Shape]:
    spread = "a topology spread shape (bench/spread_shapes.py)"
    affinity = "an inter-pod affinity shape (bench/affinity_shapes.py)"
    shapes = [
        Shape("basic", basic_cluster, "scheduler_perf SchedulingBasic: 32 CPU nodes, pods of 100m/500Mi"),
        Shape(
            "distinct",
            lambda n, p: basic_cluster(n, p, distinct=True),
            "SchedulingBasic, every pod a different memory amount (no reuse across pods)",
        ),
        Shape(
            "gpu",
            _from("gpu_cluster", "gpu_cluster"),
            "8-GPU nodes with Device CRs and NUMA topology, a mix of device pods (bench/gpu_cluster.py)",
        ),
        Shape(
            "node-metrics",
            basic_cluster,
            "SchedulingBasic with a NodeMetric per node (LoadAwareScheduling has work to do)",
            node_metrics=True,
        ),
        Shape(
            "gpu-node-metrics",
            _from("gpu_cluster", "gpu_cluster"),
            "the GPU shape with a NodeMetric per node",
            node_metrics=True,
        ),
        Shape("spread", _from("spread_shapes", "SHAPES", "spread"), spread, checks=_spread_checks),
        Shape(
            "preferred-spread",
            _from("spread_shapes", "SHAPES", "preferred-spread"),
            spread,
            checks=_spread_checks,
        ),
        Shape(
            "default-spread",
            _from("spread_shapes", "SHAPES", "default-spread"),
            spread,
            checks=_spread_checks,
        ),
        Shape(
            "antiaffinity",
            _from("affinity_shapes", "SHAPES", "antiaffinity"),
            affinity,
            checks=_affinity_checks,
            pods=4_000,
        ),
        Shape(
            "preferred-affinity",
            _from("affinity_shapes", "SHAPES", "preferred-affinity"),
            affinity,
            checks=_affinity_checks,
            pods=5_000,
        ),
        Shape(
            "preemption",
            _from("preemption_shapes", "preemption"),
            "nodes full of low-priority pods, high-priority preemptors (bench/preemption_shapes.py)",
            checks=_preemption_checks,
            pods=2_000,
        ),
        Shape(
            "reservation",
            _from("reservation_shapes", "reservation_cluster"),
            "1,000 Reservations, a third of the pods own one (bench/reservation_shapes.py)",
            checks=_reservation_checks,
        ),
        Shape(
            "pv",
            _from("volume_shapes", "SHAPES", "pv"),
            "pods with bound and WaitForFirstConsumer claims on local PVs (bench/volume_shapes.py)",
            checks=_volume_checks,
            pods=2_000,
        ),
        Shape(
            "gang",
            _from("gang_shapes", "SHAPES", "gang"),
            "1,000 gangs of 10 per 10,000 pods, PodGroups (bench/gang_shapes.py)",
            checks=_gang_checks,
        ),
        Shape(
            "gang-annotations",
            _from("gang_shapes", "SHAPES", "gang-annotations"),
            "the gang shape with annotation gangs",
            checks=_gang_checks,
        ),
        Shape(
            "quota-tree",
            _from("quota_shapes", "SHAPES", "quota-tree"),
            "100 ElasticQuotas in a tree, every pod within its leaf's max (bench/quota_shapes.py)",
            checks=_quota_checks,
        ),
        Shape(
            "quota-capped",
            _from("quota_shapes", "SHAPES", "quota-capped"),
            "the quota tree with leaves of max 10 cpu: about 10 % of the pods stay Pending",
            checks=_quota_checks,
        ),
    ]
    return {s.name: s for s in shapes}


SHAPES: dict[str, Shape] = _shapes()


def build(shape: Shape, nodes: int, pods: int, node_metrics: bool = False) -> Cluster:
    """The shape's cluster, with a NodeMetric per node when the shape or the caller asks for it."""
    cluster = shape.build(nodes, pods)
    if shape.node_metrics or node_metrics:
        from node_metrics import add_node_metrics

        add_node_metrics(cluster, seed=0)
    return cluster


def profile_path(name_or_path: str | None, shape: Shape) -> Path | None:
    """A profile given on the command line (a name from PROFILES or a path), else the shape's."""
    if name_or_path is None:
        return shape.profile
    if name_or_path in PROFILES:
        return PROFILES[name_or_path]
    return Path(name_or_path)
