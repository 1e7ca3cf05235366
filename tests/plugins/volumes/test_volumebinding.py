"""VolumeBinding, table-driven from kube-scheduler v1.28's semantics (binder.go, volume_binding.go)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordsched.api.storage import CSIDriver, CSIStorageCapacity, PersistentVolume, PersistentVolumeClaim
from koordsched.config.catalog import ArgsError
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.framework.types import BindingPlan
from koordsched.plugins.volumebinding import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
    ERR_UNBOUND_IMMEDIATE,
    VolumeBinding,
    VolumeBindingArgs,
    VolumeBindingWriter,
)
from tests.builders import make_node, pod_info
from tests.plugins.volumes.helpers import HOSTNAME, NS, StorageHandle, claim_pod, pv, pvc, sc

NODES = ("n1", "n2", "n3")


class FakeWriter:
    """The output port's volume writes, with the PV controller answering (or not)."""

    def __init__(self, handle: StorageHandle, *, controller: bool = True) -> None:
        self.handle = handle
        self.controller = controller
        self.pv_writes: list[PersistentVolume] = []
        self.pvc_writes: list[PersistentVolumeClaim] = []
        self.bound: list[tuple[str, str]] = []

    async def bind(self, pod: Any, node_name: str, plan: BindingPlan) -> None:
        self.bound.append((pod.key, node_name))

    async def update_persistent_volume(self, v: PersistentVolume) -> PersistentVolume:
        self.pv_writes.append(v)
        self.handle.add(v)
        ref = v.spec.claim_ref
        if self.controller and ref is not None:
            claim = self.handle.stores["PersistentVolumeClaim"][f"{ref.namespace}/{ref.name}"]
            ann = {**claim.metadata.annotations, "pv.kubernetes.io/bind-completed": "yes"}
            self.handle.add(
                msgspec.structs.replace(
                    claim,
                    metadata=msgspec.structs.replace(claim.metadata, annotations=ann),
                    spec=msgspec.structs.replace(claim.spec, volume_name=v.metadata.name),
                )
            )
        return v

    async def update_persistent_volume_claim(self, c: PersistentVolumeClaim) -> PersistentVolumeClaim:
        self.pvc_writes.append(c)
        self.handle.add(c)
        return c

    async def wait_for_volume_binding(self, done: Callable[[], bool], limit_s: float) -> bool:
        return done()


def setup(*objs: Any, labels: dict[str, dict[str, str]] | None = None) -> tuple[VolumeBinding, StorageHandle]:
    snap = Snapshot()
    for n in NODES:
        snap.add_node(
            make_node(n, labels={HOSTNAME: n, **(labels or {}).get(n, {})}), {"cpu": 4000, "pods": 110}
        )
    handle = StorageHandle(snap)
    handle._binder = FakeWriter(handle)  # type: ignore[assignment]
    for o in objs:
        handle.add(o)
    return VolumeBinding(VolumeBindingArgs(), handle), handle


def run(
    plugin: VolumeBinding, handle: StorageHandle, pod: Any
) -> tuple[Status, dict[str, Status], CycleState]:
    """PreFilter, then Filter on every node its result admits; (prefilter status, node -> status)."""
    state = CycleState()
    info = pod_info(pod)
    result, status = plugin.pre_filter(state, info)
    out: dict[str, Status] = {}
    if status.ok:
        names = [n for n in NODES if result is None or result.node_names is None or n in result.node_names]
        rows = np.array([handle.snapshot.by_name[n].row for n in names], dtype=np.int64)
        codes = plugin.filter_batch(state, info, rows)
        for n, code in zip(names, codes.tolist(), strict=True):
            out[n] = SUCCESS if code == 0 else plugin.explain(state, info, code)
    return status, out, state


def reasons(statuses: dict[str, Status]) -> dict[str, tuple[str, ...]]:
    return {n: s.reasons for n, s in statuses.items()}


LOCAL = sc("local")
OK: tuple[str, ...] = ()


