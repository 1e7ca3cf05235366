"""Koordinator's chart profile (spec 5.1) with the real plugins: Coscheduling runs where the chart
puts it (tests/plugins/reservation/test_profile.py loads the whole chart unchanged)."""

from __future__ import annotations

import yaml

from koordsched.config.load import load_config
from koordsched.plugins.coscheduling import CoschedulingArgs
from koordsched.plugins.registry import in_tree_registry
from tests.unit.test_config import KOORD_CHART

#: Plugins of the chart other workers' issues add (Reservation, ElasticQuota, DefaultPreemption).
NOT_YET = {
    name for name in ("Reservation", "ElasticQuota", "DefaultPreemption") if name not in in_tree_registry()
}


def test_the_chart_without_the_missing_plugins_runs_coscheduling_where_the_chart_puts_it() -> None:
    doc = yaml.safe_load(KOORD_CHART)
    plugins = doc["profiles"][0]["plugins"]
    for point in plugins.values():
        point["enabled"] = [e for e in point.get("enabled", []) if e["name"] not in NOT_YET]
    doc["profiles"][0]["pluginConfig"] = [
        c for c in doc["profiles"][0]["pluginConfig"] if c["name"] not in NOT_YET
    ]
    cfg = load_config(yaml.safe_dump(doc).encode(), in_tree_registry())
    (profile,) = cfg.profiles
    at = {point: [name for name, _ in entries] for point, entries in profile.points.items()}
    assert at["queueSort"] == ["Coscheduling"]
    for point in ("preFilter", "postFilter", "reserve", "permit", "postBind"):
        assert "Coscheduling" in at[point], point
    # The chart leaves PreEnqueue to the defaults (spec 5.1, quirk 17).
    assert "Coscheduling" not in at.get("preEnqueue", [])
    assert profile.args["Coscheduling"] == CoschedulingArgs()


def test_the_default_profile_gates_gangs_at_pre_enqueue() -> None:
    from koordsched.config.default_profile import default_profile_path

    cfg = load_config(default_profile_path().read_bytes(), in_tree_registry())
    (profile,) = cfg.profiles
    at = {point: [name for name, _ in entries] for point, entries in profile.points.items()}
    assert at["queueSort"] == ["Coscheduling"]
    for point in ("preEnqueue", "preFilter", "postFilter", "reserve", "permit", "postBind"):
        assert "Coscheduling" in at[point], point
