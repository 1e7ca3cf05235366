"""Cycle tracing: one root per cycle, stage children only when recording, binding joins the trace."""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Iterator, Sequence

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased
from opentelemetry.trace import StatusCode

from koordsched.observability import tracing
from koordsched.observability.tracing import (
    BINDING_SPAN_NAME,
    CYCLE_SPAN_NAME,
    NOOP_CYCLE,
    CycleTracer,
    TracingConfigError,
    tracer_provider_from_env,
)


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer(exporter: InMemorySpanExporter) -> Iterator[CycleTracer]:
    provider = TracerProvider(sampler=ALWAYS_ON, shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield CycleTracer(provider)
    provider.shutdown()


def _by_name(spans: Sequence[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {s.name: s for s in spans}


def _parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def _span_id(span: ReadableSpan) -> int:
    ctx = span.get_span_context()
    assert ctx is not None
    return ctx.span_id


def _trace_id(span: ReadableSpan) -> int:
    ctx = span.get_span_context()
    assert ctx is not None
    return ctx.trace_id


def test_one_root_per_cycle_with_a_child_per_stage(
    tracer: CycleTracer, exporter: InMemorySpanExporter
) -> None:
    cycle = tracer.start_cycle("default/web-0", "koord-scheduler")
    assert cycle.recording
    for stage in ("PreFilter", "Filter", "Score", "Reserve"):
        with cycle.stage(stage) as span:
            span.set_attribute("nodes", 3)
    cycle.set_attribute("evaluated_nodes", 3)
    cycle.set_result("scheduled")
    cycle.end()

    spans = exporter.get_finished_spans()
    roots = [s for s in spans if s.parent is None]
    assert [r.name for r in roots] == [CYCLE_SPAN_NAME]
    root = roots[0]
    assert root.attributes is not None
    assert root.attributes["k8s.namespace.name"] == "default"
    assert root.attributes["k8s.pod.name"] == "web-0"
    assert root.attributes["scheduler.profile"] == "koord-scheduler"
    assert root.attributes["scheduler.result"] == "scheduled"
    assert root.attributes["evaluated_nodes"] == 3
    children = [s for s in spans if s.parent is not None]
    assert [c.name for c in children] == ["PreFilter", "Filter", "Score", "Reserve"]
    for child in children:
        assert _parent_id(child) == _span_id(root)
        assert _trace_id(child) == _trace_id(root)
        assert child.attributes is not None
        assert child.attributes["nodes"] == 3


def test_each_cycle_is_its_own_trace(tracer: CycleTracer, exporter: InMemorySpanExporter) -> None:
    for i in range(3):
        with tracer.start_cycle(f"ns/p{i}", "p") as cycle, cycle.stage("Filter"):
            pass
    spans = exporter.get_finished_spans()
    roots = [s for s in spans if s.name == CYCLE_SPAN_NAME]
    assert len(roots) == 3
    assert len({_trace_id(r) for r in roots}) == 3


def test_stages_do_not_touch_the_current_context(tracer: CycleTracer) -> None:
    cycle = tracer.start_cycle("ns/p", "p")
    with cycle.stage("Filter"):
        # No contextvar attach: that is the 7 µs the notes measured on every span.
        assert trace.get_current_span() is trace.INVALID_SPAN
    cycle.end()


def test_root_ignores_an_ambient_current_span(tracer: CycleTracer, exporter: InMemorySpanExporter) -> None:
    provider = tracer.provider
    assert provider is not None
    other = provider.get_tracer("test")
    with other.start_as_current_span("ambient"):
        tracer.start_cycle("ns/p", "p").end()
    cycle_span = _by_name(exporter.get_finished_spans())[CYCLE_SPAN_NAME]
    assert cycle_span.parent is None


def test_binding_span_is_a_child_of_the_cycle(tracer: CycleTracer, exporter: InMemorySpanExporter) -> None:
    cycle = tracer.start_cycle("ns/p", "p")
    with cycle.stage("Reserve"):
        pass
    parent = cycle.context()
    assert parent is not None
    cycle.set_result("scheduled")
    cycle.end()  # the scheduling cycle ends before the binding task runs

    async def bind() -> None:
        binding = tracer.start_binding(parent, "ns/p", node="node-1")
        with binding.stage("PreBind"):
            await asyncio.sleep(0)
        with binding.stage("Bind"):
            await asyncio.sleep(0)
        binding.end()

    asyncio.run(bind())
    spans = _by_name(exporter.get_finished_spans())
    root, binding_span = spans[CYCLE_SPAN_NAME], spans[BINDING_SPAN_NAME]
    assert _parent_id(binding_span) == _span_id(root)
    assert _trace_id(binding_span) == _trace_id(root)
    assert binding_span.attributes is not None
    assert binding_span.attributes["k8s.node.name"] == "node-1"
    for name in ("PreBind", "Bind"):
        assert _parent_id(spans[name]) == _span_id(binding_span)
        assert _trace_id(spans[name]) == _trace_id(root)


def test_failing_stage_marks_the_span_and_reraises(
    tracer: CycleTracer, exporter: InMemorySpanExporter
) -> None:
    cycle = tracer.start_cycle("ns/p", "p")
    with pytest.raises(RuntimeError, match="boom"), cycle.stage("Bind"):
        raise RuntimeError("boom")
    cycle.set_result("error")
    cycle.end()
    spans = _by_name(exporter.get_finished_spans())
    assert spans["Bind"].status.status_code is StatusCode.ERROR
    assert [e.name for e in spans["Bind"].events] == ["exception"]
    assert spans[CYCLE_SPAN_NAME].status.status_code is StatusCode.ERROR


def test_cycle_as_context_manager_records_exceptions(
    tracer: CycleTracer, exporter: InMemorySpanExporter
) -> None:
    with pytest.raises(ValueError), tracer.start_cycle("ns/p", "p"):
        raise ValueError("bad")
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR


def test_end_is_idempotent(tracer: CycleTracer, exporter: InMemorySpanExporter) -> None:
    cycle = tracer.start_cycle("ns/p", "p")
    cycle.end()
    cycle.end()
    with cycle:
        pass
    assert len(exporter.get_finished_spans()) == 1


def test_disabled_tracer_hands_out_the_shared_noop() -> None:
    tracer = CycleTracer(None)
    assert not tracer.enabled
    cycle = tracer.start_cycle("ns/p", "p")
    assert cycle is NOOP_CYCLE
    assert tracer.start_cycle("ns/q", "p") is cycle
    assert not cycle.recording
    stage_a, stage_b = cycle.stage("Filter"), cycle.stage("Score")
    assert stage_a is stage_b  # no allocation per stage
    with stage_a as span:
        assert span is trace.INVALID_SPAN
        span.set_attribute("ignored", 1)
    cycle.set_attribute("k", "v")
    cycle.set_result("scheduled")
    cycle.end()
    assert cycle.context() is None
    assert tracer.start_binding(None, "ns/p") is NOOP_CYCLE


def test_unsampled_cycles_create_no_spans(exporter: InMemorySpanExporter) -> None:
    provider = TracerProvider(sampler=ALWAYS_OFF, shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = CycleTracer(provider)
    cycle = tracer.start_cycle("ns/p", "p")
    assert cycle is NOOP_CYCLE
    with cycle.stage("Filter"):
        pass
    cycle.end()
    # An untraced cycle passes None, so its binding is untraced too (no orphan binding traces).
    binding = tracer.start_binding(cycle.context(), "ns/p")
    assert binding is NOOP_CYCLE
    binding.end()
    assert exporter.get_finished_spans() == ()
    provider.shutdown()


def test_binding_under_an_unsampled_parent_is_noop(exporter: InMemorySpanExporter) -> None:
    # A parent context carried in but not sampled: a parent-based sampler follows its decision.
    off = TracerProvider(sampler=ALWAYS_OFF, shutdown_on_exit=False)
    parent = trace.set_span_in_context(off.get_tracer("t").start_span("x"))
    provider = TracerProvider(sampler=ParentBased(ALWAYS_ON), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert CycleTracer(provider).start_binding(parent) is NOOP_CYCLE
    assert exporter.get_finished_spans() == ()
    provider.shutdown()
    off.shutdown()


# --- tracer_provider_from_env ---


_OTEL_VARS = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for var in _OTEL_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


@pytest.fixture
def providers() -> Iterator[list[TracerProvider]]:
    made: list[TracerProvider] = []
    yield made
    for p in made:
        p.shutdown()


@pytest.mark.parametrize("value", [None, "", "none", " none "])
def test_env_off(clean_env: pytest.MonkeyPatch, value: str | None) -> None:
    if value is not None:
        clean_env.setenv("OTEL_TRACES_EXPORTER", value)
    assert tracer_provider_from_env() is None


def test_env_console_defaults_to_one_percent_parent_based(
    clean_env: pytest.MonkeyPatch, providers: list[TracerProvider]
) -> None:
    clean_env.setenv("OTEL_TRACES_EXPORTER", "console")
    provider = tracer_provider_from_env()
    assert provider is not None
    providers.append(provider)
    assert provider.sampler is tracing.DEFAULT_SAMPLER
    assert "TraceIdRatioBased{0.01}" in provider.sampler.get_description()
    assert provider.sampler.get_description().startswith("ParentBased")
    assert provider.resource.attributes["service.name"] == "koordsched"


def test_env_sampler_is_read_by_the_sdk(
    clean_env: pytest.MonkeyPatch, providers: list[TracerProvider]
) -> None:
    clean_env.setenv("OTEL_TRACES_EXPORTER", "console")
    clean_env.setenv("OTEL_TRACES_SAMPLER", "traceidratio")
    clean_env.setenv("OTEL_TRACES_SAMPLER_ARG", "0.25")
    clean_env.setenv("OTEL_SERVICE_NAME", "my-scheduler")
    provider = tracer_provider_from_env()
    assert provider is not None
    providers.append(provider)
    assert provider.sampler.get_description() == "TraceIdRatioBased{0.25}"
    assert provider.resource.attributes["service.name"] == "my-scheduler"


def test_env_always_on(clean_env: pytest.MonkeyPatch, providers: list[TracerProvider]) -> None:
    clean_env.setenv("OTEL_TRACES_EXPORTER", "console")
    clean_env.setenv("OTEL_TRACES_SAMPLER", "always_on")
    provider = tracer_provider_from_env()
    assert provider is not None
    providers.append(provider)
    assert provider.sampler is ALWAYS_ON


def test_env_unknown_exporter(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(TracingConfigError, match="unknown exporter 'zipkin'"):
        tracer_provider_from_env()


def test_env_otlp_without_the_package(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OTEL_TRACES_EXPORTER", "otlp")
    for module in tracing._OTLP_MODULES.values():
        clean_env.setitem(sys.modules, module, None)  # import fails, as when not installed
    with pytest.raises(TracingConfigError) as info:
        tracer_provider_from_env()
    message = str(info.value)
    assert "needs the optional package opentelemetry-exporter-otlp-proto-http" in message
    assert "pip install 'koordsched[otlp]'" in message


def test_env_otlp_grpc_without_its_package_names_it(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OTEL_TRACES_EXPORTER", "otlp")
    clean_env.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    clean_env.setitem(sys.modules, tracing._OTLP_MODULES["grpc"], None)
    with pytest.raises(TracingConfigError, match="pip install opentelemetry-exporter-otlp-proto-grpc'"):
        tracer_provider_from_env()


def test_env_otlp_unsupported_protocol(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OTEL_TRACES_EXPORTER", "otlp")
    clean_env.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with pytest.raises(TracingConfigError, match="http/json"):
        tracer_provider_from_env()


class _FakeOTLPSpanExporter(SpanExporter):
    protocol = ""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


@pytest.mark.parametrize(
    ("protocol", "installed", "chosen"),
    [
        # Unset: the specification's default (http/protobuf) when installed, else gRPC.
        ("", ("grpc", "http/protobuf"), "http/protobuf"),
        ("", ("grpc",), "grpc"),
        ("http/protobuf", ("grpc", "http/protobuf"), "http/protobuf"),
        ("grpc", ("grpc", "http/protobuf"), "grpc"),
    ],
)
def test_env_otlp_with_the_package(
    clean_env: pytest.MonkeyPatch,
    providers: list[TracerProvider],
    protocol: str,
    installed: tuple[str, ...],
    chosen: str,
) -> None:
    clean_env.setenv("OTEL_TRACES_EXPORTER", "console,otlp")
    if protocol:
        clean_env.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", protocol)
    for key, module_name in tracing._OTLP_MODULES.items():
        if key not in installed:
            clean_env.setitem(sys.modules, module_name, None)
            continue
        fake = types.ModuleType(f"fake_otlp_{key}")
        fake.OTLPSpanExporter = type(  # type: ignore[attr-defined]
            f"Fake{key}", (_FakeOTLPSpanExporter,), {"protocol": key}
        )
        clean_env.setitem(sys.modules, module_name, fake)
    provider = tracer_provider_from_env()
    assert provider is not None
    providers.append(provider)
    assert CycleTracer(provider).enabled
    processors = provider._active_span_processor._span_processors
    otlp = [p.span_exporter for p in processors if isinstance(p.span_exporter, _FakeOTLPSpanExporter)]
    assert [e.protocol for e in otlp] == [chosen]
