"""``koordsched simulate`` with OTEL_TRACES_EXPORTER=otlp exports its cycles to a real OTLP/HTTP receiver.

The receiver (tests/otlp.py) decodes what arrives with the OTLP protobuf definitions, so this
checks the whole way out: the ``otlp`` extra's exporter, the batch processor, the flush at exit,
and the span tree each cycle makes (tracing.py's names and attributes).
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from koordsched import __version__
from koordsched.cli import main
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import load_config
from koordsched.observability.tracing import BINDING_SPAN_NAME, CYCLE_SPAN_NAME, MESSAGE_ATTRIBUTE
from koordsched.plugins.registry import in_tree_registry
from koordsched.scheduler.stage_trace import PLUGINS_REJECTED, PLUGINS_RUN
from tests.otlp import OtlpReceiver, ReceivedSpan
from tests.scenario.helpers import WriteYaml

CLUSTER = """
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n3, labels: {kubernetes.io/hostname: n3}}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: shop}
spec:
  schedulerName: koord-scheduler
  containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: web-2, namespace: shop}
spec:
  schedulerName: koord-scheduler
  containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: too-big, namespace: batch}
spec:
  schedulerName: koord-scheduler
  containers: [{name: c, resources: {requests: {cpu: "64"}}}]
"""

_OTEL_VARS = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
)

SCHEDULING_STAGES = ["PreFilter", "Filter", "Score", "Reserve", "Permit"]
BINDING_STAGES = ["WaitOnPermit", "PreBind", "Bind"]
UNSCHEDULABLE_STAGES = ["PreFilter", "Filter", "PostFilter"]


@pytest.fixture
def otel_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for var in _OTEL_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def _children(spans: list[ReceivedSpan]) -> dict[str, list[ReceivedSpan]]:
    out: dict[str, list[ReceivedSpan]] = defaultdict(list)
    for s in spans:
        out[s.parent_span_id].append(s)
    for kids in out.values():
        kids.sort(key=lambda s: s.start_ns)
    return out


def _in_order(names: list[str], order: list[str]) -> bool:
    """``names`` are distinct members of ``order``, in its order."""
    rest = iter(order)
    return len(set(names)) == len(names) and all(n in rest for n in names)


def _within(child: ReceivedSpan, parent: ReceivedSpan) -> bool:
    return parent.start_ns <= child.start_ns <= child.end_ns <= parent.end_ns


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_simulate_exports_every_cycle_over_otlp_http(
    write_yaml: WriteYaml,
    capsys: pytest.CaptureFixture[str],
    otel_env: pytest.MonkeyPatch,
    compression: str,
) -> None:
    with OtlpReceiver() as rx:
        otel_env.setenv("OTEL_TRACES_EXPORTER", "otlp")
        otel_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint)
        otel_env.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", compression)
        otel_env.setenv("OTEL_TRACES_SAMPLER", "always_on")
        otel_env.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
        code = main(["simulate", str(write_yaml(CLUSTER)), "--output", "json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        # The CLI flushes before it returns: everything is here already, nothing to wait for.
        spans = rx.spans
        assert rx.errors == []
    assert rx.content_types == {"application/x-protobuf"}
    pods = {(p["namespace"], p["name"]): p for p in json.loads(out)["pods"]}
    assert {k: p["status"] for k, p in pods.items()} == {
        ("shop", "web-1"): "Scheduled",
        ("shop", "web-2"): "Scheduled",
        ("batch", "too-big"): "Unschedulable",
    }

    profile = load_config(default_profile_path(), in_tree_registry()).profiles[0]
    point_of = {"PreFilter": "preFilter", "Filter": "filter", "Reserve": "reserve", "Permit": "permit"}
    profile_points = {stage: [n for n, _ in profile.points[p]] for stage, p in point_of.items()}
    profile_points["Score"] = [n for p in ("preScore", "score") for n, _ in profile.points[p]]
    for s in spans:
        assert s.resource["service.name"] == "koordsched"
        assert s.resource["deployment.environment"] == "test"
        assert (s.scope, s.scope_version) == ("koordsched.scheduler", __version__)
        assert s.end_ns >= s.start_ns > 0
    by_id = {s.span_id: s for s in spans}
    assert len(by_id) == len(spans), "span ids repeat"
    children = _children(spans)
    roots = [s for s in spans if not s.parent_span_id]
    assert {s.name for s in roots} == {CYCLE_SPAN_NAME}, "only scheduling cycles start traces"
    assert len({s.trace_id for s in roots}) == len(roots), "one trace per cycle"

    cycles: dict[tuple[str, str], list[ReceivedSpan]] = defaultdict(list)
    for root in roots:
        key = (root.attributes["k8s.namespace.name"], root.attributes["k8s.pod.name"])
        cycles[key].append(root)
        assert root.attributes["scheduler.profile"] == "koord-scheduler"
        for child in children[root.span_id]:
            assert child.trace_id == root.trace_id
            assert child.name == BINDING_SPAN_NAME or _within(child, root), child.name

    for key in [("shop", "web-1"), ("shop", "web-2")]:
        [cycle] = cycles[key]  # placed at the first attempt
        assert cycle.attributes["scheduler.result"] == "scheduled"
        stages = children[cycle.span_id]
        [binding] = [s for s in stages if s.name == BINDING_SPAN_NAME]
        assert [s.name for s in stages if s is not binding] == SCHEDULING_STAGES
        # The binding cycle runs after the scheduling cycle ended, as a task, in the same trace.
        assert binding.start_ns >= cycle.end_ns
        pod_attributes = {
            "k8s.namespace.name": key[0],
            "k8s.pod.name": key[1],
            "k8s.pod.uid": f"{key[0]}/{key[1]}",  # the simulator's uid for a pod without one
            "k8s.node.name": pods[key]["node"],
            "scheduler.result": "scheduled",
        }
        assert binding.attributes == pod_attributes
        # The scheduled cycle names the node it chose, as its binding does.
        assert cycle.attributes == {**pod_attributes, "scheduler.profile": "koord-scheduler"}
        assert cycle.status_code == binding.status_code == 0
        # Each stage names the plugins that ran there; none rejected the pod.
        for stage in stages:
            if stage is binding:
                continue
            assert stage.attributes[PLUGINS_REJECTED] == [], stage.name
            ran = stage.attributes[PLUGINS_RUN]
            assert _in_order(ran, profile_points[stage.name]), (stage.name, ran)
            if stage.name == "PreFilter":
                assert ran == profile_points["PreFilter"]  # none rejected: every one ran
            elif stage.name in ("Filter", "Score"):
                assert "NodeResourcesFit" in ran
        for stage in children[binding.span_id]:
            assert stage.attributes[PLUGINS_REJECTED] == [], stage.name
        assert (
            "DefaultBinder"
            in next(s for s in children[binding.span_id] if s.name == "Bind").attributes[PLUGINS_RUN]
        )
        assert [s.name for s in children[binding.span_id]] == BINDING_STAGES
        assert all(_within(s, binding) for s in children[binding.span_id])
        assert all(not children[s.span_id] for s in stages if s is not binding), "stages have no children"

    too_big = cycles[("batch", "too-big")]
    assert len(too_big) == pods[("batch", "too-big")]["attempts"] >= 1
    for cycle in too_big:
        assert cycle.attributes["scheduler.result"] == "unschedulable"
        assert [s.name for s in children[cycle.span_id]] == UNSCHEDULABLE_STAGES
        # The FailedScheduling message, as the attribute and as the ERROR status's description.
        message = pods[("batch", "too-big")]["message"]
        assert cycle.attributes[MESSAGE_ATTRIBUTE] == message
        assert (cycle.status_code, cycle.status_message) == (2, message)
        assert "k8s.node.name" not in cycle.attributes
        stage = {s.name: s for s in children[cycle.span_id]}
        assert stage["Filter"].attributes[PLUGINS_REJECTED] == ["NodeResourcesFit"]
        assert "NodeResourcesFit" in stage["Filter"].attributes[PLUGINS_RUN]
        assert stage["PreFilter"].attributes[PLUGINS_REJECTED] == []
    # Nothing else was exported, and no span lost its parent.
    assert all(s.parent_span_id in by_id for s in spans if s.parent_span_id)
    expected = sum(1 + len(SCHEDULING_STAGES) + 1 + len(BINDING_STAGES) for _ in range(2))
    expected += len(too_big) * (1 + len(UNSCHEDULABLE_STAGES))
    assert len(spans) == expected


def test_simulate_exports_nothing_when_no_cycle_is_sampled(
    write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str], otel_env: pytest.MonkeyPatch
) -> None:
    with OtlpReceiver() as rx:
        otel_env.setenv("OTEL_TRACES_EXPORTER", "otlp")
        otel_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint)
        otel_env.setenv("OTEL_TRACES_SAMPLER", "traceidratio")
        otel_env.setenv("OTEL_TRACES_SAMPLER_ARG", "0")
        code = main(["simulate", str(write_yaml(CLUSTER)), "--output", "json"])
        _, err = capsys.readouterr()
        assert code == 0, err
        assert (rx.spans, rx.requests, rx.errors) == ([], 0, [])


def test_simulate_refuses_an_otlp_protocol_it_cannot_export(
    write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str], otel_env: pytest.MonkeyPatch
) -> None:
    otel_env.setenv("OTEL_TRACES_EXPORTER", "otlp")
    otel_env.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
    code = main(["simulate", str(write_yaml(CLUSTER))])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert "koordsched simulate: OTLP protocol 'http/json' is not supported" in err


def test_simulate_prints_console_spans_to_stderr_so_the_json_on_stdout_stays_whole(
    write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str], otel_env: pytest.MonkeyPatch
) -> None:
    otel_env.setenv("OTEL_TRACES_EXPORTER", "console")
    otel_env.setenv("OTEL_TRACES_SAMPLER", "always_on")
    code = main(["simulate", str(write_yaml(CLUSTER)), "--output", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert len(json.loads(out)["pods"]) == 3
    assert f'"name": "{CYCLE_SPAN_NAME}"' in err and f'"name": "{BINDING_SPAN_NAME}"' in err