@pytest.mark.parametrize(
    ("objs", "claims", "prefilter", "expected"),
    [
        pytest.param(
            [LOCAL], ["missing"], 'persistentvolumeclaim "missing" not found', {}, id="claim not found"
        ),
        pytest.param(
            [LOCAL, pvc("c", phase="Lost", volume="gone")],
            ["c"],
            'persistentvolumeclaim "c" bound to non-existent persistentvolume "gone"',
            {},
            id="lost claim",
        ),
        pytest.param(
            [LOCAL, pvc("c", deletionTimestamp="2024-01-01T00:00:00Z")],
            ["c"],
            'persistentvolumeclaim "c" is being deleted',
            {},
            id="claim being deleted",
        ),
        pytest.param(
            [sc("fast", mode="Immediate"), pvc("c", cls="fast")],
            ["c"],
            ERR_UNBOUND_IMMEDIATE,
            {},
            id="immediate",
        ),
        pytest.param(
            [pvc("c", cls="nowhere")], ["c"], ERR_UNBOUND_IMMEDIATE, {}, id="class missing is immediate"
        ),
        pytest.param(
            [LOCAL, pv("p", host="n9"), pvc("c", volume="p")],
            ["c"],
            ERR_UNBOUND_IMMEDIATE,
            {},
            id="pre-bound claim not yet bound by the PV controller",
        ),
        pytest.param(
            [LOCAL, pvc("c", volume="p", bound=True), pv("p", host="n1")],
            ["c"],
            None,
            {"n1": OK},
            id="bound claim narrows to its local PV's node",
        ),
        pytest.param(
            [
                LOCAL,
                pvc("c", volume="p", bound=True),
                pv(
                    "p",
                    affinity={
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": HOSTNAME, "operator": "NotIn", "values": ["n2", "n3"]}
                                ]
                            }
                        ]
                    },
                ),
            ],
            ["c"],
            None,
            {"n1": OK, "n2": (ERR_REASON_NODE_CONFLICT,), "n3": (ERR_REASON_NODE_CONFLICT,)},
            id="bound claim, PV affinity checked per node",
        ),
        pytest.param(
            [LOCAL, pvc("c", volume="gone", bound=True)],
            ["c"],
            None,
            {n: (ERR_REASON_PV_NOT_EXIST,) for n in NODES},
            id="bound to a PV that does not exist",
        ),
        pytest.param(
            [LOCAL, pvc("c"), pv("p1", host="n1")],
            ["c"],
            None,
            {"n1": OK, "n2": (ERR_REASON_BIND_CONFLICT,), "n3": (ERR_REASON_BIND_CONFLICT,)},
            id="wait for first consumer: only the node with a local PV",
        ),
        pytest.param(
            [
                LOCAL,
                pvc("c"),
                pv("p1", host="n1", cls="other"),
                pv("p2", host="n2", size="1Gi"),
                pv("p3", host="n3", modes=["ReadOnlyMany"]),
            ],
            ["c"],
            None,
            {n: (ERR_REASON_BIND_CONFLICT,) for n in NODES},
            id="class, size and access modes must match",
        ),
        pytest.param(
            [
                LOCAL,
                pvc("c"),
                pv("p1", host="n1", phase="Released"),
                pv("p2", host="n2", volumeMode="Block"),
                pv("p3", host="n3", deletion="2024-01-01T00:00:00Z"),
            ],
            ["c"],
            None,
            {n: (ERR_REASON_BIND_CONFLICT,) for n in NODES},
            id="phase, volume mode and deletion",
        ),
    ],
)
def test_filter(
    objs: list[Any], claims: list[str], prefilter: str | None, expected: dict[str, tuple[str, ...]]
) -> None:
    plugin, handle = setup(*objs)
    status, statuses, _ = run(plugin, handle, claim_pod("p", *claims))
    if prefilter is not None:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (prefilter,)
        return
    assert status.ok, status
    assert reasons(statuses) == expected
    for s in statuses.values():
        assert s.ok or s.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_selector_mismatch_leaves_the_pv() -> None:
    plugin, handle = setup(
        LOCAL,
        pvc("c", selector={"matchLabels": {"tier": "fast"}}),
        pv("p1", host="n1", labels={"tier": "slow"}),
        pv("p2", host="n2", labels={"tier": "fast"}),
    )
    _, statuses, _ = run(plugin, handle, claim_pod("p", "c"))
    assert reasons(statuses) == {
        "n1": (ERR_REASON_BIND_CONFLICT,),
        "n2": OK,
        "n3": (ERR_REASON_BIND_CONFLICT,),
    }


