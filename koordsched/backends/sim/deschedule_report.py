"""``koordsched deschedule`` output: the migrations, node usage before and after, GPU fragmentation."""

from __future__ import annotations

import json
from typing import Any

from koordsched.backends.sim.deschedule import DescheduleResult, Migration, NodeLoad
from koordsched.backends.sim.report import FRAGMENTATION_FIELDS, _fragmentation_json, _table


def to_json(result: DescheduleResult) -> dict[str, Any]:
    return {
        "config": result.config_source,
        "rounds": result.rounds,
        "dryRun": result.dry_run,
        "migrations": [
            {
                "pod": m.pod,
                "from": m.node,
                "to": m.target,
                "phase": m.phase,
                "mode": m.mode,
                "plugin": m.plugin,
                "reason": m.reason,
                "message": m.message,
                "job": m.job,
                "reservation": None
                if m.reservation is None
                else {
                    "name": m.reservation.name,
                    "phase": m.reservation.phase,
                    "node": m.reservation.node,
                    "owner": m.reservation.owner,
                    "message": m.reservation.message,
                },
            }
            for m in result.migrations
        ],
        "dryRunDecisions": [
            {"profile": p, "plugin": pl, "pod": pod, "from": node, "reason": reason}
            for p, pl, pod, node, reason in result.dry_run_decisions
        ],
        "nodes": [
            {
                "name": n.name,
                "nodeMetric": n.has_metric,
                **{
                    name: {"before": b, "after": a, "allocatable": t}
                    for name, (b, a, t) in sorted(n.resources.items())
                },
            }
            for n in result.nodes
        ],
        "placedAfter": [{"pod": pod, "node": node} for pod, node in result.placed_after],
        "fragmentation": {
            "before": _fragmentation_json(result.fragmentation.before),
            "after": _fragmentation_json(result.fragmentation.after),
        },
        "warnings": list(result.warnings),
    }


def render_json(result: DescheduleResult) -> str:
    return json.dumps(to_json(result), indent=2) + "\n"


def _pct(used: int, total: int) -> str:
    return f"{100 * used / total:.0f}%" if total else "-"


def _load(n: NodeLoad, resource: str) -> tuple[str, str]:
    if not n.has_metric or resource not in n.resources:
        return "-", "-"
    before, after, total = n.resources[resource]
    return _pct(before, total), _pct(after, total)


def _reservation(m: Migration) -> str:
    """The job's Reservation: name, phase and node ("-" for none)."""
    r = m.reservation
    if r is None:
        return "-"
    return f"{r.name} ({r.phase}{' on ' + r.node if r.node else ''})"


def render_table(result: DescheduleResult) -> str:
    out: list[str] = []
    moved = sum(1 for m in result.migrations if m.target is not None)
    out.append(
        f"{len(result.migrations)} migration job(s), {moved} pod(s) moved; "
        f"decided in round {result.rounds} ({result.config_source})"
    )
    if result.migrations:
        rows = [
            [
                m.pod,
                m.node,
                m.target or "-",
                m.phase,
                _reservation(m),
                f"{m.plugin}: {m.reason}" + (f" [{m.message}]" if m.message else ""),
            ]
            for m in result.migrations
        ]
        out += ["", *_table(("POD", "FROM", "TO", "PHASE", "RESERVATION", "REASON"), rows)]
    if result.dry_run_decisions:
        rows = [[pod, node, f"{pl}: {reason}"] for _, pl, pod, node, reason in result.dry_run_decisions]
        out += ["", "dry run: nothing was evicted", *_table(("POD", "FROM", "REASON"), rows)]
    if result.placed_after:
        rows = [[pod, node] for pod, node in result.placed_after]
        out += ["", "pending pods placed after the round:", *_table(("POD", "NODE"), rows)]
    node_rows = []
    for n in result.nodes:
        if not n.has_metric:
            continue
        cpu_b, cpu_a = _load(n, "cpu")
        mem_b, mem_a = _load(n, "memory")
        node_rows.append([n.name, cpu_b, cpu_a, mem_b, mem_a])
    if node_rows:
        header = ("NODE", "CPU USAGE BEFORE", "AFTER", "MEMORY USAGE BEFORE", "AFTER")
        out += ["", *_table(header, node_rows)]
    else:
        out += ["", "no NodeMetrics in the input: node usage is not shown"]
    report = result.fragmentation
    if report.before.gpu_nodes or report.after.gpu_nodes:
        rows = [
            [label, str(getattr(report.before, attr)), str(getattr(report.after, attr))]
            for attr, _, label in FRAGMENTATION_FIELDS
        ]
        out += ["", *_table(("GPU FRAGMENTATION", "BEFORE", "AFTER"), rows)]
    return "\n".join(out) + "\n"
