"""Remembered DeviceShare and NodeNUMAResource results never go stale: a long random run.

Both plugins keep per-row Filter codes and Scores per request signature (recomputed only
where a row changed) and the costly per-node verdicts per node content (a row that changed
often holds what another node held before). The NUMA-aware results also leave an admitted
affinity per node in the cycle state, which DeviceShare's Filter, Score and Reserve read.

The same remembering instances must agree, after every change to the cluster (pods placed
and removed, Device CRs and NRTs replaced, node labels changed, nodes removed so that rows
move, nodes added), with fresh instances that remember nothing: on every node's Filter
status, on the affinity stored for it, on both Scores, and on what Reserve allocates.
"""

from __future__ import annotations

import json
import random
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from koordsched.api.core import Node
from koordsched.api.koordinator import Device, NodeResourceTopology
from koordsched.api.resources import resource_list
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.objects import ObjectStore
from koordsched.framework.snapshot import NodeInfo, Snapshot
from koordsched.framework.status import Code, Status
from koordsched.framework.types import PodInfo
from koordsched.kernels import warm_up
from koordsched.plugins.deviceshare import DeviceShare
from koordsched.plugins.deviceshare.allocation import VF, DeviceAllocation
from koordsched.plugins.deviceshare.rows import _ROW_ARRAYS as ROW_ARRAYS
from koordsched.plugins.deviceshare.rows import DeviceRows
from koordsched.plugins.nodenumaresource import NodeNUMAResource
from koordsched.plugins.topologymanager.interface import affinity_store
from tests import builders
from tests.fakes import FakeHandle
from tests.plugins.deviceshare.fixtures import make_device, make_pod, standard_entries
from tests.plugins.numa.helpers import make_nrt

JOINT = {"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"}
VF_HINT = {"rdma": {"vfSelector": {}}}
HONOR = {"node.koordinator.sh/gpu-partition-policy": "Honor"}


def _numa(policy: str) -> dict[str, str]:
    return {"scheduling.koordinator.sh/numa-topology-spec": json.dumps({"numaTopologyPolicy": policy})}


#: (requests, annotations) of the pods placed and probed.
SHAPES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"koordinator.sh/gpu": 100, "cpu": "2", "memory": "8Gi"}, {}),
    ({"nvidia.com/gpu": 2, "cpu": "8", "memory": "16Gi"}, _numa("Restricted")),
    ({"nvidia.com/gpu": 4, "cpu": "16", "memory": "8Gi"}, _numa("Restricted")),
    # The 2-GPU Restricted request again with more CPU: equal DeviceShare signatures whose NUMA
    # affinities (and so DeviceShare's NUMA-bound scores) can differ on one node.
    ({"nvidia.com/gpu": 2, "cpu": "24", "memory": "16Gi"}, _numa("Restricted")),
    (
        {"koordinator.sh/gpu": 100, "koordinator.sh/rdma": 100, "cpu": "2"},
        {
            "scheduling.koordinator.sh/device-joint-allocate": JOINT,
            "scheduling.koordinator.sh/device-allocate-hint": VF_HINT,
        },
    ),
    (
        {
            "koordinator.sh/gpu.shared": 1,
            "koordinator.sh/gpu-core": 50,
            "koordinator.sh/gpu-memory-ratio": 50,
        },
        {},
    ),
    ({"koordinator.sh/gpu": 100, "cpu": "4", "memory": "4Gi"}, _numa("SingleNUMANode")),
    ({"nvidia.com/gpu": 2, "cpu": "4"}, _numa("BestEffort")),
    ({"cpu": "12", "memory": "32Gi"}, _numa("Restricted")),
    (
        {"nvidia.com/gpu": 1, "koordinator.sh/rdma": 100, "cpu": "2"},
        {"scheduling.koordinator.sh/device-joint-allocate": JOINT, **_numa("Restricted")},
    ),
    # A share of a NIC, with and without a VF: VFs run out before the NIC does.
    ({"koordinator.sh/rdma": 1}, {"scheduling.koordinator.sh/device-allocate-hint": VF_HINT}),
    ({"koordinator.sh/rdma": 1}, {}),
]


