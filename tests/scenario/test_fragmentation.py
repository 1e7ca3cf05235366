"""The GPU fragmentation report of ``simulate``: counts before and after the run, worked out by hand.

Every pending pod is pinned to a node (``kubernetes.io/hostname``), so the counts depend only on
what the pods hold, not on how the profile scores nodes.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from koordsched.backends.sim.fragmentation import Fragmentation
from koordsched.backends.sim.report import render_table, to_json
from koordsched.backends.sim.runner import SCHEDULED, SimResult, simulate
from koordsched.cli import main
from tests.builders import HOSTNAME, node_manifest, pod_manifest, yaml_docs
from tests.scenario.helpers import WriteYaml

ALLOCATED = "scheduling.koordinator.sh/device-allocated"
WHOLE_GPU = {"koordinator.sh/gpu-core": 100, "koordinator.sh/gpu-memory-ratio": 100}


def _docs(*docs: dict[str, Any] | str) -> str:
    return yaml_docs(*(d if isinstance(d, dict) else d.strip("\n") for d in docs))


def _node(name: str, allocatable: dict[str, str], cpu: str = "32", memory: str = "128Gi") -> dict[str, Any]:
    return node_manifest(name, cpu, memory, capacity=False, **allocatable)


def _pod(
    name: str,
    node: str,
    requests: dict[str, object],
    *,
    bound: bool = False,
    allocated: dict[str, object] | str | None = None,
) -> dict[str, Any]:
    """A pending pod pinned to ``node``, or (``bound``) one already running there; ``allocated`` is
    its device-allocated annotation (a string is written as it is)."""
    placement: dict[str, Any] = {"node_name": node} if bound else {"nodeSelector": {HOSTNAME: node}}
    annotations = None if allocated is None else {ALLOCATED: allocated}
    reqs = {k: str(v) for k, v in {"cpu": "1", "memory": "1Gi", **requests}.items()}
    return pod_manifest(name, None, None, uid="", annotations=annotations, requests=reqs, **placement)


def _device(name: str, gpus: list[tuple[int, bool]]) -> str:
    """A Device CR with one 80Gi GPU per (minor, healthy)."""
    devices = [
        {
            "type": "gpu",
            "id": f"GPU-{name}-{minor}",
            "minor": minor,
            "health": healthy,
            "resources": {
                "koordinator.sh/gpu-core": "100",
                "koordinator.sh/gpu-memory-ratio": "100",
                "koordinator.sh/gpu-memory": "80Gi",
            },
        }
        for minor, healthy in gpus
    ]
    return f"""
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Device
metadata: {{name: {name}}}
spec: {{devices: {json.dumps(devices)}}}
"""


def _koord_allocatable(gpus: int) -> dict[str, str]:
    """What koord-manager syncs to a node from ``gpus`` healthy 80Gi GPUs."""
    percent = str(100 * gpus)
    return {
        "koordinator.sh/gpu": percent,
        "koordinator.sh/gpu-core": percent,
        "koordinator.sh/gpu-memory-ratio": percent,
        "koordinator.sh/gpu-memory": f"{80 * gpus}Gi",
    }


def counts(f: Fragmentation) -> Fragmentation:
    """The counts alone: the expected fragmentation over the workload mix is tested in
    tests/scenario/test_gpu_fragmentation.py and test_cli.py."""
    return msgspec.structs.replace(f, expected_fragmented_gpus=0.0)


def _run(write_yaml: WriteYaml, *docs: str) -> SimResult:
    result = simulate([write_yaml(_docs(*docs))])
    assert result.warnings == []
    assert all(p.status == SCHEDULED for p in result.pods), [(p.key, p.message) for p in result.pods]
    return result


def test_whole_cards_without_device_crs(write_yaml: WriteYaml) -> None:
    result = _run(
        write_yaml,
        _node("n8a", {"nvidia.com/gpu": "8"}),
        _node("n8b", {"nvidia.com/gpu": "8"}),
        _node("k4", {"koordinator.sh/gpu": "400"}),  # percent of a card: 4 GPUs
        _node("amd2", {"amd.com/gpu": "2"}),
        _node("cpu-1", {}),
        _pod("pre", "n8a", {"nvidia.com/gpu": 2}, bound=True),
        _pod("amd-pre", "amd2", {"amd.com/gpu": 2}, bound=True),
        _pod("a", "n8a", {"nvidia.com/gpu": 6}),
        _pod("b", "n8b", {"nvidia.com/gpu": 3}),
    )
    # Before: n8a has 6 of 8 idle (partly used), n8b and k4 whole free, amd2 full.
    assert counts(result.summary.fragmentation.before) == Fragmentation(
        gpu_nodes=4,
        gpus=22,
        idle_gpus=6 + 8 + 4,
        whole_free_nodes=2,
        partly_used_nodes=1,
        stranded_gpus=6,
        fully_used_nodes=1,
    )
    # After: n8a full (2 + 6), n8b partly used with 5 idle, k4 still whole free.
    assert counts(result.summary.fragmentation.after) == Fragmentation(
        gpu_nodes=4,
        gpus=22,
        idle_gpus=5 + 4,
        whole_free_nodes=1,
        partly_used_nodes=1,
        stranded_gpus=5,
        fully_used_nodes=2,
    )


def test_device_crs_with_whole_and_shared_gpus(write_yaml: WriteYaml) -> None:
    result = _run(
        write_yaml,
        _node("d1", {"nvidia.com/gpu": "4", **_koord_allocatable(4)}),
        _device("d1", [(0, True), (1, True), (2, True), (3, True)]),
        # The Device CR is the truth: one of d2's GPUs is unhealthy, whatever nvidia.com/gpu says.
        _node("d2", {"nvidia.com/gpu": "2", **_koord_allocatable(1)}),
        _device("d2", [(0, True), (1, False)]),
        _node("d3", _koord_allocatable(2)),
        _device("d3", [(0, True), (1, True)]),
        _pod(
            "d3-pre",
            "d3",
            {"koordinator.sh/gpu": 100},
            bound=True,
            allocated={"gpu": [{"minor": 0, "resources": WHOLE_GPU}]},
        ),
        _pod("whole2", "d1", {"koordinator.sh/gpu": 200}),
        _pod("half", "d1", {"koordinator.sh/gpu-core": 50, "koordinator.sh/gpu-memory-ratio": 50}),
        _pod("quarter", "d2", {"koordinator.sh/gpu-core": 25, "koordinator.sh/gpu-memory-ratio": 25}),
        _pod("three-quarters", "d2", {"koordinator.sh/gpu-core": 75, "koordinator.sh/gpu-memory-ratio": 75}),
        _pod("d3-half", "d3", {"koordinator.sh/gpu-core": 50, "koordinator.sh/gpu-memory-ratio": 50}),
    )
    # Before: d1 (4 idle) and d2 (1 idle) whole free; d3 has GPU 0 full and GPU 1 idle.
    assert counts(result.summary.fragmentation.before) == Fragmentation(
        gpu_nodes=3,
        gpus=4 + 1 + 2,
        idle_gpus=4 + 1 + 1,
        whole_free_nodes=2,
        partly_used_nodes=1,
        stranded_gpus=1,
    )
    # After: d1 has 2 full, 1 half used, 1 idle; d2's one GPU is full (25 + 75);
    # d3 has GPU 0 full and GPU 1 half used.
    assert counts(result.summary.fragmentation.after) == Fragmentation(
        gpu_nodes=3,
        gpus=7,
        idle_gpus=1,
        partly_used_nodes=2,
        stranded_gpus=1,
        fully_used_nodes=1,
        partly_used_gpus=2,
    )


def test_cpu_or_memory_exhausted_strands_idle_gpus(write_yaml: WriteYaml) -> None:
    result = _run(
        write_yaml,
        _node("g", {"nvidia.com/gpu": "4"}, cpu="8", memory="32Gi"),
        _node("g2", {"nvidia.com/gpu": "2"}, cpu="8", memory="16Gi"),
        _node("g3", {"nvidia.com/gpu": "2"}, cpu="4", memory="8Gi"),
        _pod("gpu-1", "g", {"nvidia.com/gpu": 1, "cpu": 1, "memory": "4Gi"}),
        _pod("cpu-hog", "g", {"cpu": 7}),  # g: 0 cpu left
        _pod("memory-hog", "g2", {"memory": "15872Mi"}),  # g2: 0.5Gi left
        _pod("just-fits", "g3", {"cpu": 3, "memory": "7Gi"}),  # g3: exactly 1 cpu and 1Gi left
    )
    assert counts(result.summary.fragmentation.before) == Fragmentation(
        gpu_nodes=3, gpus=8, idle_gpus=8, whole_free_nodes=3
    )
    assert counts(result.summary.fragmentation.after) == Fragmentation(
        gpu_nodes=3,
        gpus=8,
        idle_gpus=3 + 2 + 2,
        whole_free_nodes=2,
        partly_used_nodes=1,
        stranded_gpus=3,
        cpu_stranded_nodes=2,
        cpu_stranded_gpus=3 + 2,
    )


def _npu_device(name: str, cards: int) -> str:
    """A Device CR of Ascend NPUs as the spec's example entry has them (gpu devices, v1.7)."""
    devices = [
        {
            "type": "gpu",
            "id": f"NPU-{name}-{minor}",
            "minor": minor,
            "health": True,
            "resources": {
                "huawei.com/npu-core": "20",
                "huawei.com/npu-cpu": "7",
                "huawei.com/npu-dvpp": "100",
                "koordinator.sh/gpu-memory": "64Gi",
                "koordinator.sh/gpu-memory-ratio": "100",
            },
        }
        for minor in range(cards)
    ]
    return f"""
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Device
metadata: {{name: {name}}}
spec: {{devices: {json.dumps(devices)}}}
"""


