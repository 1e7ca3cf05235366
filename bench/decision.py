"""Decision throughput through the sim backend, in kube-scheduler's scheduler_perf SchedulingBasic shape.

Nodes have 32 CPU, 256Gi memory and room for 110 pods; every pod asks for 100m CPU and
500Mi. The default profile (config/koord-scheduler.yaml) runs with
``percentageOfNodesToScore: 100``, so every feasible node is filtered and scored.

Each node count runs in its own process so its peak memory is its own. The timed part is
the simulator's scheduling loop (queue, framework, plugins, kernels, assume, bind
confirmation); building the objects and warming the kernels are not timed.

    .venv/bin/python bench/decision.py                      # 500 and 5,000 nodes, 10,000 pods
    .venv/bin/python bench/decision.py --nodes 5000 --split # also time the numba kernels apart
    .venv/bin/python bench/decision.py --gpu --nodes 5000   # 8-GPU nodes, Device CRs, device pods
    .venv/bin/python bench/decision.py --gpu --nodes 5000 --node-metrics  # and a NodeMetric per node
    .venv/bin/python bench/decision.py --spread spread --nodes 5000 --pods 10000  # spread_shapes.py
    .venv/bin/python bench/decision.py --affinity antiaffinity --nodes 5000 --pods 4000  # affinity_shapes.py
    .venv/bin/python bench/decision.py --preemption --nodes 5000 --pods 2000  # preemption_shapes.py
    .venv/bin/python bench/decision.py --reservation --nodes 5000 --pods 10000  # reservation_shapes.py
    .venv/bin/python bench/decision.py --gang gang --nodes 5000 --pods 10000  # gang_shapes.py
    .venv/bin/python bench/decision.py --quota quota-tree --nodes 5000 --pods 10000  # quota_shapes.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import yaml

from koordsched.api.core import Node, Pod
from koordsched.backends.sim.loader import Cluster, LoadedObject
from koordsched.backends.sim.runner import simulate_cluster
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import load_config
from koordsched.plugins.registry import in_tree_registry


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
        pod = msgspec.convert(
            {
                "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{i}"},
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "containers": [
                        {
                            "name": "c",
                            "resources": {
                                "requests": {
                                    "cpu": "100m",
                                    "memory": f"{500 * 1024 + i}Ki" if distinct else "500Mi",
                                }
                            },
                        }
                    ],
                },
            },
            Pod,
        )
        cluster.objects.append(LoadedObject("Pod", f"bench/{name}", pod, "pod", "bench"))
    return cluster


def profile_bytes(percentage: int, path: str | None = None) -> bytes:
    raw = yaml.safe_load((Path(path) if path else default_profile_path()).read_text())
    raw["percentageOfNodesToScore"] = percentage
    return yaml.safe_dump(raw).encode()


class KernelTimer:
    """Wraps every numba kernel the plugins call, to split time between Python and kernels."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def install(self) -> None:
        from numba.core.registry import CPUDispatcher

        for mod in list(sys.modules.values()):
            if mod is None or not getattr(mod, "__name__", "").startswith("koordsched."):
                continue
            for attr, value in list(vars(mod).items()):
                if isinstance(value, CPUDispatcher):
                    setattr(mod, attr, self._wrap(value))

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args)
            finally:
                self.seconds += time.perf_counter() - t0
                self.calls += 1

        return timed


