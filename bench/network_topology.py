"""Network-topology gangs against plain gangs, per pod, through ``simulate`` (issue 26).

A 4-layer topology (datacenter > spine > block > node): 2 datacenters x 5 spines x 25 blocks x 20
nodes = 5,000 nodes of 8 GPUs; 200 gangs of 8-64 one-GPU members (seeded). The same cluster and
gangs run twice with the topology-aware profile and the tree manager: once with every PodGroup
asking ``MustGather`` on its spine and ``PreferGather`` on its block (topology gangs), once with
no annotation (plain gangs). The simulator's own wall time (scheduling loop only; loading is not
timed) divided by the pods scheduled gives the per-pod cost.

    python -m bench.network_topology [--nodes-per-block 20] [--gangs 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path
from typing import Any

from koordsched.backends.sim.runner import SimResult, simulate
from koordsched.plugins.coscheduling.network_topology.manager import with_network_topology_manager
from koordsched.plugins.registry import in_tree_registry

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "examples" / "profiles" / "network-topology.yaml"
LABEL = "network.topology.nvidia.com/"
SPEC = json.dumps(
    {
        "gatherStrategy": [
            {"layer": "SpineLayer", "strategy": "MustGather"},
            {"layer": "BlockLayer", "strategy": "PreferGather"},
        ]
    }
)


def cluster(
    nodes_per_block: int, gangs: int, seed: int, topology: bool, *, cpu_only: bool = False
) -> list[dict[str, Any]]:
    """``cpu_only``: members ask 12 cpu and no GPU (8 per node), so no device plugin takes part."""
    requests = {"cpu": "12"} if cpu_only else {"cpu": "4", "nvidia.com/gpu": "1"}
    rng = random.Random(seed)
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "ClusterNetworkTopology",
            "metadata": {"name": "default"},
            "spec": {
                "networkTopologySpec": [
                    {"topologyLayer": "DatacenterLayer", "labelKey": [LABEL + "datacenter"]},
                    {
                        "topologyLayer": "SpineLayer",
                        "parentTopologyLayer": "DatacenterLayer",
                        "labelKey": [LABEL + "spine"],
                    },
                    {
                        "topologyLayer": "BlockLayer",
                        "parentTopologyLayer": "SpineLayer",
                        "labelKey": [LABEL + "block"],
                    },
                    {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"},
                ]
            },
        }
    ]
    for dc in range(2):
        for sp in range(5):
            for bl in range(25):
                for n in range(nodes_per_block):
                    name = f"n-{dc}-{sp}-{bl}-{n}"
                    labels = {
                        LABEL + "datacenter": f"dc{dc}",
                        LABEL + "spine": f"s{dc}-{sp}",
                        LABEL + "block": f"b{dc}-{sp}-{bl}",
                    }
                    alloc = {"cpu": "96", "memory": "768Gi", "pods": "110", "nvidia.com/gpu": "8"}
                    docs.append(
                        {
                            "apiVersion": "v1",
                            "kind": "Node",
                            "metadata": {"name": name, "labels": labels},
                            "status": {"allocatable": alloc, "capacity": alloc},
                        }
                    )
    for g in range(gangs):
        size = rng.randint(8, 64)
        notes = {"gang.scheduling.koordinator.sh/network-topology-spec": SPEC} if topology else {}
        docs.append(
            {
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": f"job-{g}", "namespace": "default", "annotations": notes},
                "spec": {"minMember": size},
            }
        )
        docs.extend(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"job-{g}-{i}",
                    "namespace": "default",
                    "labels": {"pod-group.scheduling.sigs.k8s.io": f"job-{g}"},
                    "annotations": {"gang.scheduling.koordinator.sh/network-topology-index": str(i)},
                },
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "containers": [
                        {
                            "name": "c",
                            "image": "trainer",
                            "resources": {"requests": requests},
                        }
                    ],
                },
            }
            for i in range(size)
        )
    return docs


def run(docs: list[dict[str, Any]], directory: Path, name: str) -> SimResult:
    path = directory / f"{name}.json"
    # One JSON document per line: YAML's superset, and fast to write.
    path.write_text("\n---\n".join(json.dumps(d) for d in docs))
    return simulate([path], config_path=PROFILE, registry=with_network_topology_manager(in_tree_registry()))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes-per-block", type=int, default=20)
    parser.add_argument("--gangs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cpu-only", action="store_true", help="members ask cpu only (no GPU)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = {}
        for name, topology in (("plain", False), ("topology", True)):
            result = run(
                cluster(args.nodes_per_block, args.gangs, args.seed, topology, cpu_only=args.cpu_only),
                Path(tmp),
                name,
            )
            s = result.summary
            per_pod = s.wall_seconds / s.scheduled if s.scheduled else float("nan")
            out[name] = per_pod
            complete = sum(1 for g in s.gangs if g.complete)
            print(
                f"{name:9s} nodes {s.nodes}  pods {s.pods}  scheduled {s.scheduled}  "
                f"gangs complete {complete}/{len(s.gangs)}  wall {s.wall_seconds:.2f}s  "
                f"per pod {per_pod * 1e3:.2f} ms"
            )
        print(f"topology / plain per-pod cost: {out['topology'] / out['plain']:.2f}x")


if __name__ == "__main__":
    main()
