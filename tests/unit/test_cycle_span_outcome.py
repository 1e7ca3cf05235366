"""A cycle span's outcome (the FailedScheduling message and ERROR status, the chosen node) and
its stage spans' plugin attributes, computed only when the stage is recording."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import StatusCode

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.runtime import Framework
from koordsched.observability.tracing import MESSAGE_ATTRIBUTE, CycleTracer
from koordsched.scheduler.stage_trace import plugins_run, record_plugins

MESSAGE = "0/3 nodes are available: 3 Insufficient cpu."


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer(exporter: InMemorySpanExporter) -> Iterator[CycleTracer]:
    provider = TracerProvider(sampler=ALWAYS_ON, shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield CycleTracer(provider)
    provider.shutdown()


@pytest.mark.parametrize(
    ("result", "message", "node", "code", "description", "extra"),
    [
        ("scheduled", "", "n1", StatusCode.UNSET, None, {"k8s.node.name": "n1"}),
        ("unschedulable", MESSAGE, None, StatusCode.ERROR, MESSAGE, {MESSAGE_ATTRIBUTE: MESSAGE}),
        (
            "error",
            "internal error: boom",
            None,
            StatusCode.ERROR,
            "internal error: boom",
            {MESSAGE_ATTRIBUTE: "internal error: boom"},
        ),
        ("error", "", None, StatusCode.ERROR, None, {}),
    ],
)
def test_outcome_sets_status_message_and_node(
    tracer: CycleTracer,
    exporter: InMemorySpanExporter,
    result: str,
    message: str,
    node: str | None,
    code: StatusCode,
    description: str | None,
    extra: dict[str, Any],
) -> None:
    cycle = tracer.start_cycle("default/web-0", "koord-scheduler", "uid-1")
    cycle.set_result(result, message, node)
    cycle.end()
    [span] = exporter.get_finished_spans()
    assert (span.status.status_code, span.status.description) == (code, description)
    assert dict(span.attributes or {}) == {
        "k8s.namespace.name": "default",
        "k8s.pod.name": "web-0",
        "k8s.pod.uid": "uid-1",
        "scheduler.profile": "koord-scheduler",
        "scheduler.result": result,
        **extra,
    }


@pytest.mark.parametrize(
    ("names", "skipped", "stopped_by", "ran"),
    [
        (["A", "B", "C"], set(), None, ["A", "B", "C"]),
        (["A", "B", "C"], {"B"}, None, ["A", "C"]),
        (["A", "B", "C"], set(), "B", ["A", "B"]),
        (["A", "B", "C"], {"A"}, "C", ["B", "C"]),
        ([], set(), None, []),
    ],
)
def test_plugins_run_stops_at_the_rejecting_plugin(
    names: list[str], skipped: set[str], stopped_by: str | None, ran: list[str]
) -> None:
    assert plugins_run(names, skipped, stopped_by) == ran


class _Untouchable:
    """A framework that fails the test if anything reads it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"read {name} of the framework for a span that is not recording")


def test_record_plugins_reads_nothing_for_a_span_not_recording() -> None:
    record_plugins(
        trace.INVALID_SPAN, cast(Framework, _Untouchable()), CycleState(), "Filter", rejected={"X"}
    )
