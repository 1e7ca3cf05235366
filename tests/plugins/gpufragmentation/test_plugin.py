"""GPUFragmentation as a plugin: scores, normalisation, DeviceShare's GPU choice, the mix, args.

The property tests draw random clusters (8-GPU nodes with Device CRs, some GPUs partly or
wholly used, random free cpu) and random pods, and check that the node scoring highest, and
for a shared-GPU pod the GPU DeviceShare then takes, are among those that raise the
measure least, recomputed here in plain Python from the definition.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from koordsched.config import ConfigError, load_config
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.types import PodInfo
from koordsched.plugins.gpufragmentation import (
    GPUFragmentation,
    GPUFragmentationArgs,
    WorkloadShapeArgs,
    pod_shape,
)
from koordsched.plugins.registry import in_tree_registry
from tests.plugins.deviceshare.fixtures import Cluster, gpu_entry, make_pod, minors

SHARE = {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"}
ONE_GPU = {"nvidia.com/gpu": "1"}


def fixed(*entries: tuple[dict[str, Any], float]) -> GPUFragmentationArgs:
    return GPUFragmentationArgs(
        workload_mix=[WorkloadShapeArgs(requests={"cpu": "1", **r}, weight=w) for r, w in entries],
        scarcity_weighting=False,
    )


def with_plugin(args: GPUFragmentationArgs | None = None) -> tuple[Cluster, GPUFragmentation]:
    cluster = Cluster()
    plugin = GPUFragmentation(args, cluster.handle)
    cluster.handle.plugin_map[plugin.name] = plugin
    return cluster, plugin


def entries(n: int) -> list[dict[str, Any]]:
    return [gpu_entry(m, m // 4, f"pci{m // 2}") for m in range(n)]


def scores(cluster: Cluster, plugin: GPUFragmentation, pod: PodInfo) -> dict[str, int]:
    state = CycleState()
    rows = cluster.rows()
    assert plugin.pre_score(state, pod, rows).ok
    raw = plugin.score_batch(state, pod, rows)
    assert plugin.normalize_score(state, pod, rows, raw).ok
    return {info.name: int(s) for info, s in zip(cluster.snap.infos, raw.tolist(), strict=True)}


def test_a_one_gpu_pod_goes_where_it_breaks_no_whole_pair() -> None:
    """Mix: 2-GPU pods. n1 has 3 free GPUs (one copy, one GPU spare), n2 has 4 (two copies):
    on n1 the 1-GPU pod costs nothing, on n2 it breaks a pair."""
    cluster, plugin = with_plugin(fixed(({"nvidia.com/gpu": "2"}, 1.0)))
    for name in ("n1", "n2"):
        cluster.add_node(name, entries(4))
    cluster.bind(cluster_pod("used", ONE_GPU, cluster, "n1"), "n1")
    assert scores(cluster, plugin, make_pod("p", {"cpu": "1", **ONE_GPU})) == {"n1": 100, "n2": 0}


def cluster_pod(name: str, requests: dict[str, str], cluster: Cluster, node: str) -> PodInfo:
    """A pod as DeviceShare allocates it on ``node`` (with its device-allocated annotation)."""
    pod = make_pod(name, {"cpu": "1", **requests})
    status, annotations = cluster.schedule(pod, node)
    assert status.ok, status
    return make_pod(name, {"cpu": "1", **requests}, annotations=annotations)


def test_all_nodes_alike_score_the_same() -> None:
    cluster, plugin = with_plugin(fixed((ONE_GPU, 1.0)))
    for name in ("n1", "n2", "n3"):
        cluster.add_node(name, entries(4))
    assert set(scores(cluster, plugin, make_pod("p", {"cpu": "1", **SHARE})).values()) == {100}


def test_a_shared_pod_fills_a_partly_used_gpu() -> None:
    """DeviceShare alone would take the freest GPU; with the plugin the half-used one."""
    cluster, _ = with_plugin(fixed((ONE_GPU, 1.0)))
    cluster.add_node("n1", entries(2))
    first = cluster_pod("first", SHARE, cluster, "n1")
    assert minors(first.pod.metadata.annotations) == [0]
    cluster.bind(first, "n1")
    status, annotations = cluster.schedule(make_pod("second", {"cpu": "1", **SHARE}), "n1")
    assert status.ok
    assert minors(annotations) == [0]


def test_without_the_plugin_deviceshare_takes_the_freest_gpu() -> None:
    cluster = Cluster()
    cluster.add_node("n1", entries(2))
    status, annotations = cluster.schedule(make_pod("first", {"cpu": "1", **SHARE}), "n1")
    assert status.ok
    cluster.bind(make_pod("first", {"cpu": "1", **SHARE}, annotations=annotations), "n1")
    status, annotations = cluster.schedule(make_pod("second", {"cpu": "1", **SHARE}), "n1")
    assert minors(annotations) == [1]


def test_the_learned_mix_comes_from_the_pods_seen() -> None:
    cluster, plugin = with_plugin()
    for name in ("n1", "n2"):
        cluster.add_node(name, entries(4))
    cluster.bind(cluster_pod("used", ONE_GPU, cluster, "n1"), "n1")
    for i in range(10):
        pending = make_pod(f"pair-{i}", {"cpu": "1", "nvidia.com/gpu": "2"})
        plugin.on_pod_event(None, pending.pod, pending)
    tables = plugin.tables()
    assert [(s.gpus, s.core) for s in tables.shapes] == [(2, 100)]
    assert scores(cluster, plugin, make_pod("p", {"cpu": "1", **ONE_GPU})) == {"n1": 100, "n2": 0}


def test_every_gpu_request_form_is_one_shape() -> None:
    """Half a card written three ways is one shape; so is one card written three ways."""
    forms = [
        {"koordinator.sh/gpu": "50"},
        {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"},
        {
            "koordinator.sh/gpu.shared": "1",
            "koordinator.sh/gpu-core": "50",
            "koordinator.sh/gpu-memory-ratio": "50",
        },
    ]
    shapes = {pod_shape(make_pod(f"p{i}", {"cpu": "1", **f})) for i, f in enumerate(forms)}
    assert len(shapes) == 1
    whole = [
        {"nvidia.com/gpu": "1"},
        {"koordinator.sh/gpu": "100"},
        {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"},
    ]
    assert len({pod_shape(make_pod(f"w{i}", {"cpu": "1", **f})) for i, f in enumerate(whole)}) == 1
    memory = pod_shape(make_pod("m", {"cpu": "1", "koordinator.sh/gpu-memory": "20Gi"}))
    assert (memory.gpus, memory.gpu_memory) == (1, 20 * 1024**3)


def test_explain_gives_fragmentation_before_and_after() -> None:
    cluster, plugin = with_plugin(fixed(({"nvidia.com/gpu": "2"}, 1.0)))
    cluster.add_node("n1", entries(4))
    cluster.bind(cluster_pod("used", ONE_GPU, cluster, "n1"), "n1")
    pod = make_pod("p", {"cpu": "1", **ONE_GPU})
    state = CycleState()
    plugin.pre_score(state, pod, cluster.rows())
    assert plugin.explain_score(state, pod, 0) == {"fragmentationBefore": 1.0, "fragmentationAfter": 0.0}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("halfLifeSeconds: 0", "halfLifeSeconds"),
        ("halfLifeSeconds: .nan", "halfLifeSeconds"),
        ("maxShapes: 0", "maxShapes"),
        ("workloadMix: [{requests: {cpu: '1'}, weight: -1}]", "workloadMix[0].weight"),
        ("workloadMix: [{requests: {cpu: lots}}]", "workloadMix[0].requests[cpu]"),
        ("workloadMix: [{requests: {koordinator.sh/gpu-core: '150'}}]", "workloadMix[0].requests"),
        ("workloadMix: [{}]", "workloadMix[0].requests"),
    ],
)
def test_bad_args_are_refused_with_the_field(args: str, message: str) -> None:
    text = f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  plugins:
    score:
      enabled: [{{name: GPUFragmentation, weight: 1}}]
  pluginConfig:
  - name: GPUFragmentation
    args: {{{args}}}
"""
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_config(text.encode(), in_tree_registry())