class _Forgetful:
    """A ContentMemo that remembers nothing."""

    def table(self, key: Hashable) -> dict[Hashable, Any]:
        return {}

    def clear(self) -> None:
        pass


Plugins = tuple[NodeNUMAResource, DeviceShare]


def _plugins(handle: FakeHandle, *, remember: bool) -> Plugins:
    numa = NodeNUMAResource(None, handle)  # type: ignore[arg-type]
    ds = DeviceShare(None, handle)  # type: ignore[arg-type]
    handle.plugin_map = {numa.name: numa, ds.name: ds}
    if not remember:
        numa._content = _Forgetful()  # type: ignore[assignment]
        ds._filter.evaluator._content = _Forgetful()  # type: ignore[assignment]
        ds._score.evaluator._content = _Forgetful()  # type: ignore[assignment]
        ds._reserve.remembered = _Forgetful()  # type: ignore[assignment]
    return numa, ds


def _cycle(plugins: Plugins, pod: PodInfo, snap: Snapshot) -> tuple[CycleState, dict[str, Status], Any]:
    """PreFilter, Filter and Score as the framework runs them: per node its rejection (or None)."""
    numa, ds = plugins
    state = CycleState()
    rows = np.arange(snap.n, dtype=np.int64)
    verdicts: dict[str, Status] = {}
    active = []
    for plugin in (numa, ds):
        _, status = plugin.pre_filter(state, pod)
        if status.code is Code.SKIP:
            continue
        assert status.ok, status
        active.append(plugin)
    for plugin in active:
        codes = plugin.filter_batch(state, pod, rows)
        for row, code in zip(rows.tolist(), codes.tolist(), strict=True):
            if code:
                verdicts[snap.infos[row].name] = plugin.explain(state, pod, code)
        rows = rows[codes == 0]
    scores = [
        plugin.score_batch(state, pod, rows).tolist()
        for plugin in active
        if plugin.pre_score(state, pod, rows).ok
    ]
    return state, verdicts, (rows.tolist(), scores)


def _reserve(plugins: Plugins, state: CycleState, pod: PodInfo, node: str) -> Any:
    """Reserve on ``node`` with both plugins; what they hold (read back) and the statuses."""
    numa, ds = plugins
    statuses = [numa.reserve(state, pod, node), ds.reserve(state, pod, node)]
    devices = ds.allocations_of(node).get(pod.uid)
    cpus = numa.numa_state.manager.get(node, pod.uid)
    return statuses, devices, None if cpus is None else (cpus.cpuset, cpus.numa)


