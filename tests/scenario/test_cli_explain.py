"""``simulate --explain`` / ``--explain-pod`` in the table output, and ``--wide``: the table's
explanation blocks say what the JSON output says, verdict for verdict and score for score."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from koordsched.backends.sim.report import render_table
from koordsched.backends.sim.runner import simulate
from tests.scenario.helpers import WriteYaml
from tests.scenario.test_cli import CLUSTER, run

#: CLUSTER plus a third node and a pod whose claim does not exist (VolumeRestrictions' PreFilter, the
#: first to look at claims, refuses it before any node is looked at).
EXTRA = """
---
apiVersion: v1
kind: Node
metadata: {name: cpu-2, labels: {kubernetes.io/hostname: cpu-2}}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: no-claim, namespace: web}
spec:
  schedulerName: koord-scheduler
  containers: [{name: c}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: missing}}]
"""


def blocks(out: str) -> dict[str, list[str]]:
    """The table output's explanation blocks by pod key, heading included."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in out.splitlines():
        m = re.match(r"EXPLAIN (\S+): ", line)
        if m:
            current = found.setdefault(m.group(1), [line])
        elif current is not None:
            if not line:
                current = None
            else:
                current.append(line)
    return found


def cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def table_verdicts(block: list[str]) -> list[list[str]]:
    start = block.index("  Filter verdicts:")
    assert cells(block[start + 1]) == ["STAGE", "PLUGIN", "CODE", "REASONS", "NODES"]
    rows = []
    for line in block[start + 2 :]:
        if not line.startswith("    "):
            break
        rows.append(cells(line))
    return rows


def json_verdicts(pod: dict[str, Any]) -> list[list[str]]:
    """What the table must show for the pod's explainVerdicts, built here from the JSON alone."""
    rows = []
    for g in pod["explainVerdicts"]:
        count = g["count"]
        noun = "node" if count == 1 else "nodes"
        where = f"all {count} {noun}" if g["allNodes"] else f"{count} {noun}: {', '.join(g['nodes'])}"
        rows.append([g["stage"], g["plugin"], g["code"], "; ".join(g.get("reasons", [])), where])
    return rows


def table_scores(block: list[str]) -> dict[str, dict[str, str]]:
    """node -> plugin (and TOTAL) -> weighted score, from the best nodes' table."""
    start = block.index("  Best nodes (every Filter passed), weighted scores:")
    header = cells(block[start + 1])
    assert header[:2] == ["PLUGIN", "WEIGHT"]
    out: dict[str, dict[str, str]] = {node: {} for node in header[2:]}
    for line in block[start + 2 :]:
        if not line.startswith("    ") or line.startswith("    Filters skipped"):
            break
        row = cells(line)
        values = row[1:] if row[0] == "TOTAL" else row[2:]
        for node, value in zip(header[2:], values, strict=True):
            out[node][row[0]] = value
    return out


def json_scores(pod: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {
        n["node"]: {**{p: str(s["weighted"]) for p, s in n["scores"].items()}, "TOTAL": str(n["totalScore"])}
        for n in pod["explain"]
        if n["feasible"]
    }


def test_explain_table_shows_the_json_verdicts_for_each_unscheduled_pod(
    write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_yaml(CLUSTER + EXTRA)
    code, out, err = run(capsys, path, "--explain")
    assert code == 0, err
    code, doc_text, err = run(capsys, path, "--explain", "-o", "json")
    assert code == 0, err
    pods = {f"{p['namespace']}/{p['name']}": p for p in json.loads(doc_text)["pods"]}
    found = blocks(out)
    # One block per pod that did not schedule; scheduled ones only when named.
    assert sorted(found) == ["web/no-claim", "web/too-big"]
    too_big = table_verdicts(found["web/too-big"])
    assert too_big == json_verdicts(pods["web/too-big"])
    # Nodes with the same verdict are listed together, the most common verdict first.
    assert too_big == [
        ["Filter", "NodeResourcesFit", "Unschedulable", "Insufficient cpu", "2 nodes: cpu-1, cpu-2"],
        [
            "Filter",
            "TaintToleration",
            "UnschedulableAndUnresolvable",
            "node(s) had untolerated taint {nvidia.com/gpu: present}",
            "1 node: gpu-1",
        ],
    ]
    no_claim = table_verdicts(found["web/no-claim"])
    assert no_claim == json_verdicts(pods["web/no-claim"])
    assert no_claim == [
        [
            "PreFilter",
            "VolumeRestrictions",
            "UnschedulableAndUnresolvable",
            'persistentvolumeclaim "missing" not found',
            "all 3 nodes",
        ]
    ]
    # The block repeats the whole FailedScheduling message.
    assert found["web/too-big"][1].strip() == " ".join(pods["web/too-big"]["message"].split())


def test_explain_pod_shows_a_scheduled_pods_scores_as_the_json_does(
    write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_yaml(CLUSTER + EXTRA)
    code, out, err = run(capsys, path, "--explain-pod", "web/web")
    assert code == 0, err
    code, doc_text, _ = run(capsys, path, "--explain-pod", "web/web", "-o", "json")
    pods = {f"{p['namespace']}/{p['name']}": p for p in json.loads(doc_text)["pods"]}
    # Only the named pod is explained, in both outputs.
    assert [k for k, p in pods.items() if "explain" in p] == ["web/web"]
    found = blocks(out)
    assert list(found) == ["web/web"]
    assert found["web/web"][0] == "EXPLAIN web/web: Scheduled on cpu-1 (1 attempt)"
    scores = table_scores(found["web/web"])
    assert scores == json_scores(pods["web/web"])
    # The two CPU nodes the pod fits, best first; each total is the sum of its weighted scores.
    assert list(scores) == ["cpu-1", "cpu-2"]
    for row in scores.values():
        assert int(row["TOTAL"]) == sum(int(v) for k, v in row.items() if k != "TOTAL")


def test_explain_pod_needs_namespace_and_name_and_warns_about_unknown_pods(
    write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_yaml(CLUSTER)
    code, _, err = run(capsys, path, "--explain-pod", "web")
    assert code == 2
    assert "'web' is not NAMESPACE/NAME" in err
    code, out, err = run(capsys, path, "--explain-pod", "web/nobody")
    assert code == 0
    assert "warning: --explain-pod web/nobody: no pending pod" in err
    assert blocks(out) == {}


@pytest.mark.parametrize(
    ("width", "wide", "whole"), [(80, False, False), (80, True, True), (None, True, True)]
)
def test_wide_prints_messages_whole(
    write_yaml: WriteYaml, width: int | None, wide: bool, whole: bool
) -> None:
    result = simulate([write_yaml(CLUSTER)])
    message = result.pod("web/too-big").message
    row = next(
        line for line in render_table(result, width, wide=wide).splitlines() if line.startswith("web/too-big")
    )
    assert row.endswith(" ".join(message.split())) is whole
    assert row.endswith("...") is not whole