def build_cluster(
    nodes: int,
    pods: int,
    distinct: bool,
    gpu: bool,
    node_metrics: bool,
    spread: str | None = None,
    affinity: str | None = None,
    preemption: bool = False,
    reservation: bool = False,
    volumes: str | None = None,
    gang: str | None = None,
    quota: str | None = None,
) -> Cluster:
    if quota:
        from quota_shapes import SHAPES as QUOTA_SHAPES

        cluster = QUOTA_SHAPES[quota](nodes, pods)
    elif gang:
        from gang_shapes import SHAPES as GANG_SHAPES

        cluster = GANG_SHAPES[gang](nodes, pods)
    elif volumes:
        from volume_shapes import SHAPES as VOLUME_SHAPES

        cluster = VOLUME_SHAPES[volumes](nodes, pods)
    elif preemption:
        from preemption_shapes import preemption as preemption_cluster

        cluster = preemption_cluster(nodes, pods)
    elif reservation:
        from reservation_shapes import reservation_cluster

        cluster = reservation_cluster(nodes, pods)
    elif spread:
        from spread_shapes import SHAPES as SPREAD_SHAPES

        cluster = SPREAD_SHAPES[spread](nodes, pods)
    elif affinity:
        from affinity_shapes import SHAPES as AFFINITY_SHAPES

        cluster = AFFINITY_SHAPES[affinity](nodes, pods)
    elif gpu:
        from gpu_cluster import gpu_cluster

        cluster = gpu_cluster(nodes, pods)
    else:
        cluster = basic_cluster(nodes, pods, distinct)
    if node_metrics:
        from node_metrics import add_node_metrics

        add_node_metrics(cluster, seed=0)
    return cluster