def test_pod_without_claims_is_skipped() -> None:
    plugin, _handle = setup(LOCAL)
    _, status = plugin.pre_filter(CycleState(), pod_info(claim_pod("p")))
    assert status.code is Code.SKIP


def test_ephemeral_claims() -> None:
    eph = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    plugin, handle = setup(LOCAL)
    status, _, _ = run(plugin, handle, claim_pod("p", volumes=eph))
    assert status.reasons == (
        'waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"',
    )
    handle.add(pvc("p-scratch", owner_uid="someone-else"))
    status, _, _ = run(plugin, handle, claim_pod("p", volumes=eph))
    assert status.reasons == ("PVC default/p-scratch was not created for pod default/p (pod is not owner)",)
    handle.add(pvc("p-scratch", owner_uid="uid-p"))
    handle.add(pv("local-1", host="n2"))
    status, statuses, _ = run(plugin, handle, claim_pod("p", volumes=eph))
    assert status.ok and statuses["n2"].ok and not statuses["n1"].ok


def _chosen(plugin: VolumeBinding, handle: StorageHandle, pod: Any, node: str) -> list[tuple[str, str]]:
    _, statuses, state = run(plugin, handle, pod)
    assert statuses[node].ok, statuses[node]
    assert plugin.reserve(state, pod_info(pod), node).ok
    s = state.get("PreFilterVolumeBinding")
    return [(b.pvc.metadata.name, b.pv.metadata.name) for b in s.assumed.static]


def test_smallest_fitting_pv_and_distinct_pvs_per_claim() -> None:
    plugin, handle = setup(
        LOCAL,
        pvc("small", size="5Gi"),
        pvc("large", size="15Gi"),
        pv("p20", host="n1", size="20Gi"),
        pv("p8", host="n1", size="8Gi"),
        pv("p4", host="n1", size="4Gi"),
        pv("p8b", host="n1", size="8Gi"),
        pv("shared", size="6Gi"),
    )
    # 5Gi: the smallest that holds it, among local and unpinned PVs alike; 15Gi: the 20Gi one.
    assert _chosen(plugin, handle, claim_pod("p", "large", "small"), "n1") == [
        ("small", "shared"),
        ("large", "p20"),
    ]


def test_pre_bound_pv_wins_or_no_pv_on_other_nodes() -> None:
    c = pvc("c")
    plugin, handle = setup(LOCAL, c, pv("mine", host="n2", size="50Gi", claim=c), pv("free", host="n1"))
    _, statuses, _ = run(plugin, handle, claim_pod("p", "c"))
    # Pre-bound to n2's PV: n1's free PV is not offered instead.
    assert reasons(statuses) == {
        "n1": (ERR_REASON_BIND_CONFLICT,),
        "n2": OK,
        "n3": (ERR_REASON_BIND_CONFLICT,),
    }


def test_assumed_pv_is_not_offered_to_the_next_pod_until_unreserved() -> None:
    plugin, handle = setup(LOCAL, pvc("a"), pvc("b"), pv("only", host="n1"))
    pa, pb = claim_pod("pa", "a"), claim_pod("pb", "b")
    _, _sa, state_a = run(plugin, handle, pa)
    assert plugin.reserve(state_a, pod_info(pa), "n1").ok
    _, sb, _ = run(plugin, handle, pb)
    assert sb["n1"].reasons == (ERR_REASON_BIND_CONFLICT,)
    plugin.unreserve(state_a, pod_info(pa), "n1")
    _, sb, _ = run(plugin, handle, pb)
    assert sb["n1"].ok


