"""``DevicePluginAdaption`` through ``simulate`` (spec C.5, C.6): the vendor annotations on the bound
pods, PreBind's errors as the pods' messages, and the node lock the simulated device plugin frees."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, SimResult, simulate
from koordsched.cli import main
from koordsched.plugins.deviceshare.node_lock import lock_value
from koordsched.plugins.registry import in_tree_registry
from tests.builders import (
    node_manifest,
    npu_allocatable,
    pod_manifest,
    shared_gpu_allocatable,
    vendor_device_manifest,
    yaml_docs,
)
from tests.scenario.helpers import WriteYaml

ALLOCATED = "scheduling.koordinator.sh/device-allocated"
GATE_ON = {"DevicePluginAdaption": True}
PREBIND = 'running PreBind plugin "DeviceShare": '
NPU_RESOURCES = {"huawei.com/npu-core": "20", "huawei.com/npu-cpu": "7", "huawei.com/npu-dvpp": "100"}


def run(write_yaml: WriteYaml, docs: list[dict[str, Any]], gates: dict[str, bool] | None = None) -> SimResult:
    registry = in_tree_registry(feature_gates=gates if gates is not None else GATE_ON)
    return simulate([write_yaml(yaml_docs(*docs))], registry=registry)


def gpu_node(name: str, vendor: str, model: str, cards: int = 1, **meta: Any) -> list[dict[str, Any]]:
    node = node_manifest(name, "64", "256Gi", 110, capacity=False, **meta, **shared_gpu_allocatable(cards))
    return [node, vendor_device_manifest(name, vendor, model, cards)]


def shared_pod(name: str, memory: str = "1Gi", core: str = "5") -> dict[str, Any]:
    req = {
        "koordinator.sh/gpu.shared": "1",
        "koordinator.sh/gpu-core": core,
        "koordinator.sh/gpu-memory": memory,
    }
    return pod_manifest(name, "1", "1Gi", requests=req, limits=req)


def huawei_docs() -> list[dict[str, Any]]:
    node = node_manifest("npu", "64", "256Gi", 110, capacity=False, **npu_allocatable(1))
    device = vendor_device_manifest("npu", "huawei", "Ascend-910B3", 1, "64Gi", NPU_RESOURCES)
    req = {"huawei.com/npu-core": "20", "koordinator.sh/gpu-memory-ratio": "100"}
    return [node, device, pod_manifest("train", "1", "1Gi", requests=req, limits=req)]


def written(result: SimResult, name: str) -> dict[str, str]:
    """What the scheduler wrote besides device-allocated."""
    pod = result.pod(f"default/{name}")
    assert pod.status == SCHEDULED, (name, pod.message)
    return {k: v for k, v in pod.annotations.items() if k != ALLOCATED}


def test_whole_flow_with_the_gate_on_a_huawei_device(write_yaml: WriteYaml) -> None:
    """C.6: annotations bind-timestamp, gpu-minors "0", predicate-time, huawei.com/npu-core "0"."""
    before = time.time_ns()
    annotations = written(run(write_yaml, huawei_docs()), "train")
    assert set(annotations) == {
        "scheduling.koordinator.sh/bind-timestamp",
        "scheduling.koordinator.sh/gpu-minors",
        "predicate-time",
        "huawei.com/npu-core",
    }
    assert annotations["scheduling.koordinator.sh/gpu-minors"] == "0"
    assert annotations["huawei.com/npu-core"] == "0"
    # Unix nanoseconds of the (simulated) bind: not before the run started.
    assert int(annotations["scheduling.koordinator.sh/bind-timestamp"]) >= before - 10**9
    assert annotations["predicate-time"] == annotations["scheduling.koordinator.sh/bind-timestamp"]


@pytest.mark.parametrize("gates", [{}, {"DevicePluginAdaption": False}], ids=["not given", "false"])
def test_gate_off_writes_nothing_new(write_yaml: WriteYaml, gates: dict[str, bool]) -> None:
    docs = [*huawei_docs(), *gpu_node("mlu", "cambricon", "MLU-370"), shared_pod("small", "128Mi")]
    result = run(write_yaml, docs, gates)
    assert written(result, "train") == {}
    # The Cambricon checks are PreBind's with the gate only: without it the pod binds.
    assert written(result, "small") == {}


def test_cambricon_pods_share_a_card_one_lock_at_a_time(write_yaml: WriteYaml) -> None:
    """Both pods lock the node in turn: the simulated device plugin frees each one's lock at its bind."""
    docs = [*gpu_node("mlu", "cambricon", "MLU-370"), shared_pod("a"), shared_pod("b")]
    result = run(write_yaml, docs)
    for name in ("a", "b"):
        annotations = written(result, name)
        assert annotations["CAMBRICON_DSMLU_ASSIGHED"] == "false"
        assert annotations["CAMBRICON_DSMLU_PROFILE"] == "0_5_4"
        assert annotations["scheduling.koordinator.sh/gpu-minors"] == "0"


