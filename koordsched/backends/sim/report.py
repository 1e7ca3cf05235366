"""A :class:`SimResult` as JSON (for programs) or as aligned tables (for people).

The JSON shape is a contract: scripts and later tooling read it. The tables are for a
person: on a terminal long FailedScheduling messages are cut to the width left, elsewhere
only very long ones are; the full text is always one ``--output json`` away.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from koordsched.backends.sim.explain_report import explain_block
from koordsched.backends.sim.fragmentation import Fragmentation
from koordsched.backends.sim.runner import NodeUsage, PodResult, SimResult
from koordsched.plugins.elasticquota import QuotaSummary, resource_list

#: Resources shown in the table's GPU column, in order of preference.
#: ``koordinator.sh/gpu`` counts percent of a GPU: 100 is one card.
_KOORD_GPU_PER_CARD = 100
_GI = 1024**3
_MIN_MESSAGE_WIDTH = 30

#: Longest message shown when the output is not a terminal; the JSON output has them whole.
MAX_MESSAGE = 300

#: The fragmentation counts in output order: (Fragmentation attribute, JSON key, table label).
FRAGMENTATION_FIELDS = (
    ("gpu_nodes", "gpuNodes", "GPU nodes"),
    ("gpus", "gpus", "GPUs"),
    ("idle_gpus", "idleGpus", "idle GPUs"),
    ("whole_free_nodes", "wholeFreeNodes", "whole free GPU nodes (every GPU idle)"),
    ("partly_used_nodes", "partlyUsedNodes", "partly used GPU nodes"),
    ("stranded_gpus", "strandedGpus", "stranded GPUs (idle on partly used nodes)"),
    ("fully_used_nodes", "fullyUsedNodes", "fully used GPU nodes"),
    ("partly_used_gpus", "partlyUsedGpus", "partly used shared GPUs"),
    ("cpu_stranded_nodes", "cpuStrandedNodes", "CPU-stranded GPU nodes (< 1 cpu or < 1Gi free)"),
    ("cpu_stranded_gpus", "cpuStrandedGpus", "CPU-stranded GPUs (idle on those nodes)"),
    ("expected_fragmented_gpus", "expectedFragmentedGpus", "expected fragmented GPUs (workload mix)"),
)


# --- JSON --------------------------------------------------------------------------------------


def _quantity(resource: str, amount: int) -> int | float:
    """cpu in cores (as Kubernetes writes it), every other resource in its base unit."""
    if resource == "cpu":
        return amount // 1000 if amount % 1000 == 0 else amount / 1000
    return amount


def to_json(result: SimResult) -> dict[str, Any]:
    """The ``--output json`` object: pods, summary, nodes, warnings, volumes.

    Node resources are ``{"requested", "allocatable"}`` with cpu in cores (12.5) and every other
    resource in its base unit (memory in bytes, ``nvidia.com/gpu`` in devices).
    ``summary.fragmentation`` is ``{"before": {...}, "after": {...}}`` with the counts of
    :data:`FRAGMENTATION_FIELDS` (all zero without GPU nodes). ``volumes`` lists every
    PersistentVolumeClaim as ``{"claim": "ns/name", "pv", "node", "status": "Bound"|"Pending",
    "provisioned"}`` (``pv``/``node`` null when none). An explained pod (``--explain``,
    ``--explain-pod``) also has ``explain`` (its best nodes, or the first rejecting ones) and
    ``explainVerdicts`` (:func:`~koordsched.backends.sim.attempts.verdict_groups`).
    """
    return {"pods": [_pod_json(p, result.explain) for p in result.pods], **_json_after_pods(result)}


def _pod_json(p: PodResult, explain: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "namespace": p.namespace,
        "name": p.name,
        "node": p.node,
        "status": p.status,
        "message": p.message,
        "annotations": p.annotations,
        "attempts": p.attempts,
    }
    if explain or p.explain is not None:
        entry["explain"] = p.explain if p.explain is not None else []
        # The Filter rejections by verdict, as the table's explanation block lists them.
        entry["explainVerdicts"] = p.verdicts if p.verdicts is not None else []
    return entry


def _node_json(n: NodeUsage) -> dict[str, Any]:
    return {
        "name": n.name,
        "pods": n.pods,
        "maxPods": n.max_pods,
        "unschedulable": n.unschedulable,
        "resources": {
            r: {"requested": _quantity(r, used), "allocatable": _quantity(r, alloc)}
            for r, (used, alloc) in n.resources.items()
        },
    }


def _json_after_pods(result: SimResult, with_nodes: bool = True) -> dict[str, Any]:
    """Every key of :func:`to_json` but ``pods``, in order (``nodes`` empty without ``with_nodes``)."""
    s = result.summary
    summary = {
        "pods": s.pods,
        "scheduled": s.scheduled,
        "unschedulable": s.unschedulable,
        "waiting": s.waiting,
        "preempted": s.preempted,
        "revoked": s.revoked,
        "ignored": s.ignored,
        "nodes": s.nodes,
        "wallSeconds": round(s.wall_seconds, 6),
        "podsPerSecond": round(s.pods_per_second, 1),
        "fragmentation": {
            "before": _fragmentation_json(s.fragmentation.before),
            "after": _fragmentation_json(s.fragmentation.after),
        },
        "gangs": {
            "complete": sum(1 for g in s.gangs if g.complete),
            "incomplete": sum(1 for g in s.gangs if not g.complete),
        },
        "quotas": [_quota_json(q) for q in result.quotas],
    }
    gangs = [
        {
            "name": g.id,
            "minMember": g.min_member,
            "mode": g.mode,
            "members": g.members,
            "bound": g.bound,
            "waiting": g.waiting,
            "complete": g.complete,
            # The network-topology domain its group's plan chose (topology gangs only).
            **({"topologyDomain": g.topology_domain} if g.topology_domain else {}),
        }
        for g in s.gangs
    ]
    if result.missing_defaults:
        # kube-scheduler's default plugins a profile would run that koordsched lacks, by profile.
        summary["notImplemented"] = result.missing_defaults
    out: dict[str, Any] = {
        "summary": summary,
        "nodes": [_node_json(n) for n in result.nodes] if with_nodes else [],
        "gangs": gangs,
        "warnings": list(result.warnings),
    }
    if result.reservations:
        out["reservations"] = [
            {
                "name": r.name,
                "phase": r.phase,
                "node": r.node,
                "owners": r.owners,
                "allocatable": {k: _quantity(k, v) for k, v in sorted(r.allocatable.items())},
                "allocated": {k: _quantity(k, v) for k, v in sorted(r.allocated.items())},
                "remaining": {k: _quantity(k, v) for k, v in sorted(r.remaining.items())},
                "message": r.message,
            }
            for r in result.reservations
        ]
    out["volumes"] = [
        {"claim": v.claim, "pv": v.pv, "node": v.node, "status": v.status, "provisioned": v.provisioned}
        for v in result.volumes
    ]
    return out


def _amounts_json(amounts: dict[str, int]) -> dict[str, int | float]:
    return {r: _quantity(r, amounts[r]) for r in sorted(amounts)}


def _quota_json(q: QuotaSummary) -> dict[str, Any]:
    namespace = q.key.split("/", 1)[0] if q.key else ""
    entry: dict[str, Any] = {
        "name": q.name,
        "namespace": namespace,
        "parent": q.parent,
        "isParent": q.is_parent,
        "min": _amounts_json(q.min),
        "max": _amounts_json(q.max),
        "runtime": _amounts_json(q.runtime),
        "used": _amounts_json(q.used),
        "request": _amounts_json(q.request),
    }
    if q.refusal:
        entry["refused"] = q.refusal
    return entry


def _fragmentation_json(f: Fragmentation) -> dict[str, int | float]:
    return {key: getattr(f, attr) for attr, key, _ in FRAGMENTATION_FIELDS}


def render_json(result: SimResult) -> str:
    out = io.StringIO()
    write_json(result, out)
    return out.getvalue()


def write_json(result: SimResult, out: TextIO) -> None:
    """``json.dumps(to_json(result), indent=2)`` and a newline, written pod by pod and node by
    node: the whole document for 150,000 pods (its dicts and json's list of pieces) would take
    more memory than the scheduler's state. The text is the same, character for character."""
    out.write('{\n  "pods": ')
    _write_list(out, (_pod_json(p, result.explain) for p in result.pods))
    for key, value in _json_after_pods(result, with_nodes=False).items():
        out.write(f",\n  {json.dumps(key)}: ")
        if key == "nodes":
            _write_list(out, (_node_json(n) for n in result.nodes))
        else:
            out.write(_nested(json.dumps(value, indent=2), 1))
    out.write("\n}\n")


def _nested(text: str, levels: int) -> str:
    # JSON strings escape newlines, so every newline in ``text`` is the layout's.
    return text.replace("\n", "\n" + "  " * levels)


def _write_list(out: TextIO, items: Iterable[Any]) -> None:
    """A list one level into the document, as ``json.dumps(..., indent=2)`` lays it out there."""
    first = True
    for item in items:
        out.write("[\n    " if first else ",\n    ")
        out.write(_nested(json.dumps(item, indent=2), 2))
        first = False
    out.write("[]" if first else "\n  ]")


# --- tables ------------------------------------------------------------------------------------


def _num(x: float) -> str:
    """12 -> "12", 12.5 -> "12.5", 0.25 -> "0.25": no trailing zeros, at most two decimals."""
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return text or "0"


def _pct(used: int, total: int) -> str:
    return f"{round(100 * used / total)}%" if total else "-"


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(0, width - 3)] + "..."


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns two spaces apart, like kubectl; the last column is not padded."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = []
    for row in [header, *rows]:
        cells = [c.ljust(widths[i]) for i, c in enumerate(row[:-1])]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return lines


