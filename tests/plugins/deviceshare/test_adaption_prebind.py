"""DeviceShare's PreBind with and without ``DevicePluginAdaption`` (spec C.5): what the binding
plan gets, and that a failure (an adapter's, the node lock's) adds nothing to it."""

from __future__ import annotations

import pytest

from koordsched.framework.status import Code
from koordsched.plugins.deviceshare.node_lock import lock_value
from tests.builders import GPU_MODEL_LABEL, GPU_VENDOR_LABEL, FakeNodeLockBinder
from tests.fakes import WALL_ZERO
from tests.plugins.deviceshare.fixtures import Cluster, allocated, gpu_entry, make_pod

SHARED = {
    "koordinator.sh/gpu.shared": "1",
    "koordinator.sh/gpu-core": "5",
    "koordinator.sh/gpu-memory": "1Gi",
}
LOCK = "cambricon.com/dsmlu.lock"
CAMBRICON = 'failed to adapt for GPU device plugin of vendor "cambricon": '
HAMI = {"koordinator.sh/gpu-isolation-provider": "HAMi-core"}


def cluster(vendor: str, *, gate: bool = True, binder: FakeNodeLockBinder | None = None) -> Cluster:
    c = Cluster(device_plugin_adaption=gate)
    if binder is not None:
        c.handle.binder = binder
    c.add_node(
        "n1",
        [gpu_entry(0, 0, "pci0"), gpu_entry(1, 0, "pci0")],
        device_labels={GPU_VENDOR_LABEL: vendor, GPU_MODEL_LABEL: "MLU-370"},
    )
    return c


def test_gate_on_cambricon_locks_the_node_and_writes_the_profile() -> None:
    binder = FakeNodeLockBinder({"n1": {}})
    status, annotations = cluster("cambricon", binder=binder).schedule(make_pod("p", SHARED), "n1")
    assert status.ok, status
    assert annotations["CAMBRICON_DSMLU_PROFILE"] == "0_5_4"
    assert annotations["CAMBRICON_DSMLU_ASSIGHED"] == "false"
    assert annotations["scheduling.koordinator.sh/gpu-minors"] == "0"
    assert annotations["scheduling.koordinator.sh/bind-timestamp"] == str(int(WALL_ZERO * 1e9))
    assert [g["minor"] for g in allocated(annotations)["gpu"]] == [0]
    assert binder.patches == [("n1", {LOCK: lock_value(WALL_ZERO, "default", "p")})]


def test_gate_off_writes_device_allocated_only() -> None:
    binder = FakeNodeLockBinder({"n1": {}})
    status, annotations = cluster("cambricon", gate=False, binder=binder).schedule(
        make_pod("p", SHARED), "n1"
    )
    assert status.ok
    assert list(annotations) == ["scheduling.koordinator.sh/device-allocated"]
    assert binder.patches == []


def test_a_held_lock_fails_prebind_and_the_plan_stays_empty() -> None:
    held = lock_value(WALL_ZERO - 60, "default", "holder")
    binder = FakeNodeLockBinder({"n1": {LOCK: held}}, {"default/holder"})
    status, annotations = cluster("cambricon", binder=binder).schedule(make_pod("p", SHARED), "n1")
    assert status.code is Code.ERROR
    assert status.reasons == (f'{CAMBRICON}failed to lock node: node "n1" has been locked',)
    assert annotations == {} and binder.nodes["n1"] == {LOCK: held}


def test_an_adapter_error_fails_prebind_before_any_lock() -> None:
    binder = FakeNodeLockBinder({"n1": {}})
    tiny = {**SHARED, "koordinator.sh/gpu-memory": "128Mi"}
    status, annotations = cluster("cambricon", binder=binder).schedule(make_pod("p", tiny), "n1")
    assert status.reasons == (f"{CAMBRICON}gpu memory must not be less than 268435456 bytes",)
    assert annotations == {} and binder.patches == []


def test_an_output_without_node_writes_cannot_lock() -> None:
    status, annotations = cluster("metax").schedule(make_pod("p", SHARED), "n1")
    assert status.reasons == (
        'failed to adapt for GPU device plugin of vendor "metax": failed to lock node: '
        "this scheduler's output cannot write Nodes",
    )
    assert annotations == {}


@pytest.mark.parametrize(("labels", "expected"), [(HAMI, {"hami.io/vgpu-node": "n1"}), ({}, {})])
def test_the_hami_core_label_rides_on_the_plan(labels: dict[str, str], expected: dict[str, str]) -> None:
    import asyncio

    from koordsched.framework.cycle_state import CycleState
    from koordsched.framework.types import BindingPlan

    c = cluster("nvidia")
    pod = make_pod("p", SHARED, labels=labels)
    state = CycleState()
    assert c.plugin.pre_filter(state, pod)[1].ok
    assert c.plugin.reserve(state, pod, "n1").ok
    plan = BindingPlan()
    assert asyncio.run(c.plugin.pre_bind(state, pod, "n1", plan)).ok
    assert plan.labels == expected
