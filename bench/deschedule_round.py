"""What one descheduling round costs, next to scheduling the same cluster (both in memory).

    python -m bench.deschedule_round --nodes 500 --pods-per-node 10

Writes a cluster file: ``--nodes`` nodes of 32 cpu / 128Gi with NodeMetrics, each running
``--pods-per-node`` pods of one ReplicaSet per node (1 cpu requested, koordlet reporting 0.9 cpu
each for the pods on hot nodes, 0.2 elsewhere); every 20th node is hot (over LowNodeLoad's 75 %
cpu), every 4th cold. Then it times, in this one process:

* ``simulate``: loading and scheduling the file (no pending pods: the bound pods are fed and the
  run ends), the "basic shape" of the comparison;
* ``deschedule``: the same load and feed, then the LowNodeLoad rounds (6, the anomaly detector's),
  node fit through the scheduler for every candidate pod, arbitration and the migrations with the
  scheduler placing each moved pod.

The ratio deschedule / simulate is what to read: the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from koordsched.backends.sim.deschedule import deschedule
from koordsched.backends.sim.runner import simulate

UPDATE = "2024-06-01T12:00:00Z"


def cluster(nodes: int, per_node: int) -> str:
    docs: list[str] = []
    for i in range(nodes):
        name = f"node-{i:05d}"
        hot = i % 20 == 0
        cold = i % 4 == 1
        docs.append(
            "apiVersion: v1\nkind: Node\n"
            f"metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}\n"
            f'status: {{allocatable: {{cpu: "32", memory: 128Gi, pods: "110"}}}}'
        )
        usage_each = 0.9 if hot else 0.2
        pods = []
        for j in range(per_node):
            pod = f"rs-{i:05d}-{j:02d}"
            pods.append((pod, usage_each))
            docs.append(
                "apiVersion: v1\nkind: Pod\nmetadata:\n"
                f"  name: {pod}\n  namespace: default\n  uid: uid-{pod}\n"
                f"  ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: rs-{i:05d}, "
                f"uid: u-{i:05d}, controller: true}}]\n"
                f"spec:\n  nodeName: {name}\n  schedulerName: koord-scheduler\n"
                f'  containers: [{{name: c, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}]\n'
                "status: {phase: Running}"
            )
        node_cpu = 31.0 if hot else (2.0 if cold else 12.0)
        pod_lines = "".join(
            f'\n  - {{namespace: default, name: {p}, podUsage: {{resources: {{cpu: "{u}", memory: 512Mi}}}}}}'
            for p, u in pods
        )
        docs.append(
            f"apiVersion: slo.koordinator.sh/v1alpha1\nkind: NodeMetric\nmetadata: {{name: {name}}}\n"
            f'status:\n  updateTime: "{UPDATE}"\n'
            f'  nodeMetric: {{nodeUsage: {{resources: {{cpu: "{node_cpu}", memory: 32Gi}}}}}}\n'
            f"  podsMetric:{pod_lines or ' []'}"
        )
    return "\n---\n".join(docs) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods-per-node", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.yaml"
        path.write_text(cluster(args.nodes, args.pods_per_node))
        simulate([path])  # warm: numba kernels, imports
        t0 = time.perf_counter()
        simulate([path])
        t_sim = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = deschedule([path])
        t_des = time.perf_counter() - t0
    moved = sum(1 for m in result.migrations if m.target is not None)
    print(
        f"nodes={args.nodes} pods={args.nodes * args.pods_per_node} simulate={t_sim:.2f}s "
        f"deschedule={t_des:.2f}s ratio={t_des / t_sim:.2f} jobs={len(result.migrations)} moved={moved} "
        f"rounds={result.rounds}"
    )


if __name__ == "__main__":
    main()