def test_provisioning() -> None:
    csi = sc(
        "csi",
        provisioner="csi.example.com",
        topologies=[{"matchLabelExpressions": [{"key": "zone", "values": ["a", "b"]}]}],
    )
    zones = {"n1": {"zone": "a"}, "n2": {"zone": "b"}, "n3": {"zone": "c"}}
    plugin, handle = setup(csi, pvc("c", cls="csi"), labels=zones)
    _, statuses, _ = run(plugin, handle, claim_pod("p", "c"))
    assert reasons(statuses) == {"n1": OK, "n2": OK, "n3": (ERR_REASON_BIND_CONFLICT,)}
    # The driver publishes capacity: only what a node can reach with room counts.
    handle.add(
        msgspec.convert(
            {"metadata": {"name": "csi.example.com"}, "spec": {"storageCapacity": True}}, CSIDriver
        )
    )
    handle.add(
        msgspec.convert(
            {
                "metadata": {"name": "cap-a", "namespace": "kube-system"},
                "storageClassName": "csi",
                "nodeTopology": {"matchLabels": {"zone": "a"}},
                "capacity": "100Gi",
                "maximumVolumeSize": "4Gi",
            },
            CSIStorageCapacity,
        )
    )
    handle.add(
        msgspec.convert(
            {
                "metadata": {"name": "cap-b", "namespace": "kube-system"},
                "storageClassName": "csi",
                "nodeTopology": {"matchLabels": {"zone": "b"}},
                "capacity": "6Gi",
            },
            CSIStorageCapacity,
        )
    )
    _, statuses, _ = run(plugin, handle, claim_pod("p", "c"))
    # a: 100Gi free but volumes of at most 4Gi; b: 6Gi.
    assert reasons(statuses) == {
        "n1": (ERR_REASON_NOT_ENOUGH_SPACE,),
        "n2": OK,
        "n3": (ERR_REASON_BIND_CONFLICT,),
    }


def test_claim_being_provisioned_elsewhere() -> None:
    csi = sc("csi", provisioner="csi.example.com")
    plugin, handle = setup(csi, pvc("c", cls="csi", annotations={"volume.kubernetes.io/selected-node": "n2"}))
    _, statuses, _ = run(plugin, handle, claim_pod("p", "c"))
    assert reasons(statuses) == {
        "n1": (ERR_REASON_BIND_CONFLICT,),
        "n2": OK,
        "n3": (ERR_REASON_BIND_CONFLICT,),
    }


def _schedule(
    plugin: VolumeBinding, pod: Any, node: str, handle: StorageHandle, *, assume: bool = True
) -> Status:
    _, statuses, state = run(plugin, handle, pod)
    assert statuses[node].ok
    info = pod_info(pod)
    assert plugin.reserve(state, info, node).ok
    if assume:  # as the cache holds the pod on the node while it binds
        handle.snapshot.add_pod(handle.snapshot.by_name[node], info)
    status = asyncio.run(plugin.pre_bind(state, info, node, BindingPlan()))
    if not status.ok:
        plugin.unreserve(state, info, node)
    return status


def test_pre_bind_writes_claim_ref_and_waits_for_the_pv_controller() -> None:
    plugin, handle = setup(LOCAL, pvc("c"), pv("p1", host="n1"))
    assert isinstance(handle.binder, VolumeBindingWriter)
    assert _schedule(plugin, claim_pod("p", "c"), "n1", handle).ok
    (written,) = handle.binder.pv_writes  # type: ignore[attr-defined]
    ref = written.spec.claim_ref
    assert ref is not None and (ref.namespace, ref.name, ref.uid, ref.kind) == (
        NS,
        "c",
        "uid-c",
        "PersistentVolumeClaim",
    )
    assert written.metadata.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"


def test_pre_bind_provisioning_sets_the_selected_node() -> None:
    plugin, handle = setup(sc("csi", provisioner="csi.example.com"), pvc("c", cls="csi"))
    status = _schedule(plugin, claim_pod("p", "c"), "n3", handle)
    (written,) = handle.binder.pvc_writes  # type: ignore[attr-defined]
    assert written.metadata.annotations["volume.kubernetes.io/selected-node"] == "n3"
    # Nobody provisions here: the claim never binds, and the wait ends without it.
    assert status.code is Code.ERROR and status.reasons == (
        "binding volumes: timed out waiting for the condition",
    )


def test_pre_bind_reports_a_reset_claim_ref() -> None:
    plugin, handle = setup(LOCAL, pvc("c"), pv("p1", host="n1"))
    writer: FakeWriter = handle.binder  # type: ignore[assignment]
    writer.controller = False

    async def reset(v: PersistentVolume) -> PersistentVolume:
        # Our write lands, then the PV controller undoes it before the claim is bound.
        handle.add(v)
        handle.add(msgspec.structs.replace(v, spec=msgspec.structs.replace(v.spec, claim_ref=None)))
        return v

    writer.update_persistent_volume = reset  # type: ignore[method-assign]
    status = _schedule(plugin, claim_pod("p", "c"), "n1", handle)
    assert status.reasons == ('binding volumes: ClaimRef got reset for pv "p1"',)