def _gpu(resources: dict[str, tuple[int, int]]) -> str | None:
    """GPUs in use / GPUs on the node, counting every way a pod can ask for them.

    A pod asks with exactly one of ``nvidia.com/gpu`` (cards), ``koordinator.sh/gpu`` (percent
    of a card) or ``koordinator.sh/gpu-core`` (percent of a card's cores, shared GPUs), so the
    three add up without double counting. The node's total is its ``nvidia.com/gpu``, else its
    ``koordinator.sh/gpu`` in cards.
    """
    cards, cards_total = resources.get("nvidia.com/gpu", (0, 0))
    koord, koord_total = resources.get("koordinator.sh/gpu", (0, 0))
    core, _ = resources.get("koordinator.sh/gpu-core", (0, 0))
    total = cards_total or koord_total / _KOORD_GPU_PER_CARD
    used = cards + (koord + core) / _KOORD_GPU_PER_CARD
    if not total and not used:
        return None
    return f"{_num(used)}/{_num(total)}"


def render_table(result: SimResult, width: int | None = None, *, wide: bool = False) -> str:
    """Pods, then node utilisation, then a one-line summary and the GPU fragmentation block, then
    the explanation of each explained pod (:mod:`~koordsched.backends.sim.explain_report`).

    With ``width`` (a terminal's), messages are cut so each pod row fits on one line; without
    (output to a file or a pipe), only messages longer than :data:`MAX_MESSAGE` are cut; with
    ``wide`` (``--wide``) none is.
    """
    rows = [[p.key, p.status, p.node or "-", p.message] for p in result.pods]
    fixed = [
        max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(("NAMESPACE/NAME", "STATUS", "NODE"))
    ]
    msg_width = MAX_MESSAGE
    if wide:
        msg_width = sys.maxsize
    elif width is not None:
        msg_width = max(_MIN_MESSAGE_WIDTH, width - sum(fixed) - 2 * len(fixed))
    for r in rows:
        r[3] = _cut(r[3], msg_width) if r[3] else ""
    out = _table(("NAMESPACE/NAME", "STATUS", "NODE", "MESSAGE"), rows)

    show_gpu = any(_gpu(n.resources) is not None for n in result.nodes)
    header = ["NODE", "PODS", "CPU", "MEMORY (Gi)", *(["GPU"] if show_gpu else [])]
    node_rows = []
    for n in result.nodes:
        cpu_used, cpu_total = n.resources.get("cpu", (0, 0))
        mem_used, mem_total = n.resources.get("memory", (0, 0))
        row = [
            n.name + (" (cordoned)" if n.unschedulable else ""),
            f"{n.pods}/{n.max_pods}" if n.max_pods else str(n.pods),
            f"{_num(cpu_used / 1000)}/{_num(cpu_total / 1000)} ({_pct(cpu_used, cpu_total)})",
            f"{_num(mem_used / _GI)}/{_num(mem_total / _GI)} ({_pct(mem_used, mem_total)})",
        ]
        if show_gpu:
            row.append(_gpu(n.resources) or "-")
        node_rows.append(row)
    out += ["", *_table(header, node_rows), *reservation_block(result, msg_width), *volumes_block(result)]
    out += [*gang_block(result), "", summary_line(result), *fragmentation_block(result)]
    out += quota_block(result)
    out += explain_block(result.pods, result.explain_pods)
    return "\n".join(out) + "\n"


