"""``--explain`` in the table output: a block per explained pod, after the tables.

A pod gets a block when it did not schedule (with ``--explain``) or when ``--explain-pod`` named
it. The block holds what the JSON output's ``explainVerdicts`` and ``explain`` hold, laid out for a
person: the Filter rejections grouped by verdict (one row per plugin, code and reasons, with the
nodes that got it; "all N nodes" when a PreFilter plugin refused the pod before any node was
looked at), then the best nodes' weighted scores per Score plugin and their totals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from koordsched.backends.sim.results import SCHEDULED, PodResult

#: Separates a verdict's reasons in the table (the JSON output keeps them as a list).
REASON_SEPARATOR = "; "


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str) -> list[str]:
    # The report's table layout (two spaces between columns), indented under the pod's heading.
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = []
    for row in [header, *rows]:
        cells = [c.ljust(widths[i]) for i, c in enumerate(row[:-1])]
        lines.append((indent + "  ".join([*cells, row[-1]])).rstrip())
    return lines


def verdict_nodes(group: dict[str, Any]) -> str:
    """The NODES cell of a verdict row: "all 3 nodes", "1 node: a", "25 nodes: a, b, ... (+5)"."""
    count = int(group["count"])
    noun = "node" if count == 1 else "nodes"
    if group.get("allNodes"):
        return f"all {count} {noun}"
    names: list[str] = list(group.get("nodes", []))
    more = count - len(names)
    return f"{count} {noun}: {', '.join(names)}" + (f" (+{more})" if more > 0 else "")


def verdict_row(group: dict[str, Any]) -> list[str]:
    """STAGE, PLUGIN, CODE, REASONS, NODES of one verdict group."""
    reasons = REASON_SEPARATOR.join(group.get("reasons", [])) or "-"
    return [group["stage"], group["plugin"] or "-", group["code"], reasons, verdict_nodes(group)]


def score_rows(nodes: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The best nodes' scores, one column per node (best first): a row per Score plugin with its
    weight and weighted score on each node, then TOTAL (their sum, the node's total score)."""
    scored = [n for n in nodes if n.get("feasible") and "scores" in n]
    plugins: dict[str, int] = {}
    for n in scored:
        for name, entry in n["scores"].items():
            plugins.setdefault(name, int(entry["weight"]))
    header = ["PLUGIN", "WEIGHT", *(n["node"] for n in scored)]
    rows = [
        [p, str(w), *(str(n["scores"][p]["weighted"]) if p in n["scores"] else "-" for n in scored)]
        for p, w in plugins.items()
    ]
    if scored:
        rows.append(["TOTAL", "", *(str(n["totalScore"]) for n in scored)])
    return header, rows


def _not_passed(nodes: list[dict[str, Any]]) -> list[str]:
    """Filters skipped on the best nodes (PreFilter said they have nothing to check)."""
    skipped: list[str] = []
    for n in nodes:
        for name, verdict in n.get("filters", {}).items():
            if verdict.get("code") == "Skip" and name not in skipped:
                skipped.append(name)
    return skipped


def pod_block(p: PodResult) -> list[str]:
    """A blank line, the pod's heading, its verdicts and its best nodes' scores."""
    where = f" on {p.node}" if p.status == SCHEDULED and p.node else ""
    out = ["", f"EXPLAIN {p.key}: {p.status}{where} ({p.attempts} attempt{'s' if p.attempts != 1 else ''})"]
    if p.message:
        out.append(f"  {' '.join(p.message.split())}")
    verdicts = p.verdicts or []
    nodes = p.explain or []
    if verdicts:
        out.append("  Filter verdicts:")
        out += _table(
            ("STAGE", "PLUGIN", "CODE", "REASONS", "NODES"), [verdict_row(g) for g in verdicts], "    "
        )
    header, rows = score_rows(nodes)
    if rows:
        out.append("  Best nodes (every Filter passed), weighted scores:")
        out += _table(header, rows, "    ")
        skipped = _not_passed(nodes)
        if skipped:
            out.append(f"    Filters skipped (nothing to check): {', '.join(skipped)}")
    if not verdicts and not rows:
        out.append("  No scheduling cycle ran for it (held before the queue, or never attempted).")
    return out


def explain_block(pods: Sequence[PodResult], explain_pods: frozenset[str]) -> list[str]:
    """A block per explained pod that did not schedule, or that ``--explain-pod`` named."""
    out: list[str] = []
    for p in pods:
        if p.explain is None:
            continue
        if p.status != SCHEDULED or p.key in explain_pods:
            out += pod_block(p)
    return out