def _npu_allocatable(cards: int) -> dict[str, str]:
    return {
        "huawei.com/npu-core": str(20 * cards),
        "huawei.com/npu-cpu": str(7 * cards),
        "huawei.com/npu-dvpp": str(100 * cards),
        "koordinator.sh/gpu-memory-ratio": str(100 * cards),
        "koordinator.sh/gpu-memory": f"{64 * cards}Gi",
    }


FULL_NPU = {"huawei.com/npu-core": 20, "koordinator.sh/gpu-memory-ratio": 100}


def test_ascend_npus_count_as_gpus(write_yaml: WriteYaml) -> None:
    """NPUs are gpu devices (Koordinator v1.7): idle, partly used (a vNPU holds 5 of 20 AI
    cores) and full cards count as GPUs do, and the expected fragmentation sees them."""
    vnpu = {"huawei.com/npu-core": "5", "huawei.com/npu-cpu": "1", "koordinator.sh/gpu-memory": "16Gi"}
    result = _run(
        write_yaml,
        _node("ascend", _npu_allocatable(4)),
        _npu_device("ascend", 4),
        _pod(
            "vnpu",
            "ascend",
            {"koordinator.sh/gpu.shared": 1, **vnpu},
            bound=True,
            allocated={"gpu": [{"minor": 1, "resources": {**vnpu, "koordinator.sh/gpu-memory-ratio": "25"}}]},
        ),
        _pod("full", "ascend", FULL_NPU),
        _node("ascend2", _npu_allocatable(2)),
        _npu_device("ascend2", 2),
        _pod("full-a", "ascend2", FULL_NPU),
        _pod("full-b", "ascend2", FULL_NPU),
    )
    before, after = result.summary.fragmentation.before, result.summary.fragmentation.after
    # Before: ascend has 3 idle NPUs beside the vNPU's card (partly used); ascend2 is whole free.
    assert counts(before) == Fragmentation(
        gpu_nodes=2,
        gpus=6,
        idle_gpus=3 + 2,
        whole_free_nodes=1,
        partly_used_nodes=1,
        stranded_gpus=3,
        partly_used_gpus=1,
    )
    # After: one more full card on ascend (2 idle left, stranded), ascend2 fully used.
    assert counts(after) == Fragmentation(
        gpu_nodes=2,
        gpus=6,
        idle_gpus=2,
        partly_used_nodes=1,
        stranded_gpus=2,
        fully_used_nodes=1,
        partly_used_gpus=1,
    )
    # The expected fragment, by hand. The mix: a full NPU pinned to ascend (weight 1/4), one
    # pinned to ascend2 (2/4), the vNPU (1/4, anywhere). A card's free share is its free AI cores
    # in percent. Before: full@ascend leaves the vNPU card's 75 % on ascend and all 200 % of
    # ascend2 (not allowed there); full@ascend2 leaves all 375 % of ascend; the vNPU fits 25 %
    # copies everywhere (nothing left): (275 / 4 + 375 * 2 / 4) / 100 cards.
    assert before.expected_fragmented_gpus == pytest.approx((275 / 4 + 375 / 2) / 100, abs=1e-3)
    # After: ascend has 275 % free (75 % of it fragment for full@ascend), ascend2 nothing.
    assert after.expected_fragmented_gpus == pytest.approx((75 / 4 + 275 / 2) / 100, abs=1e-3)


