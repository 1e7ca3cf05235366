"""Properties on random clusters: the batch filter equals the exact allocator on every node;
reserve/unreserve never gives a device (or a VF) twice and always releases exactly what it took."""

from __future__ import annotations

import random

import pytest

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import SUCCESS, Status
from koordsched.plugins.deviceshare import DeviceShare
from koordsched.plugins.deviceshare.cycle import STATE_KEY
from koordsched.plugins.deviceshare.node_state import NodeDeviceState, add_resources
from tests.plugins.deviceshare.fixtures import Cluster
from tests.plugins.deviceshare.randomized import random_cluster, random_pod


def _exact(plugin: DeviceShare, state: CycleState, c: Cluster) -> list[Status]:
    data = state.get(STATE_KEY)
    return [plugin._filter.exact(data, info) for info in c.snap.infos]


def _populate(c: Cluster, rng: random.Random, pods: int) -> None:
    """Schedule random pods where they fit, so nodes carry random usage."""
    for i in range(pods):
        pod = random_pod(rng, f"fill{i}")
        state = CycleState()
        _, status = c.plugin.pre_filter(state, pod)
        if not status.ok:
            continue
        codes = c.plugin.filter_batch(state, pod, c.rows())
        feasible = [info.name for info, code in zip(c.snap.infos, codes.tolist(), strict=True) if code == 0]
        if feasible:
            # Reserve may still fail: on secondary-device-well-planned nodes Filter skips
            # the joint secondary types and only Reserve allocates them.
            c.plugin.reserve(state, pod, rng.choice(feasible))


@pytest.mark.parametrize("seed", range(30))
def test_batch_filter_equals_exact_allocator(seed: int) -> None:
    rng = random.Random(1000 + seed)
    c = random_cluster(rng)
    _populate(c, rng, 25)
    checked = 0
    for i in range(60):
        pod = random_pod(rng, f"p{i}")
        state = CycleState()
        _, status = c.plugin.pre_filter(state, pod)
        if not status.ok:
            continue
        codes = c.plugin.filter_batch(state, pod, c.rows())
        batch = [SUCCESS if code == 0 else c.plugin.explain(state, pod, int(code)) for code in codes.tolist()]
        exact = _exact(c.plugin, state, c)
        for info, b, e in zip(c.snap.infos, batch, exact, strict=True):
            assert (b.code, b.reasons) == (e.code, e.reasons), (
                info.name,
                pod.pod.metadata.annotations,
                pod.requests,
            )
        checked += 1
    assert checked > 30


@pytest.mark.parametrize("seed", range(15))
def test_batch_score_equals_exact_score(seed: int) -> None:
    rng = random.Random(2000 + seed)
    c = random_cluster(rng)
    _populate(c, rng, 20)
    for i in range(30):
        pod = random_pod(rng, f"s{i}")
        state = CycleState()
        _, status = c.plugin.pre_filter(state, pod)
        if not status.ok:
            continue
        scores = c.plugin.score_batch(state, pod, c.rows()).tolist()
        data = state.get(STATE_KEY)
        exact = [c.plugin._score.exact(state, data, info) for info in c.snap.infos]
        assert scores == exact, pod.requests


def _check_invariants(st: NodeDeviceState) -> None:
    model = st.model
    assert model is not None
    summed: dict[str, dict[int, dict[str, int]]] = {}
    vf_holders: dict[tuple[str, int, str], int] = {}
    for allocs in st.allocs.values():
        for device_type, entries in allocs.items():
            for a in entries:
                per = summed.setdefault(device_type, {})
                per[a.minor] = add_resources(per.get(a.minor, {}), a.resources)
                for vf in a.vfs:
                    key = (device_type, a.minor, vf.bus_id)
                    vf_holders[key] = vf_holders.get(key, 0) + 1
    # usage is exactly the sum of what the recorded pods hold...
    assert {t: {m: {k: v for k, v in r.items() if v} for m, r in d.items()} for t, d in summed.items()} == {
        t: {m: {k: v for k, v in r.items() if v} for m, r in d.items()} for t, d in st.used.items()
    }
    # ...never more than a device has...
    for device_type, per in summed.items():
        for minor, res in per.items():
            total = model.total.get(device_type, {}).get(minor, {})
            for name, amount in res.items():
                assert amount <= total.get(name, 0), (device_type, minor, name, amount, total)
    # ...and no VF is given twice.
    assert all(n == 1 for n in vf_holders.values()), vf_holders


