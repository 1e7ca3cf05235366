"""docs/deploy.md's metrics table lists exactly what /metrics exports, with the same labels."""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

from koordsched.observability.metrics import SchedulerMetrics
from tests.e2e.apiserver import REPO_ROOT
from tests.unit.test_metrics import _record_all

DOC = REPO_ROOT / "docs" / "deploy.md"
MARKER = "<!-- metrics-list:"
_ROW = re.compile(r"^\| `([a-z0-9_:]+)` \|([^|]+)\|([^|]*)\|")


def documented() -> dict[str, set[str]]:
    """Family (as in its ``# TYPE`` line) -> the labels the table gives it."""
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(MARKER))
    rows: dict[str, set[str]] = {}
    for line in lines[start + 1 :]:
        if rows and not line.startswith("|"):
            break
        m = _ROW.match(line)
        if m is not None:
            rows[m.group(1)] = set(re.findall(r"`([A-Za-z_]+)`", m.group(3)))
    return rows


def exported() -> dict[str, set[str]]:
    """Family -> label names (``le`` aside) from a scrape where every recorder has run."""
    metrics = SchedulerMetrics(process_metrics=True)
    _record_all(metrics)
    text = metrics.exposition().decode()
    families: dict[str, set[str]] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            families[line.split()[2]] = set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = next((n for n in (family.name, f"{family.name}_total") if n in families), family.name)
            families[name].update(k for k in sample.labels if k != "le")
    return families


def test_the_table_names_every_exported_family_and_nothing_else() -> None:
    docs, ours = documented(), exported()
    assert len(docs) > 30, "the metrics table was not found"
    assert sorted(set(ours) - set(docs)) == [], "exported but not in docs/deploy.md"
    assert sorted(set(docs) - set(ours)) == [], "in docs/deploy.md but not exported"


def test_the_table_gives_each_family_its_labels() -> None:
    ours = exported()
    for name, labels in documented().items():
        assert labels == ours[name], name