def test_args() -> None:
    assert VolumeBindingArgs().bind_timeout_seconds == 600
    with pytest.raises(
        ArgsError,
        match=r"^bindTimeoutSeconds: Invalid value: -1: invalid BindTimeoutSeconds, "
        r"should not be a negative value$",
    ):
        VolumeBindingArgs(bind_timeout_seconds=-1).validate()
    args = msgspec.convert({"shape": [{"utilization": 0, "score": 0}]}, VolumeBindingArgs)
    with pytest.raises(ArgsError, match="unsupported when VolumeCapacityPriority feature is disabled"):
        args.validate()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["n1", "n2", "n3", "n9"]),
            st.sampled_from(["1Gi", "5Gi", "10Gi"]),
            st.sampled_from([["ReadWriteOnce"], ["ReadOnlyMany"]]),
            st.sampled_from(["Available", "Released"]),
            st.booleans(),
        ),
        max_size=6,
    ),
    st.sampled_from(["2Gi", "5Gi", "20Gi"]),
    st.booleans(),
)
def test_judging_nodes_by_hostname_agrees_with_the_full_search(
    specs: list[tuple[str, str, list[str], str, bool]], size: str, other: bool
) -> None:
    """The hostname shortcut of filter_batch gives each node exactly what binder.find does."""
    pvs = [
        pv(f"p{i}", host=h, size=sz, modes=m, phase=ph, labels={"tier": "fast" if fast else "slow"})
        for i, (h, sz, m, ph, fast) in enumerate(specs)
    ]
    if other:
        pvs.append(pv("anywhere", size="50Gi"))
    claim = pvc("c", size=size, selector={"matchLabels": {"tier": "fast"}})
    plugin, handle = setup(LOCAL, claim, *pvs)
    status, statuses, state = run(plugin, handle, claim_pod("p", "c"))
    assert status.ok
    s = state.get("PreFilterVolumeBinding")
    for n in NODES:
        _, reasons_found = plugin.binder.find(s.prepared, n, handle.snapshot.by_name[n].labels)
        assert statuses[n].reasons == tuple(reasons_found), n


def test_hostname_answers_follow_each_pv_taken_and_each_node_added() -> None:
    """Alike claims reuse what was worked out per hostname; each PV taken, and a node (with its
    PV) added later, are seen by the next pod."""
    plugin, handle = setup(LOCAL, *(pvc(f"c{i}") for i in range(4)), pv("a1", host="n1"), pv("a2", host="n1"))
    for i, expect_n1 in ((0, True), (1, True), (2, False)):
        pod = claim_pod(f"p{i}", f"c{i}")
        _, statuses, state = run(plugin, handle, pod)
        assert statuses["n1"].ok is expect_n1, i
        assert statuses["n2"].reasons == (ERR_REASON_BIND_CONFLICT,)
        if expect_n1:
            assert plugin.reserve(state, pod_info(pod), "n1").ok
    handle.snapshot.add_node(make_node("n4", labels={HOSTNAME: "n4"}), {"cpu": 4000, "pods": 110})
    handle.add(pv("d1", host="n4"))
    state = CycleState()
    info = pod_info(claim_pod("p3", "c3"))
    assert plugin.pre_filter(state, info)[1].ok
    rows = np.array([handle.snapshot.by_name[n].row for n in ("n1", "n4")], dtype=np.int64)
    assert plugin.filter_batch(state, info, rows).tolist() == [2, 0]


def test_pre_bind_gives_up_on_a_deleted_pod() -> None:
    plugin, handle = setup(LOCAL, pvc("c"), pv("p1", host="n1"))
    writer: FakeWriter = handle.binder  # type: ignore[assignment]
    writer.controller = False
    status = _schedule(plugin, claim_pod("p", "c"), "n1", handle, assume=False)
    assert status.reasons == ('binding volumes: pod does not exist any more: pods "p" not found',)
