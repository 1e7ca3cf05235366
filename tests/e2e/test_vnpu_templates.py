"""vNPU templates on a real API server (Koordinator v1.7, spec C.3): the ConfigMap is watched, so
creating or changing it while the scheduler runs changes what binds.

A 910B3 node with two NPUs, the profile's ``gpuSharedResourceTemplatesConfig`` naming a ConfigMap
in the test's namespace (not the default one: ConfigMaps are watched in every namespace). A vNPU
pod equal to vir10_3c_32g waits with ``no matched GPU shared resource template`` until the
ConfigMap is created, then binds with that template's name in ``device-allocated``. The ConfigMap
is then replaced by one holding only vir05_1c_16g: the next vir10_3c_32g pod waits, a
vir05_1c_16g pod binds.

This module runs its own control plane with the CRDs installed (Device), as ``test_devices.py`` does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import ascend_labels, config_map_manifest, npu_allocatable, npu_device_manifest
from tests.e2e.conftest import SCHEDULER_USER
from tests.e2e.fixtures import control_plane, own_lease
from tests.e2e.helpers import Api, Cluster, condition, node_of, pod, scheduler_in_process, write_profile
from tests.e2e.objects import node
from tests.e2e.test_crd_smoke import COLLECTIONS, install_crds

pytestmark = pytest.mark.e2e

ALLOCATED = "scheduling.koordinator.sh/device-allocated"
CONFIG_MAP = "vnpu-templates"
NO_TEMPLATE = "no matched GPU shared resource template"
TIMEOUT = 60.0

VIR10 = {"koordinator.sh/gpu.shared": "1", "koordinator.sh/gpu-memory": "32Gi"}
VIR10 |= {"huawei.com/npu-core": "10", "huawei.com/npu-cpu": "3"}
VIR05 = {"koordinator.sh/gpu.shared": "1", "koordinator.sh/gpu-memory": "16Gi"}
VIR05 |= {"huawei.com/npu-core": "5", "huawei.com/npu-cpu": "1"}

FIRST = """\
huawei-Ascend-910B3:
  vir10_3c_32g: {huawei.com/npu-core: "10", huawei.com/npu-cpu: "3", koordinator.sh/gpu-memory: 32Gi}
"""
SECOND = """\
huawei-Ascend-910B3:
  vir05_1c_16g: {huawei.com/npu-core: "5", huawei.com/npu-cpu: "1", koordinator.sh/gpu-memory: 16Gi}
"""

kube_env = control_plane({SCHEDULER_USER: ["system:masters"]})


@pytest.fixture
def scheduler_kubeconfig(kube_env: Any) -> Path:
    path: Path = kube_env.kubeconfig_for(SCHEDULER_USER)
    return path


def templates_profile(path: Path, lease: str, namespace: str) -> Path:
    profile = write_profile(path, lease_name=lease)
    cfg = yaml.safe_load(profile.read_text())
    config = {"configMapNamespace": namespace, "configMapName": CONFIG_MAP}
    cfg["profiles"][0].setdefault("pluginConfig", []).append(
        {"name": "DeviceShare", "args": {"gpuSharedResourceTemplatesConfig": config}}
    )
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def vnpu(namespace: str, name: str, requests: dict[str, str]) -> dict[str, Any]:
    asked = {"cpu": "1", "memory": "1Gi", **requests}
    return pod(namespace, name, scheduler="koord-scheduler", requests=asked, limits=asked)


def template_of(p: dict[str, Any]) -> list[Any]:
    raw = (p["metadata"].get("annotations") or {}).get(ALLOCATED)
    assert raw is not None, p["metadata"].get("annotations")
    return [(e.get("extension") or {}).get("gpuSharedResourceTemplate") for e in json.loads(raw)["gpu"]]


async def wait_no_template(cluster: Cluster, name: str) -> None:
    pending = await cluster.wait_condition(name, "False", "Unschedulable", timeout=TIMEOUT)
    assert node_of(pending) is None
    message = (condition(pending) or {}).get("message", "")
    assert message.startswith(f"0/1 nodes are available: {NO_TEMPLATE}."), message


async def test_a_config_map_created_and_replaced_while_running_changes_what_binds(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path
) -> None:
    await install_crds(api)
    lease = await own_lease(api, cluster)
    profile = templates_profile(tmp_path / "profile.yaml", lease, cluster.ns)

    name = cluster.node_name("b3")
    body = node(name, cpu="16", memory="64Gi", **npu_allocatable(2))
    body["metadata"]["labels"].update(ascend_labels("Ascend-910B3"))
    await api.create_node(body)
    cluster.nodes.append(name)
    device = npu_device_manifest(name)
    await api.post(COLLECTIONS["Device"], device)
    config_maps = f"/api/v1/namespaces/{cluster.ns}/configmaps"
    try:
        async with scheduler_in_process(profile, scheduler_kubeconfig) as sched:
            await api.create_pod(vnpu(cluster.ns, "first", VIR10))
            await wait_no_template(cluster, "first")

            # Created while the scheduler runs: the waiting pod binds, naming its template.
            await api.post(config_maps, config_map_manifest(CONFIG_MAP, cluster.ns, {"data.yaml": FIRST}))
            bound = (await cluster.wait_bound(["first"], timeout=TIMEOUT))["first"]
            assert node_of(bound) == name
            assert template_of(bound) == ["vir10_3c_32g"]

            # Replaced: the whole cache with it.
            await api.put(
                f"{config_maps}/{CONFIG_MAP}",
                config_map_manifest(CONFIG_MAP, cluster.ns, {"data.yaml": SECOND}),
            )
            await api.create_pod(vnpu(cluster.ns, "second", VIR05))
            bound = (await cluster.wait_bound(["second"], timeout=TIMEOUT))["second"]
            assert template_of(bound) == ["vir05_1c_16g"]
            await api.create_pod(vnpu(cluster.ns, "third", VIR10))
            await wait_no_template(cluster, "third")

            sched.assert_running()
            assert sched.problems() == [], sched.log_text()
    finally:
        await api.delete(f"{COLLECTIONS['Device']}/{name}")
        await api.delete(f"{config_maps}/{CONFIG_MAP}")
