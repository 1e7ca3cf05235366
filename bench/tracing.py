"""Per-pod cost of OpenTelemetry tracing on the basic shape: off, 1 % sampled (the default), 100 %.

Each round schedules the same SchedulingBasic cluster (bench/decision.py's ``basic_cluster``,
default profile, percentageOfNodesToScore 100) once per mode, in an order that rotates between
rounds, all in this one process, so the ratios compare runs made side by side. With tracing on,
spans go through the real pipeline ``koordsched run`` uses: the SDK's BatchSpanProcessor (its
defaults, OTEL_BSP_*) and the OTLP/HTTP exporter of the ``otlp`` extra, to a receiver in another
process that answers 200 and discards the body (a collector's work is not ours to count).

The cost counted per pod is the scheduling loop's CPU time (every thread of this process: the
exporter's thread included) plus the CPU the final flush takes; wall time likewise. Decisions
must not depend on tracing: the pods' nodes are compared across modes and the run fails if they
differ. The spans the processor received and those it exported are reported (a full queue drops
spans, as the SDK does).

    .venv/bin/python bench/tracing.py                          # 5,000 nodes, 5,000 pods, 3 rounds
    .venv/bin/python bench/tracing.py --nodes 1000 --pods 10000 --rounds 5
    .venv/bin/python bench/tracing.py --split     # and 100 % traced but not exported
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Sampler

sys.path.insert(0, str(Path(__file__).resolve().parent))

from decision import basic_cluster, profile_bytes

from koordsched.backends.sim.runner import simulate_cluster
from koordsched.config.load import load_config
from koordsched.observability.tracing import DEFAULT_SAMPLER, CycleTracer
from koordsched.plugins.registry import in_tree_registry

MODES: dict[str, Sampler | None] = {"off": None, "1%": DEFAULT_SAMPLER, "100%": ALWAYS_ON}
#: With --split: every cycle traced and batched, but the exporter drops the batches (no encoding,
#: no HTTP), which splits the 100 % cost into making spans and exporting them.
UNEXPORTED = "100%, not exported"

# The receiver: accepts OTLP/HTTP POSTs and throws the bodies away.
SINK = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


class Counting(SpanExporter):
    """Counts what reaches the exporter (after the batch processor's queue), then exports it."""

    def __init__(self, inner: SpanExporter | None) -> None:
        self.inner = inner
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return self.inner.export(spans) if self.inner is not None else SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        if self.inner is not None:
            self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis) if self.inner is not None else True


def one(nodes: int, pods: int, mode: str, endpoint: str) -> dict[str, Any]:
    registry = in_tree_registry()
    config = load_config(profile_bytes(100), registry)
    cluster = basic_cluster(nodes, pods)
    registry.warm_up()
    sampler = ALWAYS_ON if mode == UNEXPORTED else MODES[mode]
    provider: TracerProvider | None = None
    counting: Counting | None = None
    if sampler is not None:
        provider = TracerProvider(sampler=sampler, shutdown_on_exit=False)
        exporter = None if mode == UNEXPORTED else OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")
        counting = Counting(exporter)
        provider.add_span_processor(BatchSpanProcessor(counting))
    result = asyncio.run(simulate_cluster(cluster, config, registry, tracer=CycleTracer(provider)))
    s = result.summary
    flush_wall = flush_cpu = 0.0
    if provider is not None:
        w0, c0 = time.perf_counter(), time.process_time()
        provider.force_flush()
        provider.shutdown()
        flush_wall, flush_cpu = time.perf_counter() - w0, time.process_time() - c0
    wall, cpu = s.wall_seconds + flush_wall, s.cpu_seconds + flush_cpu
    return {
        "mode": mode,
        "nodes": nodes,
        "pods": pods,
        "scheduled": s.scheduled,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "flush_cpu_s": round(flush_cpu, 3),
        "us_per_pod_cpu": round(1e6 * cpu / max(1, s.scheduled), 1),
        "us_per_pod_wall": round(1e6 * wall / max(1, s.scheduled), 1),
        "spans_exported": counting.spans if counting else 0,
        "placements": {p.key: p.node for p in result.pods},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--split", action="store_true", help=f"also run '{UNEXPORTED}'")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args()

    sink = subprocess.Popen([sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None
        endpoint = f"http://127.0.0.1:{sink.stdout.readline().strip()}"
        names = [*MODES, UNEXPORTED] if args.split else list(MODES)
        runs: list[dict[str, Any]] = []
        reference: dict[str, str | None] | None = None
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for mode in order:
                out = one(args.nodes, args.pods, mode, endpoint)
                placements = out.pop("placements")
                if reference is None:
                    reference = placements
                elif placements != reference:
                    differ = sum(1 for k in reference if placements.get(k) != reference[k])
                    print(f"decisions differ with tracing {mode}: {differ} pods", file=sys.stderr)
                    return 1
                out["round"] = r
                runs.append(out)
                print(json.dumps(out), flush=True)
    finally:
        sink.terminate()
        sink.wait(10)
    if args.json_out:
        args.json_out.write_text("".join(json.dumps(r) + "\n" for r in runs))

    def med(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in runs if r["mode"] == mode)

    base_cpu, base_wall = med("off", "us_per_pod_cpu"), med("off", "us_per_pod_wall")
    print(f"\n{args.nodes} nodes, {args.pods} pods, basic shape; medians of {args.rounds} rounds")
    print("| tracing | us/pod (CPU) | vs off | us/pod (wall) | vs off | spans exported per pod |")
    print("|---|---|---|---|---|---|")
    for mode in names:
        cpu, wall = med(mode, "us_per_pod_cpu"), med(mode, "us_per_pod_wall")
        spans = med(mode, "spans_exported") / args.pods
        cells = [f"{cpu:.1f}", f"{cpu / base_cpu:.3f}", f"{wall:.1f}", f"{wall / base_wall:.3f}"]
        cells.append(f"{spans:.2f}")
        print(f"| {mode} | " + " | ".join(cells) + " |")
    print("all placements identical across modes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