@pytest.mark.parametrize("seed", range(15))
def test_reserve_unreserve_sequence_never_double_allocates(seed: int) -> None:
    rng = random.Random(3000 + seed)
    c = random_cluster(rng, nodes=6)
    c.plugin.store.sync()
    initial = {info.name: _snapshot_free(c, info.name) for info in c.snap.infos}
    live: list[tuple[CycleState, object, str]] = []
    for i in range(150):
        if live and rng.random() < 0.35:
            state, pod, node = live.pop(rng.randrange(len(live)))
            c.plugin.unreserve(state, pod, node)  # type: ignore[arg-type]
        else:
            pod = random_pod(rng, f"r{i}")
            state = CycleState()
            _, status = c.plugin.pre_filter(state, pod)
            if not status.ok:
                continue
            codes = c.plugin.filter_batch(state, pod, c.rows())
            feasible = [
                info.name for info, code in zip(c.snap.infos, codes.tolist(), strict=True) if code == 0
            ]
            if not feasible:
                continue
            node = rng.choice(feasible)
            if c.plugin.reserve(state, pod, node).ok:
                live.append((state, pod, node))
        for info in c.snap.infos:
            st = c.plugin.store.state(info.name)
            if st is not None:
                _check_invariants(st)
    for state, pod, node in live:
        c.plugin.unreserve(state, pod, node)  # type: ignore[arg-type]
    assert {info.name: _snapshot_free(c, info.name) for info in c.snap.infos} == initial
    assert all(not st.allocs and not st.used and not st.vf_used for st in c.plugin.store.states.values())


def _snapshot_free(c: Cluster, node: str) -> object:
    st = c.plugin.store.state(node)
    if st is None:
        return None
    return {t: {m: dict(r) for m, r in st.free(t).items()} for t in ("gpu", "rdma", "fpga")}


def test_nodes_beyond_the_kernel_tables_use_the_exact_allocator() -> None:
    """More devices than slots and minors above 62 are flagged and still answered exactly."""
    from tests.plugins.deviceshare.fixtures import gpu_entry, make_pod

    c = Cluster()
    c.add_node("wide", [gpu_entry(m, m // 10, f"pci{m // 5}") for m in range(20)])
    c.add_node("high", [gpu_entry(m, 0, "pci0") for m in (70, 71)])
    c.add_node("plain", [gpu_entry(m, 0, "pci0") for m in (0, 1)])
    for requests in ({"koordinator.sh/gpu": 100}, {"koordinator.sh/gpu": 300}, {"koordinator.sh/gpu": 1600}):
        pod = make_pod("p", requests)
        state = CycleState()
        c.plugin.pre_filter(state, pod)
        codes = c.plugin.filter_batch(state, pod, c.rows())
        batch = [SUCCESS if code == 0 else c.plugin.explain(state, pod, int(code)) for code in codes.tolist()]
        assert [(b.code, b.reasons) for b in batch] == [
            (e.code, e.reasons) for e in _exact(c.plugin, state, c)
        ]
    status, annotations = c.schedule(make_pod("q", {"koordinator.sh/gpu": 200}), "high")
    assert status.ok and '"minor":70' in annotations["scheduling.koordinator.sh/device-allocated"]


def test_huge_quantities_do_not_overflow() -> None:
    from tests.plugins.deviceshare.fixtures import gpu_entry, make_pod

    c = Cluster()
    c.add_node("n1", [gpu_entry(0, 0, "pci0"), gpu_entry(1, 0, "pci0", memory="100Ei")])
    for requests in ({"koordinator.sh/gpu-memory": "200Ei"}, {"koordinator.sh/gpu-memory": "50Ei"}):
        pod = make_pod("p", requests)
        state = CycleState()
        c.plugin.pre_filter(state, pod)
        codes = c.plugin.filter_batch(state, pod, c.rows())
        batch = [SUCCESS if code == 0 else c.plugin.explain(state, pod, int(code)) for code in codes.tolist()]
        assert [(b.code, b.reasons) for b in batch] == [
            (e.code, e.reasons) for e in _exact(c.plugin, state, c)
        ]
        c.plugin.score_batch(state, pod, c.rows())
    status, annotations = c.schedule(make_pod("q", {"koordinator.sh/gpu-memory": "50Ei"}), "n1")
    assert (
        status.ok
        and '"koordinator.sh/gpu-memory":"50Ei"' in annotations["scheduling.koordinator.sh/device-allocated"]
    )
