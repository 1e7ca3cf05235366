"""Ascend NPUs through ``simulate`` (Koordinator v1.7/v1.8, spec C.2, C.3, C.6): the example as its
header says, vNPU templates read from the ConfigMap among the manifests, unsupported models from
the profile's DeviceShareArgs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from koordsched.backends.sim.runner import SCHEDULED, UNSCHEDULABLE, simulate
from tests.builders import (
    ASCEND_TEMPLATES,
    ascend_labels,
    config_map_manifest,
    node_manifest,
    npu_allocatable,
    npu_device_manifest,
    pod_manifest,
    yaml_docs,
)
from tests.scenario.helpers import WriteYaml, assert_failed_scheduling

ROOT = Path(__file__).resolve().parents[2]
ALLOCATED = "scheduling.koordinator.sh/device-allocated"
DUO = "Ascend-310P3-300I-DUO"


def _gpu(result: Any, name: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads(result.pod(f"default/{name}").annotations[ALLOCATED])["gpu"]
    return entries


def test_the_example_places_every_pod_as_its_header_says() -> None:
    """examples/ascend-npu.yaml: whole NPUs for the training and inference pods, a template-named
    slice for each vNPU that equals a template, and the one that equals none pending."""
    result = simulate([ROOT / "examples" / "ascend-npu.yaml"])
    for name in ("train-2npu", "infer-1npu", "vnpu-32g", "vnpu-16g"):
        assert result.pod(f"default/{name}").status == SCHEDULED, name
    assert len(_gpu(result, "train-2npu")) == 2
    assert [e.get("extension") for e in _gpu(result, "infer-1npu")] == [None]
    assert [e["extension"] for e in _gpu(result, "vnpu-32g")] == [
        {"gpuSharedResourceTemplate": "vir10_3c_32g"}
    ]
    assert [e["extension"] for e in _gpu(result, "vnpu-16g")] == [
        {"gpuSharedResourceTemplate": "vir05_1c_16g"}
    ]
    odd = result.pod("default/vnpu-odd")
    assert odd.status == UNSCHEDULABLE
    assert_failed_scheduling(odd.message, "0/1 nodes are available: no matched GPU shared resource template.")
    assert not result.warnings


def _npu_node(name: str, model: str, cards: int = 2) -> list[dict[str, Any]]:
    extended = npu_allocatable(cards)
    node = node_manifest(name, "64", "256Gi", 110, labels=ascend_labels(model), capacity=False, **extended)
    return [node, npu_device_manifest(name, cards)]


def _npu_pod(name: str, requests: dict[str, str]) -> dict[str, Any]:
    return pod_manifest(name, "1", "1Gi", uid=f"uid-{name}", requests=requests, limits=requests)


_VNPU = {
    "koordinator.sh/gpu.shared": "1",
    "koordinator.sh/gpu-memory": "12Gi",
    "huawei.com/npu-core": "4",
    "huawei.com/npu-cpu": "4",
    "huawei.com/npu-dvpp": "50",
}
#: vir04 of 310P, also under the Duo's model key.
_DUO_TEMPLATES = ASCEND_TEMPLATES + (
    f"huawei-{DUO}:\n  vir04:\n    huawei.com/npu-core: '4'\n    huawei.com/npu-cpu: '4'\n"
    "    huawei.com/npu-dvpp: '50'\n    koordinator.sh/gpu-memory: 12Gi\n"
)


def unsupported_profile() -> str:
    """The default profile with DeviceShareArgs listing the Duo in ``gpuShareUnsupportedModels``."""
    config = yaml.safe_load((ROOT / "config" / "koord-scheduler.yaml").read_text())
    (profile,) = config["profiles"]
    assert all(c["name"] != "DeviceShare" for c in profile["pluginConfig"])
    models = [{"vendor": "huawei", "model": DUO}]
    profile["pluginConfig"].append({"name": "DeviceShare", "args": {"gpuShareUnsupportedModels": models}})
    return yaml.safe_dump(config)


def test_templates_pick_the_model_and_unsupported_models_refuse_sharing(write_yaml: WriteYaml) -> None:
    """C.3: the vNPU equals vir04 of 310P and of the Duo only, so the 910B3 node is refused; C.6: the
    Duo is listed in gpuShareUnsupportedModels, so only the 310P node is left. A whole NPU is not
    shared: it may go to the Duo."""
    docs = [
        *_npu_node("b3", "Ascend-910B3"),
        *_npu_node("duo", DUO),
        *_npu_node("p310", "Ascend-310P"),
        config_map_manifest(data={"data.yaml": _DUO_TEMPLATES}),
        _npu_pod("vnpu-a", _VNPU),
        _npu_pod("vnpu-b", _VNPU),
    ]
    config = write_yaml(unsupported_profile(), name="profile.yaml")
    result = simulate([write_yaml(yaml_docs(*docs))], config_path=config)
    for name in ("vnpu-a", "vnpu-b"):
        pod = result.pod(f"default/{name}")
        assert (pod.status, pod.node) == (SCHEDULED, "p310"), name
        assert _gpu(result, name)[0]["extension"] == {"gpuSharedResourceTemplate": "vir04"}

    # With 4 of the 7 AI CPUs of both 310P cards taken, each node says why it refuses a third.
    docs.append(_npu_pod("vnpu-c", _VNPU))
    result = simulate([write_yaml(yaml_docs(*docs))], config_path=config)
    c = result.pod("default/vnpu-c")
    assert c.status == UNSCHEDULABLE
    assert_failed_scheduling(
        c.message,
        "0/3 nodes are available: 1 Insufficient GPU Devices, "
        f'1 model "{DUO}" of vendor "huawei" does not support GPU Share, '
        "1 no matched GPU shared resource template.",
    )


def test_without_the_config_map_no_vnpu_schedules(write_yaml: WriteYaml) -> None:
    """C.3: no ConfigMap, no templates: a shared NPU request fails PreFilter; a whole NPU still binds."""
    docs = [
        *_npu_node("b3", "Ascend-910B3"),
        _npu_pod("vnpu", {**_VNPU, "huawei.com/npu-core": "10", "huawei.com/npu-cpu": "3"}),
        _npu_pod("full", {"huawei.com/npu-core": "20", "koordinator.sh/gpu-memory-ratio": "100"}),
    ]
    result = simulate([write_yaml(yaml_docs(*docs))])
    assert result.pod("default/full").status == SCHEDULED
    vnpu = result.pod("default/vnpu")
    assert vnpu.status == UNSCHEDULABLE
    assert_failed_scheduling(
        vnpu.message, "0/1 nodes are available: no matched GPU shared resource template."
    )
