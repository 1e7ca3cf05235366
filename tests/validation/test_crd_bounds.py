"""Device and NodeResourceTopology objects with ids or amounts no machine has are refused,
naming the object and the field, before anything is built from them; only their node is
affected."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import msgspec
import pytest

from koordsched.api.core import Node
from koordsched.api.crd_checks import check_device, check_node_resource_topology
from koordsched.api.field_errors import Refused
from koordsched.api.kinds import NODE_METRICS, NODE_RESOURCE_TOPOLOGIES
from koordsched.api.koordinator import ANNOTATION_GPU_PARTITIONS, Device, NodeResourceTopology
from koordsched.api.slo import NodeMetric
from koordsched.backends.sim.runner import simulate
from koordsched.config.load import default_config
from koordsched.plugins.deviceshare.model import parse_partition_table
from koordsched.plugins.registry import in_tree_registry
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.scheduler import Scheduler
from tests.scenario.helpers import WriteYaml
from tests.validation.manifests import Obj, cpu_node, device, dump, gpu_node, gpu_pod, node_metric, nrt, pod

LSR = {"koordinator.sh/qosClass": "LSR"}


def _device(**change: Any) -> Obj:
    d = device("gpu-1")
    first = d["spec"]["devices"][0]
    for path, value in change.items():
        target = first
        *parents, leaf = path.split("__")
        for p in parents:
            target = target[p]
        target[leaf] = value
    return d


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"minor": 2**62},
            "spec.devices[0].minor: Invalid value: 4611686018427387904: must be between 0 and 1048575",
        ),
        ({"minor": -1}, "spec.devices[0].minor: Invalid value: -1: must be between 0 and 1048575"),
        (
            {"topology__nodeID": 2**40},
            "spec.devices[0].topology.nodeID: Invalid value: 1099511627776: must be between -1 and 1023",
        ),
    ],
)
def test_device_out_of_range_is_refused_as_a_whole(change: dict[str, Any], expected: str) -> None:
    d = msgspec.convert(_device(**change), Device)
    t0 = time.perf_counter()
    with pytest.raises(Refused) as err:
        check_device(d)
    assert time.perf_counter() - t0 < 0.1
    assert str(err.value).startswith('Device "gpu-1" is invalid: ')
    assert expected in str(err.value)


def test_refused_device_is_a_warning_and_other_nodes_schedule(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        dump(gpu_node(), device(), gpu_node("gpu-1"), _device(minor=2**62), gpu_pod("a"), gpu_pod("b"))
    )
    t0 = time.perf_counter()
    result = simulate([path])
    assert time.perf_counter() - t0 < 30
    (warning,) = [w for w in result.warnings if "(Device gpu-1)" in w]
    assert "spec.devices[0].minor: Invalid value: 4611686018427387904" in warning
    assert warning.endswith("DeviceShare offers none of its node's devices")
    assert result.pod("default/a").node == "gpu-0"


def test_partition_table_with_a_huge_minor_is_ignored() -> None:
    d = msgspec.convert(device("gpu-1"), Device)
    d.metadata.annotations = {ANNOTATION_GPU_PARTITIONS: json.dumps({"2": [{"minors": [0, 2**62]}]})}
    t0 = time.perf_counter()
    assert parse_partition_table(d) is None
    assert time.perf_counter() - t0 < 0.1


def _nrt(kind: str) -> Obj:
    n = nrt("cpu-1")
    ann = n["metadata"]["annotations"]
    topo = json.loads(ann["node.koordinator.sh/cpu-topology"])
    if kind == "zone-cpu":
        n["zones"][0]["resources"][0]["allocatable"] = "1e18"
    elif kind == "zone-negative":
        n["zones"][0]["resources"][1]["available"] = "-8Gi"
    elif kind == "cpu-id":
        topo["detail"][0]["id"] = 999_999_999
    elif kind == "numa-id":
        topo["detail"][0]["node"] = 2**40
    ann["node.koordinator.sh/cpu-topology"] = json.dumps(topo)
    return n


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (
            "zone-cpu",
            'zones[0].resources[0].allocatable: Invalid value: "1e18": 1000000000000000000000 millicores',
        ),
        (
            "zone-negative",
            'zones[0].resources[1].available: Invalid value: "-8Gi": must be greater than or equal to 0',
        ),
        ("cpu-id", "detail[0].id: Invalid value: 999999999: must be between 0 and 8191 (a CPU id)"),
        ("numa-id", "detail[0].node: Invalid value: 1099511627776: must be between 0 and 1023 (a NUMA node)"),
    ],
)
def test_nrt_out_of_range_is_refused(kind: str, expected: str) -> None:
    with pytest.raises(Refused) as err:
        check_node_resource_topology(msgspec.convert(_nrt(kind), NodeResourceTopology))
    assert str(err.value).startswith('NodeResourceTopology "cpu-1" is invalid: ')
    assert expected in str(err.value)


def test_refused_nrt_is_set_aside_and_only_its_node_loses_cpu_binding(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        dump(
            cpu_node("cpu-0"),
            nrt("cpu-0"),
            cpu_node("cpu-1"),
            _nrt("cpu-id"),
            *[pod(f"p{i}", {"cpu": "2", "memory": "1Gi"}, labels=LSR) for i in range(4)],
        )
    )
    result = simulate([path])
    # cpu-0 has 8 CPUs for four 2-CPU pods; cpu-1 has no usable CPU topology.
    assert {result.pod(f"default/p{i}").node for i in range(4)} == {"cpu-0"}
    (warning,) = [w for w in result.warnings if "(NodeResourceTopology cpu-1)" in w]
    assert "detail[0].id: Invalid value: 999999999" in warning
    assert warning.endswith("NodeNUMAResource treats its node as having no NodeResourceTopology")


def test_run_sets_refused_objects_aside_once(caplog: pytest.LogCaptureFixture) -> None:
    reg = in_tree_registry()
    sched = Scheduler(default_config(reg, "koord-scheduler"), reg, _Port(), VirtualClock())
    sched.on_node_add(msgspec.convert(cpu_node("cpu-1"), Node))
    good = msgspec.convert(nrt("cpu-1"), NodeResourceTopology)
    bad = msgspec.convert(_nrt("numa-id"), NodeResourceTopology)
    with caplog.at_level(logging.ERROR):
        sched.on_object(NODE_RESOURCE_TOPOLOGIES.kind, "cpu-1", good)
        assert sched.objects["NodeResourceTopology"]["cpu-1"] is good
        for _ in range(3):  # koordlet re-reports: one log line, not one per update
            sched.on_object(NODE_RESOURCE_TOPOLOGIES.kind, "cpu-1", bad)
        assert "cpu-1" not in sched.objects["NodeResourceTopology"]  # the good one is gone too
    logged = [r.getMessage() for r in caplog.records if "NodeResourceTopology cpu-1" in r.getMessage()]
    assert len(logged) == 1 and "detail[0].node" in logged[0]
    sched.on_object(NODE_RESOURCE_TOPOLOGIES.kind, "cpu-1", good)
    assert sched.objects["NodeResourceTopology"]["cpu-1"] is good
    metric = msgspec.convert(node_metric("cpu-1", cpu="-30"), NodeMetric)
    sched.on_object(NODE_METRICS.kind, "cpu-1", metric)
    assert "cpu-1" not in sched.objects.get("NodeMetric", {})


class _Port:
    async def bind(self, *args: object) -> None:
        raise AssertionError

    def scheduled(self, *args: object) -> None: ...

    def unschedulable(self, *args: object) -> None: ...

    def invalid_pod(self, *args: object) -> None: ...