CAMBRICON_ERRORS = [
    (
        "two allocations",
        {"gpu.shared": "2", "gpu-core": "10", "gpu-memory": "2Gi"},
        "multiple gpu share is not supported on device side",
    ),
    ("no core", {"gpu.shared": "1", "gpu-memory": "1Gi"}, "gpu core resource is required"),
    (
        "128Mi",
        {"gpu.shared": "1", "gpu-core": "5", "gpu-memory": "128Mi"},
        "gpu memory must not be less than 268435456 bytes",
    ),
]


@pytest.mark.parametrize(
    ("requests", "error"), [row[1:] for row in CAMBRICON_ERRORS], ids=[row[0] for row in CAMBRICON_ERRORS]
)
def test_cambricon_errors_fail_prebind(write_yaml: WriteYaml, requests: dict[str, str], error: str) -> None:
    """C.6: an error in each case, and no annotations written (the pod is not bound)."""
    req = {f"koordinator.sh/{k}": v for k, v in requests.items()}
    small = pod_manifest("small", "1", "1Gi", requests=req, limits=req)
    result = run(write_yaml, [*gpu_node("mlu", "cambricon", "MLU-370", cards=2), small])
    pod = result.pod("default/small")
    assert pod.status == UNSCHEDULABLE
    assert pod.message == f'{PREBIND}failed to adapt for GPU device plugin of vendor "cambricon": {error}'
    assert pod.annotations == {}


def test_a_node_locked_by_an_existing_pod_fails_prebind(write_yaml: WriteYaml) -> None:
    lock = lock_value(time.time(), "default", "holder")
    docs = [
        *gpu_node("mlu", "cambricon", "MLU-370", annotations={"cambricon.com/dsmlu.lock": lock}),
        pod_manifest("holder", "1", "1Gi", node_name="mlu"),
        shared_pod("a"),
    ]
    pod = run(write_yaml, docs).pod("default/a")
    assert pod.status == UNSCHEDULABLE
    assert pod.message == (
        f'{PREBIND}failed to adapt for GPU device plugin of vendor "cambricon": '
        'failed to lock node: node "mlu" has been locked'
    )


def test_a_lock_of_a_pod_that_is_gone_is_taken_over(write_yaml: WriteYaml) -> None:
    lock = lock_value(time.time(), "default", "gone")
    docs = [
        *gpu_node("mlu", "cambricon", "MLU-370", annotations={"cambricon.com/dsmlu.lock": lock}),
        shared_pod("a"),
    ]
    assert written(run(write_yaml, docs), "a")["CAMBRICON_DSMLU_PROFILE"] == "0_5_4"


def test_metax_two_cards(write_yaml: WriteYaml) -> None:
    req = {
        "koordinator.sh/gpu.shared": "2",
        "koordinator.sh/gpu-core": "10",
        "koordinator.sh/gpu-memory": "2Gi",
    }
    docs = [
        *gpu_node("c500", "metax", "C500", cards=2),
        pod_manifest("m", "1", "1Gi", requests=req, limits=req),
    ]
    annotations = written(run(write_yaml, docs), "m")
    assert json.loads(annotations["metax-tech.com/gpu-devices-allocated"]) == [
        [{"uuid": "GPU-0", "compute": 5, "vRam": 1024}, {"uuid": "GPU-1", "compute": 5, "vRam": 1024}]
    ]
    assert annotations["scheduling.koordinator.sh/gpu-minors"] == "0,1"


def test_the_cli_takes_feature_gates(write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_yaml(yaml_docs(*huawei_docs()))
    code = main(
        ["simulate", str(path), "-o", "json", "--feature-gates", "DevicePluginAdaption=true,Foo=true"]
    )
    out, err = capsys.readouterr()
    assert code == 0
    (pod,) = json.loads(out)["pods"]
    assert pod["annotations"]["huawei.com/npu-core"] == "0"
    assert "feature gate Foo=true is not recognised by koordsched and is ignored" in err
    assert "DevicePluginAdaption" not in err
    assert main(["simulate", str(path), "--feature-gates", "DevicePluginAdaption=maybe"]) == 2
    assert "strconv.ParseBool" in capsys.readouterr().err


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vendor-accelerators.yaml"


def test_the_example_gives_what_its_header_says() -> None:
    """examples/vendor-accelerators.yaml, with the gate and without."""
    result = simulate([EXAMPLE], registry=in_tree_registry(feature_gates=GATE_ON))
    for name in ("mlu-a", "mlu-b"):
        annotations = written(result, name)
        assert annotations["CAMBRICON_DSMLU_PROFILE"] == "0_5_4"
        assert annotations["scheduling.koordinator.sh/gpu-minors"] == "0"
    tiny = result.pod("default/mlu-tiny")
    assert (tiny.status, tiny.message) == (
        UNSCHEDULABLE,
        f'{PREBIND}failed to adapt for GPU device plugin of vendor "cambricon": '
        "gpu memory must not be less than 268435456 bytes",
    )
    assert written(result, "metax-2")["metax-tech.com/gpu-devices-allocated"] == (
        '[[{"uuid":"C500-0","compute":10,"vRam":4096},{"uuid":"C500-1","compute":10,"vRam":4096}]]'
    )
    assert not result.warnings
    plain = simulate([EXAMPLE])
    for name in ("mlu-a", "mlu-b", "mlu-tiny", "metax-2"):
        assert written(plain, name) == {}
