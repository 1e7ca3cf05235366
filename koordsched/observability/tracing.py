"""OpenTelemetry spans per scheduling cycle, costing next to nothing when tracing is off or unsampled.

The design follows the measurements in the ecosystem notes (section 4.4):

* one root span per pod cycle, started with ``start_span`` and an explicit context, never
  ``start_as_current_span``: the contextvar attach/detach costs about 7 µs even on unsampled spans;
* child spans per stage (PreFilter, Filter, Score, Reserve, Permit, Bind...) only when the root is
  recording, never per node or per plugin-per-node;
* the trace context is handed explicitly to the async binding task, so its spans join the trace.

kube-scheduler has no OTel tracing, so span names and attributes are ours; nothing depends on them.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import TextIO, cast

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.environment_variables import OTEL_TRACES_SAMPLER
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, Sampler, TraceIdRatioBased
from opentelemetry.trace import INVALID_SPAN, Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from koordsched import __version__

#: Names of the spans this module creates.
CYCLE_SPAN_NAME = "scheduling_cycle"
BINDING_SPAN_NAME = "binding_cycle"
#: A failed cycle's FailedScheduling message (also its span status's description).
MESSAGE_ATTRIBUTE = "scheduler.message"

#: Used when OTEL_TRACES_SAMPLER is unset: the SDK's own default (parentbased_always_on) would trace
#: every pod, which at thousands of pods per second costs more than the scheduling it describes.
DEFAULT_SAMPLER: Sampler = ParentBased(TraceIdRatioBased(0.01))

DEFAULT_SERVICE_NAME = "koordsched"

# A root span must not inherit whatever span happens to be current in the calling task.
_ROOT_CONTEXT = Context()

_OTLP_MODULES = {
    "grpc": "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
    "http/protobuf": "opentelemetry.exporter.otlp.proto.http.trace_exporter",
}
#: The distribution that provides each protocol's exporter.
_OTLP_PACKAGES = {
    "grpc": "opentelemetry-exporter-otlp-proto-grpc",
    "http/protobuf": "opentelemetry-exporter-otlp-proto-http",
}


class TracingConfigError(RuntimeError):
    """The OTEL_* environment asks for something this process cannot provide."""


class _NoopStage:
    """The stage context manager when nothing is recorded: shared, so a stage allocates nothing."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return INVALID_SPAN

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


_NOOP_STAGE = _NoopStage()


def _end_span(span: Span, exc: BaseException | None) -> None:
    """End ``span``, marking it failed when an exception is leaving its block."""
    if exc is not None:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
    span.end()


class _Stage:
    """A recording child span, ended when its ``with`` block exits."""

    __slots__ = ("_span",)

    def __init__(self, span: Span) -> None:
        self._span = span

    def __enter__(self) -> Span:
        return self._span

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _end_span(self._span, exc)


class CycleSpan:
    """The root span of one scheduling (or binding) cycle, and the factory of its stage spans.

    An instance exists only for recording spans; everything else gets the shared ``NOOP_CYCLE``,
    whose methods return at once.
    """

    __slots__ = ("_context", "_ended", "_span", "_tracer")

    def __init__(self, tracer: trace.Tracer | None, span: Span) -> None:
        self._tracer = tracer
        self._span = span
        self._context: Context | None = None
        self._ended = False

    @property
    def recording(self) -> bool:
        return self._tracer is not None

    @property
    def span(self) -> Span:
        """The underlying span (``INVALID_SPAN`` when not recording)."""
        return self._span

    def stage(self, name: str) -> AbstractContextManager[Span]:
        """A ``with`` block timed as a child span named ``name``; free when not recording."""
        tracer = self._tracer
        if tracer is None:
            return _NOOP_STAGE
        return _Stage(tracer.start_span(name, context=self.context()))

    def context(self) -> Context | None:
        """The trace context to hand to the binding task; None when this cycle is not traced."""
        if self._tracer is None:
            return None
        ctx = self._context
        if ctx is None:
            ctx = self._context = trace.set_span_in_context(self._span, _ROOT_CONTEXT)
        return ctx

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        if self._tracer is not None:
            self._span.set_attribute(key, value)

    def set_result(self, result: str, message: str = "", node: str | None = None) -> None:
        """The cycle's outcome (scheduled, unschedulable, error).

        A pod that did not schedule marks the span failed, with the FailedScheduling message (the
        Event's note) as the status description and as ``scheduler.message``; a scheduled one
        names its node (``k8s.node.name``)."""
        if self._tracer is None:
            return
        span = self._span
        span.set_attribute("scheduler.result", result)
        if result == "scheduled":
            if node:
                span.set_attribute("k8s.node.name", node)
            return
        if message:
            span.set_attribute(MESSAGE_ATTRIBUTE, message)
        span.set_status(Status(StatusCode.ERROR, message or None))

    def end(self) -> None:
        """End the span; a second call does nothing, so error paths may end it defensively."""
        if self._tracer is None or self._ended:
            return
        self._ended = True
        self._span.end()

    def __enter__(self) -> CycleSpan:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._tracer is None or self._ended:
            return
        self._ended = True
        _end_span(self._span, exc)


#: What every cycle gets when tracing is off or the root was not sampled.
NOOP_CYCLE = CycleSpan(None, INVALID_SPAN)


def _set_pod_attributes(span: Span, pod_key: str, uid: str) -> None:
    # OpenTelemetry's semantic conventions for Kubernetes resources (k8s.*).
    namespace, sep, name = pod_key.partition("/")
    if sep:
        span.set_attribute("k8s.namespace.name", namespace)
        span.set_attribute("k8s.pod.name", name)
    else:
        span.set_attribute("k8s.pod.name", pod_key)
    if uid:
        span.set_attribute("k8s.pod.uid", uid)