def test_unreadable_device_data_counts_nothing_held(
    write_yaml: WriteYaml, caplog: pytest.LogCaptureFixture
) -> None:
    bad_quantity = _device("d", [(0, True), (1, True)]).replace('"100"', '"lots"', 1)
    result = _run(
        write_yaml,
        _node("d", _koord_allocatable(2)),
        bad_quantity,  # GPU 0's gpu-core does not parse: unhealthy, not counted
        _pod("bad", "d", {"koordinator.sh/gpu": 100}, bound=True, allocated="not json"),
    )
    assert counts(result.summary.fragmentation.after) == Fragmentation(
        gpu_nodes=1, gpus=1, idle_gpus=1, whole_free_nodes=1
    )
    assert any("invalid " + ALLOCATED in r.getMessage() for r in caplog.records)


def test_no_gpu_nodes(write_yaml: WriteYaml) -> None:
    path = write_yaml(_docs(_node("cpu-1", {}), _pod("web", "cpu-1", {"cpu": 2})))
    result = simulate([path])
    assert result.summary.fragmentation.before == result.summary.fragmentation.after == Fragmentation()
    assert "GPU FRAGMENTATION" not in render_table(result)
    zeros = {
        "gpuNodes": 0,
        "gpus": 0,
        "idleGpus": 0,
        "wholeFreeNodes": 0,
        "partlyUsedNodes": 0,
        "strandedGpus": 0,
        "fullyUsedNodes": 0,
        "partlyUsedGpus": 0,
        "cpuStrandedNodes": 0,
        "cpuStrandedGpus": 0,
        "expectedFragmentedGpus": 0.0,
    }
    assert to_json(result)["summary"]["fragmentation"] == {"before": zeros, "after": zeros}


