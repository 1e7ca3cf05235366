"""A real OTLP/HTTP trace receiver for tests: what a collector's ``otlphttp`` receiver accepts.

It serves ``POST /v1/traces`` on a free loopback port, decodes each body as an OTLP
``ExportTraceServiceRequest`` (protobuf, optionally gzip-compressed) with the opentelemetry-proto
package the exporter itself depends on, and answers with an ``ExportTraceServiceResponse``.
Whatever else arrives (another path, a body that does not decode) is answered as a collector
answers it (404, 400) and recorded in :attr:`OtlpReceiver.errors`, so a test sees it.
"""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

TRACES_PATH = "/v1/traces"
PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as it came over the wire, with its resource and instrumentation scope."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str
    scope_version: str
    #: OTLP's Status.code: 0 unset, 1 ok, 2 error.
    status_code: int
    start_ns: int
    end_ns: int
    status_message: str = ""


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return _attributes(v.kvlist_value.values)
    return getattr(v, kind)


def _attributes(kvs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    kv: KeyValue
    for kv in kvs:
        out[kv.key] = _value(kv.value)
    return out


def decode_spans(body: bytes) -> list[ReceivedSpan]:
    """The spans of one ExportTraceServiceRequest body (raises DecodeError when it is not one)."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans: list[ReceivedSpan] = []
    for rs in request.resource_spans:
        resource = _attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            spans.extend(
                ReceivedSpan(
                    name=span.name,
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex(),
                    attributes=_attributes(span.attributes),
                    resource=resource,
                    scope=ss.scope.name,
                    scope_version=ss.scope.version,
                    status_code=span.status.code,
                    start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano,
                    status_message=span.status.message,
                )
                for span in ss.spans
            )
    return spans


class OtlpReceiver:
    """``with OtlpReceiver() as rx: ... rx.endpoint ... rx.spans``; serves from a daemon thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: list[ReceivedSpan] = []
        self.requests = 0
        self.content_types: set[str] = set()
        self.errors: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if self.path != TRACES_PATH:
                    receiver._error(f"POST {self.path}: not {TRACES_PATH}")
                    self._answer(404, b"404 page not found", "text/plain")
                    return
                try:
                    if self.headers.get("Content-Encoding") == "gzip":
                        body = gzip.decompress(body)
                    spans = decode_spans(body)
                except (DecodeError, OSError, EOFError) as err:
                    receiver._error(f"POST {self.path}: undecodable body ({len(body)} bytes): {err}")
                    self._answer(400, b"bad request", "text/plain")
                    return
                receiver._received(spans, self.headers.get("Content-Type", ""))
                self._answer(200, ExportTraceServiceResponse().SerializeToString(), PROTOBUF)

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # quiet: pytest shows failures
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)

    def _received(self, spans: list[ReceivedSpan], content_type: str) -> None:
        with self._lock:
            self._spans.extend(spans)
            self.requests += 1
            self.content_types.add(content_type)

    def _error(self, what: str) -> None:
        with self._lock:
            self.errors.append(what)

    @property
    def endpoint(self) -> str:
        """The base URL for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def wait_for(self, predicate: Any, timeout: float = 30.0) -> list[ReceivedSpan]:
        """The spans once ``predicate(spans)`` holds; fails after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans
            if predicate(spans):
                return spans
            if time.monotonic() > deadline:
                names = sorted({s.name for s in spans})
                raise AssertionError(
                    f"timed out after {timeout:.0f}s waiting for spans: {len(spans)} received "
                    f"({names}) in {self.requests} requests; errors: {self.errors}"
                )
            time.sleep(0.1)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
