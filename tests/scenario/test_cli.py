"""``koordsched simulate`` as a user runs it: output formats, --explain, errors and exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koordsched import __version__
from koordsched.backends.sim.loader import InputError, kind_specs, load_cluster
from koordsched.backends.sim.runner import simulate
from koordsched.cli import main
from koordsched.plugins.registry import in_tree_registry
from tests.scenario.helpers import WriteYaml, assert_failed_scheduling

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gpu-cluster.yaml"

CLUSTER = """
apiVersion: v1
kind: Node
metadata: {name: gpu-1, labels: {kubernetes.io/hostname: gpu-1}}
spec: {taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}
status: {allocatable: {cpu: "32", memory: 128Gi, pods: "110", nvidia.com/gpu: "8"}}
---
apiVersion: v1
kind: Node
metadata: {name: cpu-1, labels: {kubernetes.io/hostname: cpu-1}}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: ml}
spec:
  schedulerName: koord-scheduler
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  containers: [{name: c, resources: {requests: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "4"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: web}
spec:
  schedulerName: koord-scheduler
  containers: [{name: c, resources: {requests: {cpu: "2", memory: 4Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: too-big, namespace: web}
spec:
  schedulerName: koord-scheduler
  containers: [{name: c, resources: {requests: {cpu: "64"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: theirs, namespace: web}
spec:
  containers: [{name: c}]
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main(["simulate", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_output_shape(write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, write_yaml(CLUSTER), "--output", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) == {"pods", "summary", "nodes", "gangs", "warnings", "volumes"}
    assert doc["volumes"] == []  # no PersistentVolumeClaims in the input
    assert doc["gangs"] == [] and doc["summary"]["gangs"] == {"complete": 0, "incomplete": 0}
    assert [(p["namespace"], p["name"]) for p in doc["pods"]] == [
        ("ml", "trainer"),
        ("web", "web"),
        ("web", "too-big"),
    ]
    trainer, web, too_big = doc["pods"]
    assert set(trainer) == {"namespace", "name", "node", "status", "message", "annotations", "attempts"}
    assert (trainer["node"], trainer["status"], trainer["message"], trainer["annotations"]) == (
        "gpu-1",
        "Scheduled",
        "",
        {},
    )
    assert trainer["attempts"] == 1
    assert (web["node"], web["status"]) == ("cpu-1", "Scheduled")
    assert (too_big["node"], too_big["status"]) == (None, "Unschedulable")
    assert_failed_scheduling(
        too_big["message"],
        "0/2 nodes are available: 1 Insufficient cpu, "
        "1 node(s) had untolerated taint {nvidia.com/gpu: present}.",
    )
    summary = doc["summary"]
    assert {k: summary[k] for k in ("pods", "scheduled", "unschedulable", "waiting", "ignored", "nodes")} == {
        "pods": 3,
        "scheduled": 2,
        "unschedulable": 1,
        "waiting": 0,
        "ignored": 1,
        "nodes": 2,
    }
    assert summary["wallSeconds"] >= 0 and summary["podsPerSecond"] >= 0
    # gpu-1's 8 GPUs: all idle before the run; the trainer's 4 leave 4 stranded on a partly used node.
    counts = ("gpuNodes", "gpus", "idleGpus", "wholeFreeNodes", "partlyUsedNodes", "strandedGpus")
    counts += ("fullyUsedNodes", "partlyUsedGpus", "cpuStrandedNodes", "cpuStrandedGpus")
    frag = summary["fragmentation"]
    assert {k: v for k, v in frag["before"].items() if k != "expectedFragmentedGpus"} == dict(
        zip(counts, (1, 8, 8, 1, 0, 0, 0, 0, 0, 0), strict=True)
    )
    assert {k: v for k, v in frag["after"].items() if k != "expectedFragmentedGpus"} == dict(
        zip(counts, (1, 8, 4, 0, 1, 4, 0, 0, 0, 0), strict=True)
    )
    # The workload mix of the input's four pods (trainer: 4 GPUs; web, too-big and the other
    # scheduler's pod: none) over gpu-1: before, the GPU-less three quarters see all 8 free GPUs
    # as fragments, the trainer none (2 copies fit); after, 4 free GPUs, none for the trainer.
    assert frag["before"]["expectedFragmentedGpus"] == 8 * 3 / 4
    assert frag["after"]["expectedFragmentedGpus"] == 4 * 3 / 4
    nodes = {n["name"]: n for n in doc["nodes"]}
    assert nodes["gpu-1"]["pods"] == 1
    assert nodes["gpu-1"]["resources"]["cpu"] == {"requested": 8, "allocatable": 32}
    assert nodes["gpu-1"]["resources"]["memory"] == {"requested": 64 * 2**30, "allocatable": 128 * 2**30}
    assert nodes["gpu-1"]["resources"]["nvidia.com/gpu"] == {"requested": 4, "allocatable": 8}
    assert "nvidia.com/gpu" not in nodes["cpu-1"]["resources"]
    assert doc["warnings"] == []


def test_table_output(write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, write_yaml(CLUSTER))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAMESPACE/NAME", "STATUS", "NODE", "MESSAGE"]
    assert lines[1].split()[:3] == ["ml/trainer", "Scheduled", "gpu-1"]
    assert lines[3].split()[:3] == ["web/too-big", "Unschedulable", "-"]
    assert "0/2 nodes are available" in lines[3]
    header = next(line for line in lines if line.startswith("NODE"))
    assert header.split() == ["NODE", "PODS", "CPU", "MEMORY", "(Gi)", "GPU"]
    gpu_row = next(line for line in lines if line.startswith("gpu-1"))
    assert "8/32 (25%)" in gpu_row and "64/128 (50%)" in gpu_row and gpu_row.endswith("4/8")
    summary = lines.index(next(line for line in lines if line.startswith("3 pods:")))
    assert lines[summary].startswith(
        "3 pods: 2 scheduled, 1 unschedulable, 1 ignored (other schedulers); 2 nodes;"
    )
    assert lines[summary + 2].split() == ["GPU", "FRAGMENTATION", "BEFORE", "AFTER"]


def test_explain_shows_filters_and_scores(write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, write_yaml(CLUSTER), "--output", "json", "--explain")
    assert code == 0
    pods = {p["name"]: p for p in json.loads(out)["pods"]}
    best = pods["web"]["explain"][0]
    assert best["node"] == "cpu-1" and best["feasible"] is True
    assert best["filters"]["NodeResourcesFit"] == {"code": "Success"}
    assert best["filters"]["TaintToleration"] == {"code": "Success"}
    assert all(v["code"] in ("Success", "Skip") for v in best["filters"].values())
    assert best["scores"]
    for name, score in best["scores"].items():
        # GPUFragmentation also says what its score was made of (ScoreDetailsPlugin).
        details = {"fragmentationBefore", "fragmentationAfter"} if name == "GPUFragmentation" else set()
        assert set(score) == {"raw", "normalized", "weight", "weighted"} | details
        assert score["weighted"] == score["normalized"] * score["weight"]
    assert best["totalScore"] == sum(s["weighted"] for s in best["scores"].values())
    rejected = pods["too-big"]["explain"]
    assert {e["node"] for e in rejected} == {"gpu-1", "cpu-1"}
    assert all(e["feasible"] is False for e in rejected)
    reasons = [r for e in rejected for f in e["filters"].values() for r in f.get("reasons", [])]
    assert "Insufficient cpu" in reasons


def test_unknown_kinds_are_warned_and_skipped(
    write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = """
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: web}
spec: {replicas: 3}
"""
    path = write_yaml(CLUSTER + extra)
    code, out, err = run(capsys, path, "-o", "json")
    assert code == 0
    warnings = json.loads(out)["warnings"]
    assert warnings == [f"{path}: document 7 (Deployment web): unknown kind 'Deployment', skipped"]
    assert err == ""
    code, _, err = run(capsys, path)
    assert code == 0
    assert "warning: " in err and "unknown kind 'Deployment'" in err


def test_invalid_field_names_file_document_object_and_path(
    write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = CLUSTER.replace(
        'schedulerName: koord-scheduler\n  containers: [{name: c, resources: {requests: {cpu: "2"',
        "schedulerName: koord-scheduler\n  priority: high\n  containers: [{name: c, resources: "
        '{requests: {cpu: "2"',
    )
    assert bad != CLUSTER
    path = write_yaml(bad)
    code, out, err = run(capsys, path)
    assert code == 2
    assert out == ""
    assert err.strip() == (
        f"koordsched simulate: {path}: document 4 (Pod web/web): "
        "Expected `int | null`, got `str` - at `$.spec.priority`"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: a\n",
            "cluster.yaml: line 4, column 1: YAML syntax error",
        ),
        (
            "- just\n- a list\n",
            "cluster.yaml: document 1: expected a Kubernetes object (a mapping), got list",
        ),
        ("apiVersion: v1\nmetadata: {name: a}\n", "cluster.yaml: document 1: the object has no kind"),
        (
            "kind: Node\nmetadata: {labels: {a: b}}\n",
            "cluster.yaml: document 1 (Node <unnamed>): metadata.name is required",
        ),
        (
            "kind: Node\nmetadata: {name: a}\n---\nkind: Node\nmetadata: {name: a}\n",
            "cluster.yaml: document 2 (Node a): duplicate object, already defined at ",
        ),
        (
            "kind: Pod\nmetadata: {name: a}\n---\nkind: Pod\nmetadata: {name: a, namespace: default}\n",
            "cluster.yaml: document 2 (Pod default/a): duplicate object",
        ),
        (
            "kind: Node\nmetadata: {name: a, labels: {gpu: true}}\n",
            "cluster.yaml: document 1 (Node a): Expected `str`, got `bool` - at `$.metadata.labels[...]`",
        ),
    ],
)
def test_invalid_input_exits_2_with_a_located_message(
    write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    path = write_yaml(text)
    code, out, err = run(capsys, path)
    assert code == 2
    assert out == ""
    assert expected in err
    assert str(path) in err


def test_same_object_in_two_files_is_a_duplicate(write_yaml: WriteYaml) -> None:
    a = write_yaml("kind: Node\nmetadata: {name: n}\n", name="a.yaml")
    b = write_yaml(
        "kind: PriorityClass\nmetadata: {name: n}\nvalue: 1\n---\nkind: Node\nmetadata: {name: n}\n",
        name="b.yaml",
    )
    with pytest.raises(
        InputError,
        match=r"b\.yaml: document 2 \(Node n\): duplicate object, already defined at .*a\.yaml: document 1",
    ):
        load_cluster([a, b], kind_specs(in_tree_registry()))


def test_missing_file_and_bad_config_exit_2(
    write_yaml: WriteYaml, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, tmp_path / "nope.yaml")
    assert code == 2 and "nope.yaml: cannot read" in err
    profile = write_yaml("apiVersion: kubescheduler.config.k8s.io/v1\nkind: Nonsense\n", name="profile.yaml")
    code, out, err = run(capsys, write_yaml(CLUSTER), "--config", profile)
    assert code == 2 and out == ""
    assert "profile.yaml" in err and "kind" in err


def test_version_and_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"koordsched {__version__}"
    assert main([]) == 2
    assert main(["simulate"]) == 2
    capsys.readouterr()


def test_example_gpu_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, EXAMPLE, "-o", "json")
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    pods = {f"{p['namespace']}/{p['name']}": p for p in doc["pods"]}
    assert doc["warnings"] == []
    assert doc["summary"]["nodes"] == 11
    assert doc["summary"]["ignored"] == 1
    assert "web/legacy-cron" not in pods
    huge = pods["ml/llm-pretrain-70b"]
    assert huge["status"] == "Unschedulable"
    assert huge["message"].startswith("0/11 nodes are available: ")
    assert "Insufficient nvidia.com/gpu" in huge["message"]
    assert pods["ml/queued-job-7"]["message"] == "Scheduling is blocked due to non-empty scheduling gates"
    assert "untolerated taint {nvidia.com/gpu: present}" in pods["research/notebook-alice"]["message"]
    assert pods["serving/reranker-0"]["node"] == "gpu-l20-b1"
    assert pods["serving/reranker-1"]["status"] == "Unschedulable"
    assert {pods["ml/llm-finetune-0"]["node"], pods["ml/llm-finetune-1"]["node"]} == {
        "gpu-l40s-a1",
        "gpu-l40s-b1",
    }
    assert pods["web/api-0"]["node"] in {"cpu-a1", "cpu-a2"}
    assert pods["web/cache-warmer-0"]["node"] == "cpu-b2"
    assert pods["default/log-compactor"]["status"] == "Scheduled"
    unschedulable = sorted(k for k, p in pods.items() if p["status"] != "Scheduled")
    assert unschedulable == [
        "ml/llm-pretrain-70b",
        "ml/queued-job-7",
        "research/notebook-alice",
        "serving/reranker-1",
    ]
    # The table renders the same run for a person.
    code, out, _ = run(capsys, EXAMPLE)
    assert code == 0
    assert "ml/llm-pretrain-70b" in out and "cpu-b3 (cordoned)" in out


def test_simulate_is_deterministic_for_a_seed() -> None:
    first = simulate([EXAMPLE], seed=7)
    second = simulate([EXAMPLE], seed=7)
    assert [(p.key, p.node) for p in first.pods] == [(p.key, p.node) for p in second.pods]