def _amounts(amounts: dict[str, int]) -> str:
    parts = []
    for name, amount in sorted(amounts.items()):
        if name == "memory" or name.endswith("/gpu-memory"):
            parts.append(f"{name}={_num(amount / _GI)}Gi")
        else:
            parts.append(f"{name}={_num(_quantity(name, amount))}")
    return ",".join(parts) or "-"


def reservation_block(result: SimResult, msg_width: int = MAX_MESSAGE) -> list[str]:
    """A blank line and one row per Reservation (phase, node, owners, what it has left); nothing
    without Reservations."""
    if not result.reservations:
        return []
    rows = [
        [
            r.name,
            r.phase,
            r.node or "-",
            ",".join(r.owners) or "-",
            _amounts(r.remaining) if r.phase == "Available" else "-",
            _cut(r.message, msg_width) if r.message else "",
        ]
        for r in result.reservations
    ]
    return ["", *_table(("RESERVATION", "PHASE", "NODE", "OWNERS", "LEFT", "MESSAGE"), rows)]


def volumes_block(result: SimResult) -> list[str]:
    """A blank line, then each PersistentVolumeClaim with its PV and node; nothing without claims."""
    if not result.volumes:
        return []
    rows = [
        [v.claim, v.status, v.pv or "-", v.node or "-", "yes" if v.provisioned else "no"]
        for v in result.volumes
    ]
    return ["", *_table(("CLAIM", "STATUS", "VOLUME", "NODE", "PROVISIONED"), rows)]