def _results(plugins: Plugins, pod: PodInfo, snap: Snapshot) -> Any:
    state, verdicts, (rows, scores) = _cycle(plugins, pod, snap)
    store = affinity_store(state)
    names = [snap.infos[r].name for r in rows]
    hints = {n: store.get(n) for n in names}
    reserved = None
    if names:
        node = names[len(names) // 2]
        reserved = _reserve(plugins, state, pod, node)
        for plugin in plugins:
            plugin.unreserve(state, pod, node)
    return verdicts, hints, rows, scores, reserved


def _device(name: str, rng: random.Random) -> Device:
    kind = rng.random()
    if kind < 0.6:
        return make_device(name)
    if kind < 0.8:
        return make_device(name, standard_entries(unhealthy=rng.sample(range(8), rng.randint(1, 3))))
    return make_device(name, standard_entries(vfs=rng.choice([0, 1, 1, 2])))


def _nrt(name: str, rng: random.Random) -> NodeResourceTopology:
    return make_nrt(name, cores_per_node=rng.choice([8, 16]), memory_per_node=rng.choice(["64Gi", "256Gi"]))


#: A node's GPU and RDMA allocatable beside its cpu and memory.
DEVICE_ALLOCATABLE = {
    "nvidia.com/gpu": "8",
    "koordinator.sh/gpu": "800",
    "koordinator.sh/gpu-core": "800",
    "koordinator.sh/gpu-memory-ratio": "800",
    "koordinator.sh/gpu.shared": "800",
    "koordinator.sh/rdma": "400",
}


def _gpu_node(name: str, labels: Mapping[str, str]) -> Node:
    return builders.node(name, "128", "1Ti", labels=labels, capacity=False, **DEVICE_ALLOCATABLE)


def test_remembered_results_match_fresh_ones_through_random_changes() -> None:
    warm_up()
    rng = random.Random(11)
    snap = Snapshot(capacity=4)
    objects = {"Device": ObjectStore(), "NodeResourceTopology": ObjectStore()}
    handle = FakeHandle(snap, stores=objects)
    remembering = _plugins(handle, remember=True)
    placed: list[tuple[str, PodInfo]] = []
    count = 0

    def pod(shape: int, name: str) -> PodInfo:
        requests, annotations = SHAPES[shape]
        return make_pod(name, requests, annotations=annotations)

    def add_node() -> None:
        nonlocal count
        count += 1
        name = f"n{count}"
        objects["Device"][name] = make_device(name, standard_entries(vfs=rng.choice([1, 4])))
        objects["NodeResourceTopology"][name] = make_nrt(name, cores_per_node=16, memory_per_node="256Gi")
        node = builders.node(
            name,
            "128",
            "1Ti",
            labels=HONOR if rng.random() < 0.2 else {},
            capacity=False,
            **DEVICE_ALLOCATABLE,
        )
        snap.add_node(node, resource_list(node.status.allocatable))

    def place(step: int) -> None:
        p = pod(rng.randrange(len(SHAPES)), f"p{step}")
        state, _, (rows, _) = _cycle(remembering, p, snap)
        if not rows:
            return
        info = snap.infos[rng.choice(rows)]
        snap.add_pod(info, p)  # assumed first, as the scheduler does
        if all(s.ok for s in _reserve(remembering, state, p, info.name)[0]):
            placed.append((info.name, p))
        else:
            for plugin in remembering:
                plugin.unreserve(state, p, info.name)
            snap.remove_pod(info, p)

    def remove_node(info: NodeInfo) -> None:
        for p in list(info.pods.values()):
            snap.remove_pod(info, p)
        placed[:] = [(n, p) for n, p in placed if n != info.name]
        snap.remove_node(info.name)
        del objects["Device"][info.name]
        del objects["NodeResourceTopology"][info.name]

    for _ in range(5):
        add_node()
    for step in range(220):
        op = rng.random()
        if op < 0.5:
            place(step)
        elif op < 0.65 and placed:
            name, p = placed.pop(rng.randrange(len(placed)))
            snap.remove_pod(snap.by_name[name], p)
        elif op < 0.73:
            info = snap.infos[rng.randrange(snap.n)]
            objects["Device"][info.name] = _device(info.name, rng)
            snap.touch(info.name)  # as EventHandlers.on_object does
        elif op < 0.8:
            info = snap.infos[rng.randrange(snap.n)]
            objects["NodeResourceTopology"][info.name] = _nrt(info.name, rng)
            snap.touch(info.name)
        elif op < 0.87:
            info = snap.infos[rng.randrange(snap.n)]
            node = builders.node(
                info.name,
                "128",
                "1Ti",
                labels=HONOR if rng.random() < 0.5 else {},
                capacity=False,
                **DEVICE_ALLOCATABLE,
            )
            snap.update_node(node, resource_list(node.status.allocatable))
        elif op < 0.93 and snap.n > 3:
            remove_node(snap.infos[rng.randrange(snap.n)])
        else:
            add_node()
        for shape in rng.sample(range(len(SHAPES)), 3):
            probe = pod(shape, f"probe{shape}")
            fresh = _plugins(FakeHandle(snap, stores=objects), remember=False)
            assert _results(remembering, probe, snap) == _results(fresh, probe, snap), f"step {step}"


def test_nodes_alike_but_for_the_vfs_in_use_are_told_apart() -> None:
    """Two nodes whose NICs carry the same usage, one through VFs and one without: a joint pod that
    needs a VF fits only on the second, whatever was remembered for the first."""
    warm_up()
    snap = Snapshot()
    objects = {"Device": ObjectStore(), "NodeResourceTopology": ObjectStore()}
    handle = FakeHandle(snap, stores=objects)
    remembering = _plugins(handle, remember=True)
    for name in ("plain", "vfs"):
        objects["Device"][name] = make_device(name, standard_entries(vfs=1))
        node = _gpu_node(name, {})
        snap.add_node(node, resource_list(node.status.allocatable))
    store = remembering[1].store
    store.sync()
    for nic in range(1, 5):
        bus = f"0000:{0x10 + nic:02x}:00.2"
        store.assume("plain", f"plain-{nic}", {"rdma": [DeviceAllocation(nic, {"koordinator.sh/rdma": 1})]})
        store.assume(
            "vfs",
            f"vf-{nic}",
            {"rdma": [DeviceAllocation(nic, {"koordinator.sh/rdma": 1}, vfs=(VF(0, bus),))]},
        )
    probe = make_pod(
        "probe",
        {"koordinator.sh/gpu": 100, "koordinator.sh/rdma": 1},
        annotations={
            "scheduling.koordinator.sh/device-joint-allocate": JOINT,
            "scheduling.koordinator.sh/device-allocate-hint": VF_HINT,
        },
    )
    fresh = _plugins(FakeHandle(snap, stores=objects), remember=False)
    for plugins in (remembering, fresh):
        ds = plugins[1]
        verdicts = []
        for name in ("plain", "vfs"):
            state = CycleState()
            ds.pre_filter(state, probe)
            code = int(ds.filter_batch(state, probe, np.asarray([snap.by_name[name].row]))[0])
            verdicts.append(None if code == 0 else ds.explain(state, probe, code))
        assert verdicts[0] is None
        assert verdicts[1] is not None and verdicts[1].reasons == ("Insufficient rdma devices",)


def test_rows_written_from_a_template_equal_rows_written_in_full() -> None:
    """A row is rewritten from its model's template plus the devices in use: the same arrays as
    writing it device by device, through random usage (VFs, unhealthy devices, foreign minors)."""
    rng = random.Random(5)
    snap = Snapshot()
    objects = {"Device": ObjectStore()}
    handle = FakeHandle(snap, stores=objects)
    ds = DeviceShare(None, handle)  # type: ignore[arg-type]
    store = ds.store
    for i in range(4):
        name = f"n{i}"
        objects["Device"][name] = make_device(name, standard_entries(unhealthy=[i] if i % 2 else []))
        node = _gpu_node(name, HONOR if i == 3 else {})
        snap.add_node(node, resource_list(node.status.allocatable))
    store.sync()
    held: list[tuple[str, str]] = []
    added = 4
    for step in range(300):
        name = snap.infos[rng.randrange(snap.n)].name
        if step % 40 == 39:  # a node goes (the last row moves into its place) and another comes
            held[:] = [(n, u) for n, u in held if n != name]
            snap.remove_node(name)
            name = f"n{added}"
            added += 1
            objects["Device"][name] = make_device(name, standard_entries(unhealthy=[added % 8]))
            node = _gpu_node(name, {})
            snap.add_node(node, resource_list(node.status.allocatable))
            store.sync()
        elif held and rng.random() < 0.4:
            node, uid = held.pop(rng.randrange(len(held)))
            store.forget(node, uid)
        else:
            minor = rng.choice([0, 1, 3, 7, 9])  # 9: no such GPU in the model
            gpu = DeviceAllocation(minor, {"koordinator.sh/gpu-core": rng.choice([0, 25, 100])})
            nic = rng.randrange(1, 5)
            vfs = (VF(0, f"0000:{0x10 + nic:02x}:00.{rng.randrange(2, 6)}"),) if rng.random() < 0.5 else ()
            rdma = DeviceAllocation(nic, {"koordinator.sh/rdma": rng.choice([1, 100])}, vfs=vfs)
            uid = f"u{step}"
            store.assume(name, uid, {"gpu": [gpu], "rdma": [rdma]})
            held.append((name, uid))
        arrays = store.flush_rows()
        reference = DeviceRows(arrays.capacity)
        reference.tables = arrays.tables  # the same table ids
        for info in snap.infos:
            reference._write_full(info.row, store.states[info.name], info.node.metadata.labels)
            for a in ROW_ARRAYS:
                assert np.array_equal(getattr(arrays, a)[info.row], getattr(reference, a)[info.row]), step