# --- properties --------------------------------------------------------------------------------

MIX = [
    ({"nvidia.com/gpu": "1"}, 4.0),
    ({"nvidia.com/gpu": "2"}, 2.0),
    ({"nvidia.com/gpu": "8"}, 1.0),
    ({"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"}, 3.0),
    ({"koordinator.sh/gpu-core": "25", "koordinator.sh/gpu-memory-ratio": "25"}, 2.0),
    ({}, 2.0),
]
POD_FORMS = [
    {},
    {"nvidia.com/gpu": "1"},
    {"nvidia.com/gpu": "2"},
    {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"},
    {"koordinator.sh/gpu-core": "30", "koordinator.sh/gpu-memory-ratio": "30"},
    {"koordinator.sh/gpu": "20"},
]


def python_measure(free: list[int], cpu_free: int, entries_: list[tuple[int, int, int, float]]) -> float:
    """The definition, in plain Python: entries are (cpu milli, k GPUs, share, weight)."""
    total_free = sum(free)
    out = 0.0
    weight_sum = sum(w for *_, w in entries_)
    for cpu, k, share, w in entries_:
        w /= weight_sum
        if k == 0 or cpu > cpu_free:
            out += w * total_free
            continue
        per = [f // share for f in free]
        n = sum(per) // k
        while n > 0 and sum(min(c, n) for c in per) < k * n:
            n -= 1
        n = min(n, cpu_free // cpu)
        out += w * (total_free if n == 0 else max(0, total_free - n * k * share))
    return out


def random_cluster(rng: random.Random) -> tuple[Cluster, GPUFragmentation]:
    """2-6 nodes of 8 GPUs, each with up to 10 random GPU pods placed by DeviceShare."""
    cluster, plugin = with_plugin(fixed(*MIX))
    for i in range(rng.randint(2, 6)):
        name = f"n{i}"
        cluster.add_node(name, entries(8))
        for j in range(rng.randint(0, 10)):
            form = rng.choice(POD_FORMS[1:])
            pod = make_pod(f"{name}-b{j}", {"cpu": str(rng.choice([1, 4, 16])), **form})
            st, ann = cluster.schedule(pod, name)
            if st.ok:
                requests = dict(pod.pod.spec.containers[0].resources.requests)
                cluster.bind(make_pod(pod.pod.metadata.name, requests, annotations=ann), name)
    return cluster, plugin


def node_view(cluster: Cluster, plugin: GPUFragmentation, row: int) -> tuple[list[int], int]:
    table = plugin._node_table()
    d = table.dev
    n = int(d.nslot[row, 0])
    return [int(d.free[row, 0, s, 0]) for s in range(n)], int(table.node[row, 0])


MIX_ENTRIES = [
    (1000, 1, 100, 4.0),
    (1000, 2, 100, 2.0),
    (1000, 8, 100, 1.0),
    (1000, 1, 50, 3.0),
    (1000, 1, 25, 2.0),
    (1000, 0, 0, 2.0),
]


@pytest.mark.parametrize("seed", range(25))
def test_the_chosen_node_and_gpu_raise_the_measure_least(seed: int) -> None:
    rng = random.Random(seed)
    cluster, plugin = random_cluster(rng)
    form = rng.choice(POD_FORMS)
    cpu = rng.choice([1, 2, 8])
    pod = make_pod("new", {"cpu": str(cpu), **form})
    feasible = [name for name, st in cluster.filter(pod).items() if st is None]
    if not feasible:
        return
    state = CycleState()
    rows = np.asarray([cluster.snap.by_name[n].row for n in feasible], dtype=np.int64)
    plugin.pre_score(state, pod, rows)
    raw = plugin.score_batch(state, pod, rows).tolist()
    shape = pod_shape(pod)
    increases = {}
    for name in feasible:
        row = cluster.snap.by_name[name].row
        free, cpu_free = node_view(cluster, plugin, row)
        before = python_measure(free, cpu_free, MIX_ENTRIES)
        share = shape.core
        options = []
        if shape.gpus == 0:
            options.append(python_measure(free, cpu_free - shape.cpu, MIX_ENTRIES))
        elif shape.gpus == 1 and share < 100:
            for s, f in enumerate(free):
                if f >= share:
                    after = list(free)
                    after[s] -= share
                    options.append(python_measure(after, cpu_free - shape.cpu, MIX_ENTRIES))
        else:
            after = list(free)
            taken = 0
            for s, f in enumerate(after):
                if f == 100 and taken < shape.gpus:
                    after[s] = 0
                    taken += 1
            options.append(python_measure(after, cpu_free - shape.cpu, MIX_ENTRIES))
        increases[name] = min(options) - before
    best = max(range(len(feasible)), key=lambda i: raw[i])
    assert increases[feasible[best]] == pytest.approx(min(increases.values()), abs=1e-4)
    # The plugin's raw score is the decrease, to the kernel's rounding.
    for i, name in enumerate(feasible):
        assert raw[i] / 1_000_000 == pytest.approx(-increases[name], abs=1e-4)
    if shape.gpus == 1 and shape.core < 100:
        node = feasible[best]
        free, cpu_free = node_view(cluster, plugin, cluster.snap.by_name[node].row)
        status, annotations = cluster.schedule(pod, node)
        assert status.ok
        (minor,) = minors(annotations)
        after = list(free)
        after[minor] -= shape.core
        chosen = python_measure(after, cpu_free - shape.cpu, MIX_ENTRIES)
        assert chosen - python_measure(free, cpu_free, MIX_ENTRIES) == pytest.approx(
            increases[node], abs=1e-4
        )