def fragmentation_block(result: SimResult) -> list[str]:
    """A blank line, then the GPU fragmentation before and after the run; nothing without GPU nodes."""
    report = result.summary.fragmentation
    if not report.before.gpu_nodes and not report.after.gpu_nodes:
        return []
    rows = [
        [label, str(getattr(report.before, attr)), str(getattr(report.after, attr))]
        for attr, _, label in FRAGMENTATION_FIELDS
    ]
    return ["", *_table(("GPU FRAGMENTATION", "BEFORE", "AFTER"), rows)]


def gang_block(result: SimResult) -> list[str]:
    """A blank line, then one row per gang (Coscheduling); nothing without gangs."""
    gangs = result.summary.gangs
    if not gangs:
        return []
    # The DOMAIN column only when some gang was placed by network topology.
    topology = any(g.topology_domain for g in gangs)
    rows = [
        [
            g.id,
            "-" if g.min_member is None else str(g.min_member),
            str(g.members),
            str(g.bound),
            str(g.waiting),
            "Complete" if g.complete else "Incomplete",
            *([g.topology_domain or "-"] if topology else []),
        ]
        for g in gangs
    ]
    header = ("GANG", "MIN", "MEMBERS", "BOUND", "WAITING", "STATUS", *(("DOMAIN",) if topology else ()))
    return ["", *_table(header, rows)]


def quota_block(result: SimResult) -> list[str]:
    """A blank line, then each ElasticQuota's used, runtime and max (as Koordinator prints resource
    lists); nothing without ElasticQuota objects. A refused quota shows ``refused`` (the reason is
    among the warnings)."""
    if not result.quotas:
        return []
    rows = [
        [
            q.name,
            "-" if q.parent == "koordinator-root-quota" or not q.key else q.parent,
            resource_list(q.used) or "-",
            "refused" if q.refusal else (resource_list(q.runtime) or "-"),
            resource_list(q.max) or "-",
        ]
        for q in result.quotas
    ]
    return ["", *_table(("ELASTIC QUOTA", "PARENT", "USED", "RUNTIME", "MAX"), rows)]


def summary_line(result: SimResult) -> str:
    s = result.summary
    parts = [f"{s.scheduled} scheduled", f"{s.unschedulable} unschedulable"]
    if s.waiting:
        parts.append(f"{s.waiting} waiting")
    if s.preempted:
        parts.append(f"{s.preempted} preempted")
    if s.revoked:
        parts.append(f"{s.revoked} revoked")
    ignored = f", {s.ignored} ignored (other schedulers)" if s.ignored else ""
    gangs = ""
    if s.gangs:
        complete = sum(1 for g in s.gangs if g.complete)
        noun = "gang" if len(s.gangs) == 1 else "gangs"
        gangs = f"; {len(s.gangs)} {noun}: {complete} complete, {len(s.gangs) - complete} incomplete"
    return (
        f"{s.pods} pods: {', '.join(parts)}{ignored}{gangs}; {s.nodes} nodes; "
        f"{s.wall_seconds:.3f}s ({s.pods_per_second:.0f} pods/s)"
    )
