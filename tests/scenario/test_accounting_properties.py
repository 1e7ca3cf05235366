"""Property: whatever bound pods say, nothing is ever handed out twice, and every verdict says why.

Random sequences of cluster events go through the real scheduler (default profile, simulator
port): bound pods holding GPUs or CPUs (some with their allocation annotation corrupted:
truncated, wrong shape, unknown minors or CPUs, negative amounts, a cpuset of a billion CPUs),
bound pods with negative, malformed or beyond-int64 requests (and limits: LoadAwareScheduling
estimates from them, every node has a NodeMetric), pending GPU / CPU-binding / plain
pods (some with requests the scheduler cannot place), deletions, annotations fixed, nodes added
and relabelled. The test keeps the truth (what each pod really holds, whatever its annotation
says) and checks after every scheduling round:

* no GPU minor holds more than its capacity;
* no CPU is in two pods' cpusets;
* a node given a pod never holds more cpu than its allocatable (a pod whose request cannot be
  read holds "everything");
* every pod left pending has a reason, none empty, and none is an internal error.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordsched.api.core import Node, Pod
from koordsched.api.koordinator import Device, NodeResourceTopology
from koordsched.api.slo import NodeMetric
from koordsched.backends.sim.port import SimPort
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import load_config
from koordsched.plugins.nodenumaresource.cpuset import format_cpuset, parse_cpuset
from koordsched.plugins.registry import in_tree_registry
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.scheduler import Scheduler
from tests import builders
from tests.plugins.numa.helpers import cpu_infos

REGISTRY = in_tree_registry()
CONFIG = load_config(default_profile_path(), REGISTRY)
REGISTRY.warm_up()

ALLOCATED = "scheduling.koordinator.sh/device-allocated"
STATUS = "scheduling.koordinator.sh/resource-status"
QOS = "koordinator.sh/qosClass"
CPUS = 16
ALLOC_MILLI = CPUS * 1000
#: A request that cannot be read, or is beyond int64: it may hold the whole node.
EVERYTHING = math.inf


# --- objects -----------------------------------------------------------------------------------


def node_obj(name: str, gpus: int, zone: str = "a") -> Node:
    gpu = {"nvidia.com/gpu": str(gpus)}
    return builders.node(
        name, str(CPUS), "64Gi", labels={"zone": zone}, hostname=False, capacity=False, **gpu
    )


def device_obj(name: str, gpus: int) -> Device:
    resources = {
        "koordinator.sh/gpu-core": "100",
        "koordinator.sh/gpu-memory-ratio": "100",
        "koordinator.sh/gpu-memory": "80Gi",
    }
    devices = [
        {
            "type": "gpu",
            "minor": m,
            "health": True,
            "resources": resources,
            "topology": {"socketID": m % 2, "nodeID": m % 2, "pcieID": f"p{m}"},
        }
        for m in range(gpus)
    ]
    return msgspec.convert({"metadata": {"name": name}, "spec": {"devices": devices}}, Device)


def nrt_obj(name: str) -> NodeResourceTopology:
    zone = {"cpu": str(CPUS // 2), "memory": "32Gi"}
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "annotations": {
                    "node.koordinator.sh/cpu-topology": json.dumps({"detail": cpu_infos(2, 1, 4, 2)})
                },
            },
            "topologyPolicies": ["None"],
            "zones": [
                {
                    "name": f"node-{i}",
                    "type": "Node",
                    "resources": [{"name": k, "capacity": v, "allocatable": v} for k, v in zone.items()],
                }
                for i in range(2)
            ],
        },
        NodeResourceTopology,
    )


#: 2024-01-01T00:00:00Z, the NodeMetrics' updateTime.
METRIC_TIME = 1_704_067_200.0


def metric_obj(name: str) -> NodeMetric:
    usage = {"resources": {"cpu": "1", "memory": "1Gi"}}
    body = {
        "metadata": {"name": name},
        "status": {"updateTime": "2024-01-01T00:00:00Z", "nodeMetric": {"nodeUsage": usage}},
    }
    return msgspec.convert(body, NodeMetric)


def pod_obj(
    name: str,
    requests: dict[str, str],
    *,
    node: str = "",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
) -> Pod:
    return builders.pod(
        name,
        uid=f"uid-{name}",
        node_name=node,
        annotations=annotations,
        labels=labels,
        containers=[builders.container("c", requests, limits=requests if limits is None else limits)],
    )


def gpu_annotation(minors: list[int], core: str = "100") -> str:
    entries = [
        {"minor": m, "resources": {"koordinator.sh/gpu-core": core, "koordinator.sh/gpu-memory-ratio": core}}
        for m in minors
    ]
    return json.dumps({"gpu": entries})


# --- the truth -----------------------------------------------------------------------------------


@dataclass
class Holding:
    """What a pod really holds on its node, whatever its annotations say."""

    node: str
    gpus: dict[int, int] = field(default_factory=dict)
    cpus: frozenset[int] = frozenset()
    cpu_milli: float = 0
    #: The annotation that should have been written (None: it was written right).
    fixed: dict[str, str] | None = None


class World:
    def __init__(self) -> None:
        self.port = SimPort()
        # Wall time at the NodeMetrics' updateTime, as the simulator starts it: the metrics are fresh.
        self.clock = VirtualClock(wall_start=METRIC_TIME)
        self.sched = Scheduler(CONFIG, REGISTRY, self.port, self.clock)
        self.port.attach(self.sched)
        self.nodes: dict[str, int] = {}
        self.holding: dict[str, Holding] = {}  # pod key -> truth
        self.pending: dict[str, str] = {}  # pod key -> "" or the message it must get
        self.seen_bound: set[str] = set()
        self.n = 0

    def name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}-{self.n}"

    # --- events ----------------------------------------------------------------------------

    def add_node(self, gpus: int) -> None:
        name = f"n{len(self.nodes)}"
        self.nodes[name] = gpus
        self.sched.on_object("Device", name, device_obj(name, gpus))
        self.sched.on_object("NodeResourceTopology", name, nrt_obj(name))
        self.sched.on_object("NodeMetric", name, metric_obj(name))
        self.sched.on_node_add(node_obj(name, gpus))

    def relabel(self, index: int) -> None:
        name = list(self.nodes)[index % len(self.nodes)]
        info = self.sched.cache.node(name)
        assert info is not None
        old = info.node
        zone = "b" if old.metadata.labels.get("zone") == "a" else "a"
        self.sched.on_node_update(old, node_obj(name, self.nodes[name], zone))

    def add_pod(self, pod: Pod) -> None:
        self.port.add_pod(pod)
        self.sched.on_pod_add(pod)

    def held_gpus(self, node: str) -> set[int]:
        return {m for h in self.holding.values() if h.node == node for m in h.gpus}

    def held_cpus(self, node: str) -> set[int]:
        return {c for h in self.holding.values() if h.node == node for c in h.cpus}

    def bound_gpu(self, index: int, count: int, corruption: str) -> None:
        node = list(self.nodes)[index % len(self.nodes)]
        free = [m for m in range(self.nodes[node]) if m not in self.held_gpus(node)]
        if len(free) < count:
            return
        minors = free[:count]
        right = gpu_annotation(minors)
        written = {
            "": right,
            "truncate": right[: len(right) // 2],
            "shape": '{"gpu":{"minor":0}}',
            "unknown_minor": gpu_annotation([m + 7 for m in minors]),
            "negative": gpu_annotation(minors, core="-100"),
            "bad_quantity": gpu_annotation(minors, core="lots"),
        }[corruption]
        name = self.name("gpu-bound")
        self.add_pod(
            pod_obj(name, {"nvidia.com/gpu": str(count)}, node=node, annotations={ALLOCATED: written})
        )
        fixed = {ALLOCATED: right} if corruption else None
        self.holding[f"default/{name}"] = Holding(node, dict.fromkeys(minors, 100), fixed=fixed)

    def bound_cpu(self, index: int, count: int, corruption: str) -> None:
        node = list(self.nodes)[index % len(self.nodes)]
        free = [c for c in range(CPUS) if c not in self.held_cpus(node)]
        if len(free) < count:
            return
        cpus = frozenset(free[:count])
        right = json.dumps({"cpuset": format_cpuset(cpus)})
        written = {
            "": right,
            "truncate": right[:-2],
            "shape": '{"cpuset":4}',
            "outside": json.dumps({"cpuset": f"{CPUS + 4}-{CPUS + 3 + count}"}),
            "huge": '{"cpuset":"0-999999999"}',
        }[corruption]
        name = self.name("cpu-bound")
        pod = pod_obj(
            name, {"cpu": str(count)}, node=node, annotations={STATUS: written}, labels={QOS: "LSR"}
        )
        self.add_pod(pod)
        fixed = {STATUS: right} if corruption else None
        self.holding[f"default/{name}"] = Holding(node, cpus=cpus, cpu_milli=count * 1000, fixed=fixed)

    def bound_odd_request(self, index: int, value: str) -> None:
        node = list(self.nodes)[index % len(self.nodes)]
        name = self.name("odd-bound")
        if value == "limit":
            # A plain request, a limit beyond int64 (LoadAwareScheduling estimates from limits).
            self.add_pod(pod_obj(name, {"cpu": "1"}, node=node, limits={"cpu": "1e18"}))
        else:
            self.add_pod(pod_obj(name, {"cpu": value}, node=node))
        held = {"-4": 0.0, "2": 2000.0, "limit": 1000.0}.get(value, EVERYTHING)
        self.holding[f"default/{name}"] = Holding(node, cpu_milli=held)

    def pending_pod(self, kind: str, amount: int, odd: str = "") -> None:
        name = self.name(kind)
        if kind == "gpu":
            pod = pod_obj(name, {"nvidia.com/gpu": str(amount)})
        elif kind == "lsr":
            pod = pod_obj(name, {"cpu": str(amount)}, labels={QOS: "LSR"})
        else:
            pod = pod_obj(name, {"cpu": odd or str(amount)})
        self.pending[f"default/{name}"] = "invalid resource quantity: " if odd else ""
        self.add_pod(pod)

    def delete(self, index: int) -> None:
        keys = sorted(self.holding)
        if not keys:
            return
        key = keys[index % len(keys)]
        self.sched.on_pod_delete(self.port.pods.pop(key))
        del self.holding[key]

    def fix(self, index: int) -> None:
        keys = sorted(k for k, h in self.holding.items() if h.fixed is not None)
        if not keys:
            return
        key = keys[index % len(keys)]
        old = self.port.pods[key]
        meta = msgspec.structs.replace(
            old.metadata, annotations={**old.metadata.annotations, **(self.holding[key].fixed or {})}
        )
        new = msgspec.structs.replace(old, metadata=meta)
        self.port.pods[key] = new
        self.sched.on_pod_update(old, new)
        self.holding[key].fixed = None

    # --- scheduling ------------------------------------------------------------------------

    async def settle(self) -> None:
        sched, port = self.sched, self.port
        for _ in range(20):
            while await sched.step():
                await asyncio.sleep(0)
                port.deliver()
            await asyncio.sleep(0)
            port.deliver()
            expiry = sched.queue.next_backoff_expiry()
            if expiry is None:
                break
            self.clock.advance_to(expiry)
            sched.queue.flush_backoff_completed()
        self.check()

    def record_new_binds(self) -> list[str]:
        new = [k for k in self.port.bound if k not in self.seen_bound]
        for key in new:
            self.seen_bound.add(key)
            record = self.port.bound[key]
            pod = self.port.pods[key]
            requests = pod.spec.containers[0].resources.requests
            holding = Holding(record.node)
            if ALLOCATED in record.annotations:
                for entry in json.loads(record.annotations[ALLOCATED]).get("gpu", []):
                    holding.gpus[entry["minor"]] = int(entry["resources"]["koordinator.sh/gpu-core"])
            if STATUS in record.annotations:
                holding.cpus = parse_cpuset(json.loads(record.annotations[STATUS]).get("cpuset", ""))
            if "cpu" in requests:
                holding.cpu_milli = float(requests["cpu"]) * 1000
            self.holding[key] = holding
            self.pending.pop(key, None)
        return new

    def check(self) -> None:
        new = self.record_new_binds()
        for node in self.nodes:
            here = [h for h in self.holding.values() if h.node == node]
            per_minor: dict[int, int] = {}
            for h in here:
                for m, core in h.gpus.items():
                    per_minor[m] = per_minor.get(m, 0) + core
            assert all(core <= 100 for core in per_minor.values()), (node, per_minor)
            cpus = [c for h in here for c in h.cpus]
            assert len(cpus) == len(set(cpus)), (node, sorted(cpus))
        for key in new:
            holding = self.holding[key]
            if holding.cpu_milli:
                total = sum(h.cpu_milli for h in self.holding.values() if h.node == holding.node)
                assert total <= ALLOC_MILLI, (key, holding.node, total)
        for key, prefix in self.pending.items():
            condition = self.port.conditions.get(key)
            assert condition is not None, key
            assert condition.reason == "Unschedulable", (key, condition)
            message = condition.message
            assert message.startswith(prefix or "0/"), (key, message)
            # kube-scheduler's "N reason" items: none without its reason.
            assert not re.search(r"(^|: |, )\d+ ?[.,]", message), (key, message)


# --- the property --------------------------------------------------------------------------------

NODE_INDEX = st.integers(0, 7)
OPS = st.one_of(
    st.tuples(
        st.just("bound_gpu"),
        NODE_INDEX,
        st.integers(1, 2),
        st.sampled_from(["", "truncate", "shape", "unknown_minor", "negative", "bad_quantity"]),
    ),
    st.tuples(
        st.just("bound_cpu"),
        NODE_INDEX,
        st.integers(1, 4),
        st.sampled_from(["", "truncate", "shape", "outside", "huge"]),
    ),
    st.tuples(st.just("bound_odd"), NODE_INDEX, st.sampled_from(["-4", "1e18", "lots", "2", "limit"])),
    st.tuples(st.just("pending"), st.sampled_from(["gpu", "lsr", "plain"]), st.integers(1, 3)),
    st.tuples(st.just("pending_odd"), st.sampled_from(["-1", "1e18", "99999999999999999999"])),
    st.tuples(st.just("delete"), st.integers(0, 50)),
    st.tuples(st.just("fix"), st.integers(0, 50)),
    st.tuples(st.just("add_node"), st.integers(2, 4)),
    st.tuples(st.just("relabel"), NODE_INDEX),
    st.tuples(st.just("settle")),
)


async def play(gpus: list[int], ops: list[tuple[Any, ...]]) -> None:
    world = World()
    for count in gpus:
        world.add_node(count)
    for op in ops:
        kind = op[0]
        if kind == "bound_gpu":
            world.bound_gpu(op[1], op[2], op[3])
        elif kind == "bound_cpu":
            world.bound_cpu(op[1], op[2], op[3])
        elif kind == "bound_odd":
            world.bound_odd_request(op[1], op[2])
        elif kind == "pending":
            world.pending_pod(op[1], op[2])
        elif kind == "pending_odd":
            world.pending_pod("plain", 1, op[1])
        elif kind == "delete":
            world.delete(op[1])
        elif kind == "fix":
            world.fix(op[1])
        elif kind == "add_node":
            world.add_node(op[1])
        elif kind == "relabel":
            world.relabel(op[1])
        else:
            await world.settle()
    await world.settle()
    await world.sched.cancel_bindings()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpus=st.lists(st.integers(1, 4), min_size=1, max_size=3), ops=st.lists(OPS, max_size=24))
def test_nothing_is_handed_out_twice_and_every_verdict_says_why(
    gpus: list[int], ops: list[tuple[Any, ...]]
) -> None:
    asyncio.run(play(gpus, ops))


def test_the_worst_case_by_hand() -> None:
    """Every corruption on one node, then pods of every kind; fixed annotations give the node back."""

    async def run() -> World:
        world = World()
        world.add_node(2)
        world.bound_gpu(0, 1, "truncate")
        world.bound_cpu(0, 4, "huge")
        world.bound_odd_request(0, "-4")
        world.pending_pod("gpu", 1)
        world.pending_pod("lsr", 2)
        world.pending_pod("plain", 3)
        world.pending_pod("plain", 1, "1e18")
        await world.settle()
        assert set(world.port.bound) == {"default/plain-6"}
        # The annotations are fixed (a watch update of each pod): the GPU and the CPUs come back.
        world.fix(0)
        world.fix(0)
        await world.settle()
        assert {"default/gpu-4", "default/lsr-5"} <= set(world.port.bound)
        world.bound_odd_request(0, "1e18")
        world.pending_pod("plain", 1)
        await world.settle()
        assert "default/plain-9" not in world.port.bound
        await world.sched.cancel_bindings()
        return world

    world = asyncio.run(run())
    assert world.port.failures["default/plain-9"] == (
        "0/1 nodes are available: 1 Insufficient cpu."
        " preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.."
    )


def test_a_bound_pods_limit_beyond_int64_by_hand() -> None:
    """LoadAwareScheduling estimates bound pods from their limits: one beyond int64 stops no one."""

    async def run() -> World:
        world = World()
        world.add_node(1)
        world.add_node(1)
        world.bound_odd_request(0, "limit")
        world.pending_pod("plain", 1)
        await world.settle()
        await world.sched.cancel_bindings()
        return world

    world = asyncio.run(run())
    assert world.port.bound["default/plain-2"].node == "n1"