def run_one(
    nodes: int,
    pods: int,
    percentage: int,
    split: bool,
    distinct: bool,
    gpu: bool,
    profile: str | None,
    node_metrics: bool = False,
    spread: str | None = None,
    affinity: str | None = None,
    preemption: bool = False,
    reservation: bool = False,
    volumes: str | None = None,
    gang: str | None = None,
    quota: str | None = None,
) -> dict[str, Any]:
    registry = in_tree_registry()
    config = load_config(profile_bytes(percentage, profile), registry)
    cluster = build_cluster(
        nodes,
        pods,
        distinct,
        gpu,
        node_metrics,
        spread,
        affinity,
        preemption,
        reservation,
        volumes,
        gang,
        quota,
    )
    registry.warm_up()
    timer = KernelTimer()
    if split:
        timer.install()
    result = asyncio.run(simulate_cluster(cluster, config, registry))
    s = result.summary
    out: dict[str, Any] = {
        "shape": quota
        or gang
        or volumes
        or spread
        or affinity
        or (
            "preemption"
            if preemption
            else "reservation"
            if reservation
            else "gpu"
            if gpu
            else "distinct"
            if distinct
            else "basic"
        ),
        "profile": Path(profile).name if profile else "koord-scheduler.yaml",
        "node_metrics": node_metrics,
        "nodes": nodes,
        "pods": pods,
        "scheduled": s.scheduled,
        "seconds": round(s.wall_seconds, 3),
        "pods_per_second": round(s.pods_per_second, 1),
        "cpu_seconds": round(s.cpu_seconds, 3),
        "pods_per_cpu_second": round(s.scheduled / s.cpu_seconds, 1) if s.cpu_seconds else 0.0,
        "us_per_pod": round(1e6 * s.wall_seconds / max(1, s.scheduled), 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    if preemption:
        out["preempted"] = s.preempted
        out["attempts"] = sum(p.attempts for p in result.pods)
    if gang:
        out["gangs_complete"] = sum(1 for g in s.gangs if g.complete)
        out["gangs_incomplete"] = sum(1 for g in s.gangs if not g.complete)
    if spread:
        from spread_shapes import zone_counts

        out["zone_counts"] = zone_counts({p.key: p.node for p in result.pods})
    if volumes:
        from volume_shapes import check

        out.update(check(nodes, {p.key: p.node for p in result.pods}, result.volumes))
    if affinity:
        # antiaffinity: every pod on a node of its own, so this equals the pods scheduled.
        out["nodes_used"] = len({p.node for p in result.pods if p.node})
    if reservation:
        from reservation_shapes import owners_allocated

        labels = {o.key: o.obj.metadata.labels for o in cluster.objects if o.role == "pod"}
        owners, allocated = owners_allocated({p.key: p.annotations for p in result.pods}, labels)
        out["owners"], out["owners_allocated"] = owners, allocated
        out["reservations_available"] = sum(1 for r in result.reservations if r.phase == "Available")
    if split:
        out["kernel_seconds"] = round(timer.seconds, 3)
        out["kernel_share"] = round(timer.seconds / s.wall_seconds, 3) if s.wall_seconds else 0.0
        out["kernel_calls"] = timer.calls
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="500,5000", help="comma-separated node counts")
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--percentage", type=int, default=100, help="percentageOfNodesToScore")
    ap.add_argument("--split", action="store_true", help="time the numba kernels separately")
    ap.add_argument(
        "--distinct",
        action="store_true",
        help="every pod asks a different memory amount (no reuse across pods)",
    )
    ap.add_argument(
        "--gpu",
        action="store_true",
        help="8-GPU nodes with Device CRs and NUMA topology, a mix of device pods",
    )
    ap.add_argument(
        "--node-metrics",
        action="store_true",
        help="give every node a NodeMetric (bench/node_metrics.py), so LoadAwareScheduling has work to do",
    )
    ap.add_argument(
        "--spread",
        choices=["spread", "preferred-spread", "default-spread"],
        help="a topology spread shape (bench/spread_shapes.py)",
    )
    ap.add_argument(
        "--affinity",
        choices=["antiaffinity", "preferred-affinity"],
        help="an inter-pod affinity shape (bench/affinity_shapes.py)",
    )
    ap.add_argument(
        "--preemption",
        action="store_true",
        help="nodes full of low-priority pods, high-priority preemptors (bench/preemption_shapes.py)",
    )
    ap.add_argument(
        "--reservation",
        action="store_true",
        help="1,000 Reservations, a third of the pods own one (bench/reservation_shapes.py)",
    )
    ap.add_argument(
        "--volumes",
        choices=["pv"],
        help="pods with bound and WaitForFirstConsumer claims on local PVs (bench/volume_shapes.py)",
    )
    ap.add_argument(
        "--gang",
        choices=["gang", "gang-annotations"],
        help="1,000 gangs of 10 per 10,000 pods (bench/gang_shapes.py)",
    )
    ap.add_argument(
        "--quota",
        choices=["quota-tree", "quota-capped"],
        help="an ElasticQuota shape (bench/quota_shapes.py)",
    )
    ap.add_argument("--config", help="profile to run (default: the bundled config/koord-scheduler.yaml)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one is not None:
        print(
            json.dumps(
                run_one(
                    args.one,
                    args.pods,
                    args.percentage,
                    args.split,
                    args.distinct,
                    args.gpu,
                    args.config,
                    args.node_metrics,
                    args.spread,
                    args.affinity,
                    args.preemption,
                    args.reservation,
                    args.volumes,
                    args.gang,
                    args.quota,
                )
            )
        )
        return 0
    rows = []
    for n in (int(x) for x in args.nodes.split(",")):
        cmd = [sys.executable, __file__, "--one", str(n), "--pods", str(args.pods)]
        cmd += ["--percentage", str(args.percentage)] + (["--split"] if args.split else [])
        cmd += ["--distinct"] if args.distinct else []
        cmd += ["--gpu"] if args.gpu else []
        cmd += ["--node-metrics"] if args.node_metrics else []
        cmd += ["--spread", args.spread] if args.spread else []
        cmd += ["--affinity", args.affinity] if args.affinity else []
        cmd += ["--preemption"] if args.preemption else []
        cmd += ["--reservation"] if args.reservation else []
        cmd += ["--volumes", args.volumes] if args.volumes else []
        cmd += ["--gang", args.gang] if args.gang else []
        cmd += ["--quota", args.quota] if args.quota else []
        cmd += ["--config", args.config] if args.config else []
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    if len(rows) > 1:
        base = rows[0]["us_per_pod"]
        for r in rows[1:]:
            print(f"per-pod cost at {r['nodes']} nodes vs {rows[0]['nodes']}: x{r['us_per_pod'] / base:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