class CycleTracer:
    """Starts cycle spans from a TracerProvider, or hands out ``NOOP_CYCLE`` when there is none."""

    __slots__ = ("_provider", "_tracer")

    def __init__(self, provider: TracerProvider | None = None) -> None:
        self._provider = provider
        self._tracer: trace.Tracer | None = (
            None if provider is None else provider.get_tracer("koordsched.scheduler", __version__)
        )

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    @property
    def provider(self) -> TracerProvider | None:
        return self._provider

    def start_cycle(self, pod_key: str, profile: str, uid: str = "") -> CycleSpan:
        """The root span of a pod's scheduling cycle; ``NOOP_CYCLE`` unless it is sampled."""
        tracer = self._tracer
        if tracer is None:
            return NOOP_CYCLE
        span = tracer.start_span(CYCLE_SPAN_NAME, context=_ROOT_CONTEXT)
        if not span.is_recording():
            return NOOP_CYCLE
        _set_pod_attributes(span, pod_key, uid)
        span.set_attribute("scheduler.profile", profile)
        return CycleSpan(tracer, span)

    def start_binding(
        self, parent: Context | None, pod_key: str = "", node: str = "", uid: str = ""
    ) -> CycleSpan:
        """The binding task's span, a child of the scheduling cycle whose ``context()`` is ``parent``.

        A cycle that was not traced passes None, and its binding is not traced either.
        """
        tracer = self._tracer
        if tracer is None or parent is None:
            return NOOP_CYCLE
        span = tracer.start_span(BINDING_SPAN_NAME, context=parent)
        if not span.is_recording():
            return NOOP_CYCLE
        if pod_key:
            _set_pod_attributes(span, pod_key, uid)
        if node:
            span.set_attribute("k8s.node.name", node)
        return CycleSpan(tracer, span)


def _otlp_exporter() -> SpanExporter:
    """The OTLP exporter: HTTP/protobuf from the ``otlp`` extra, or gRPC when asked for and installed."""
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or ""
    ).strip()
    candidates: Sequence[str]
    if not protocol:
        # The OTel specification's default is http/protobuf (what the "otlp" extra installs);
        # Python's own "otlp" entry point means gRPC, used when only that package is installed.
        candidates = (_OTLP_MODULES["http/protobuf"], _OTLP_MODULES["grpc"])
    elif protocol in _OTLP_MODULES:
        candidates = (_OTLP_MODULES[protocol],)
    else:
        raise TracingConfigError(
            f"OTLP protocol {protocol!r} is not supported; use one of {', '.join(sorted(_OTLP_MODULES))}"
        )
    for module_name in candidates:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        # Looked up dynamically: the package is optional and has no stubs here.
        return cast(SpanExporter, module.OTLPSpanExporter())
    package = _OTLP_PACKAGES["grpc" if protocol == "grpc" else "http/protobuf"]
    raise TracingConfigError(
        f"OTEL_TRACES_EXPORTER=otlp needs the optional package {package} "
        f"(module {' or '.join(candidates)} not importable); install it with "
        f"'pip install {package}' (koordsched's 'otlp' extra installs the HTTP one: "
        "pip install 'koordsched[otlp]'), or set OTEL_TRACES_EXPORTER=console or none"
    )


def _resource() -> Resource:
    """The SDK's resource from OTEL_RESOURCE_ATTRIBUTES/OTEL_SERVICE_NAME, named koordsched by default."""
    resource = Resource.create()
    name = resource.attributes.get(SERVICE_NAME)
    if not isinstance(name, str) or name.startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    return resource


def tracer_provider_from_env(console_out: TextIO | None = None) -> TracerProvider | None:
    """A TracerProvider configured by the standard OTEL_* variables, or None when tracing is off.

    Tracing is on when OTEL_TRACES_EXPORTER names an exporter (``console``, ``otlp``; a comma list
    is allowed; ``none`` or unset means off). The sampler comes from OTEL_TRACES_SAMPLER and
    OTEL_TRACES_SAMPLER_ARG, which the SDK reads itself; when OTEL_TRACES_SAMPLER is unset it is
    ``parentbased_traceidratio`` at 0.01 rather than the SDK's always-on default. Spans are batched
    (BatchSpanProcessor, tuned by OTEL_BSP_*), so exporting never blocks a scheduling cycle.
    ``console_out`` is where the console exporter writes (the SDK's default, stdout, when None):
    ``simulate`` passes stderr, as its stdout carries the result.
    """
    setting = os.environ.get("OTEL_TRACES_EXPORTER", "").strip()
    if not setting:
        return None
    exporters: list[SpanExporter] = []
    for raw in setting.split(","):
        name = raw.strip().lower()
        if name in ("", "none"):
            continue
        if name == "console":
            exporters.append(
                ConsoleSpanExporter() if console_out is None else ConsoleSpanExporter(out=console_out)
            )
        elif name == "otlp":
            exporters.append(_otlp_exporter())
        else:
            raise TracingConfigError(
                f"OTEL_TRACES_EXPORTER={setting!r}: unknown exporter {name!r}; use console, otlp or none"
            )
    if not exporters:
        return None
    sampler = None if os.environ.get(OTEL_TRACES_SAMPLER, "").strip() else DEFAULT_SAMPLER
    provider = TracerProvider(sampler=sampler, resource=_resource())
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider
