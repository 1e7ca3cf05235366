"""The Reservation plugin in the profiles: the shipped default and Koordinator's chart entries (spec 5.1)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from koordsched.config.default_profile import default_profile_path
from koordsched.config.errors import ConfigError
from koordsched.config.load import load_config
from koordsched.plugins.registry import in_tree_registry
from koordsched.plugins.reservation import ReservationArgs
from tests.unit.test_config import KOORD_CHART

#: Koordinator's chart plugins still missing here (built elsewhere at the same time).
MISSING = {"Coscheduling", "ElasticQuota", "DefaultPreemption"}


def without_missing(doc: dict[str, Any]) -> dict[str, Any]:
    for profile in doc["profiles"]:
        profile["pluginConfig"] = [c for c in profile.get("pluginConfig", []) if c["name"] not in MISSING]
        for entries in (profile.get("plugins") or {}).values():
            for key in ("enabled", "disabled"):
                if key in entries:
                    entries[key] = [e for e in entries[key] if e["name"] not in MISSING]
        # The chart's queue sort is Coscheduling's: without it, the default one.
        profile["plugins"].pop("queueSort", None)
    return doc


def test_default_profile_enables_reservation_where_the_chart_does() -> None:
    (profile,) = load_config(default_profile_path(), in_tree_registry()).profiles
    for point in ("preFilter", "filter", "postFilter", "preScore", "reserve", "preBind", "bind"):
        assert "Reservation" in profile.plugins_at(point), point
    assert ("Reservation", 5000) in profile.points["score"]
    assert profile.plugins_at("bind") == ["Reservation", "DefaultBinder"]
    # Before DeviceShare and NodeNUMAResource at Reserve: they read the reservation it chose.
    # (VolumeBinding, a multiPoint default, comes first as kube-scheduler orders them.)
    reserve = profile.plugins_at("reserve")
    assert reserve.index("Reservation") < min(reserve.index("DeviceShare"), reserve.index("NodeNUMAResource"))
    assert isinstance(profile.args["Reservation"], ReservationArgs)


def test_chart_profile_reservation_entries_load_as_the_real_plugin() -> None:
    text = yaml.safe_dump(without_missing(yaml.safe_load(KOORD_CHART)))
    (profile,) = load_config(text.encode(), in_tree_registry()).profiles
    assert profile.plugins_at("bind") == ["Reservation", "DefaultBinder"]
    assert "Reservation" in profile.plugins_at("preFilter")
    assert profile.plugins_at("postFilter") == ["Reservation"]
    assert profile.plugins_at("preScore")[-1] == "Reservation"
    assert ("Reservation", 5000) in profile.points["score"]
    reserve = profile.plugins_at("reserve")
    assert reserve.index("Reservation") < min(reserve.index("DeviceShare"), reserve.index("NodeNUMAResource"))
    assert profile.plugins_at("preBind") == [
        "VolumeBinding",
        "NodeNUMAResource",
        "DeviceShare",
        "Reservation",
        "DefaultPreBind",
    ]


def test_the_full_chart_loads_unchanged() -> None:
    """Koordinator's chart profile (spec 5.1), as shipped: every plugin in it is the real one."""
    (profile,) = load_config(KOORD_CHART.encode(), in_tree_registry()).profiles
    assert profile.plugins_at("queueSort") == ["Coscheduling"]
    assert profile.plugins_at("postFilter") == [
        "Reservation",
        "Coscheduling",
        "ElasticQuota",
        "DefaultPreemption",
    ]
    assert profile.plugins_at("bind") == ["Reservation", "DefaultBinder"]
    assert profile.plugins_at("permit") == ["Coscheduling"]
    assert ("Reservation", 5000) in profile.points["score"]


def _reservation_args(args: str) -> str:
    return f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: koord-scheduler
    pluginConfig:
      - name: Reservation
        args: {{apiVersion: kubescheduler.config.k8s.io/v1, kind: ReservationArgs, {args}}}
    plugins:
      preFilter: {{enabled: [{{name: Reservation}}]}}
"""


def test_enable_preemption_loads() -> None:
    (profile,) = load_config(
        _reservation_args("enablePreemption: true").encode(), in_tree_registry()
    ).profiles
    assert "Reservation" in profile.plugins_at("preFilter")


def test_enable_preemption_with_both_candidate_counts_zero_is_refused() -> None:
    text = _reservation_args(
        "enablePreemption: true, minCandidateNodesPercentage: 0, minCandidateNodesAbsolute: 0"
    )
    with pytest.raises(ConfigError) as info:
        load_config(text.encode(), in_tree_registry())
    message = str(info.value)
    assert "minCandidateNodesPercentage" in message
    assert "cannot be zero at the same time as minCandidateNodesAbsolute" in message