def test_table_block_and_json_through_the_cli(
    write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_yaml(
        _docs(
            _node("n8", {"nvidia.com/gpu": "8"}),
            _node("n4", {"nvidia.com/gpu": "4"}),
            _pod("pre", "n4", {"nvidia.com/gpu": 4}, bound=True),
            _pod("a", "n8", {"nvidia.com/gpu": 3}),
        )
    )
    assert main(["simulate", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    block = lines[lines.index(next(x for x in lines if x.startswith("GPU FRAGMENTATION"))) :]
    assert block[0].split() == ["GPU", "FRAGMENTATION", "BEFORE", "AFTER"]
    rows = {line.rsplit(None, 2)[0]: line.split()[-2:] for line in block[1:]}
    assert rows == {
        "GPU nodes": ["2", "2"],
        "GPUs": ["12", "12"],
        "idle GPUs": ["8", "5"],
        "whole free GPU nodes (every GPU idle)": ["1", "0"],
        "partly used GPU nodes": ["0", "1"],
        "stranded GPUs (idle on partly used nodes)": ["0", "5"],
        "fully used GPU nodes": ["1", "1"],
        "partly used shared GPUs": ["0", "0"],
        "CPU-stranded GPU nodes (< 1 cpu or < 1Gi free)": ["0", "0"],
        "CPU-stranded GPUs (idle on those nodes)": ["0", "0"],
        # The mix is half 4-GPU, half 3-GPU pods. Before, n8's 8 free cards hold two copies of
        # each (3-GPU: 2 cards over, half of that counts); after, its 5 hold one of each (1 and 2
        # over): (0 + 2) / 2 = 1.0 and (1 + 2) / 2 = 1.5 GPUs; n4 is full throughout.
        "expected fragmented GPUs (workload mix)": ["1.0", "1.5"],
    }
    assert main(["simulate", str(path), "-o", "json"]) == 0
    fragmentation = json.loads(capsys.readouterr().out)["summary"]["fragmentation"]
    assert (fragmentation["before"]["strandedGpus"], fragmentation["after"]["strandedGpus"]) == (0, 5)
    assert (fragmentation["before"]["wholeFreeNodes"], fragmentation["after"]["wholeFreeNodes"]) == (1, 0)
