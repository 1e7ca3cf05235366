"""ElasticQuotaArgs: defaults, validation, and the chart profile's ElasticQuota entries loading
with the real registry (spec 4.5 "Args", 5.1)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from koordsched.config.catalog import ArgsError
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import load_config
from koordsched.plugins.elasticquota import ElasticQuotaArgs
from koordsched.plugins.elasticquota.args import DEFAULT_GROUP_MAX
from koordsched.plugins.registry import in_tree_registry
from tests.unit.test_config import KOORD_CHART

REGISTRY = in_tree_registry()
CHART_EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "profiles" / "koordinator-chart.yaml"


def test_defaults() -> None:
    args = ElasticQuotaArgs()
    assert args.delay_evict_time == "120s" and args.revoke_pod_interval == "1s"
    assert args.quota_group_namespace == "koordinator-system"
    assert args.runtime_enabled and not args.check_parent and args.monitor_all_quotas is False
    assert args.default_max() == {"cpu": DEFAULT_GROUP_MAX * 1000, "memory": DEFAULT_GROUP_MAX}
    assert args.system_max() == args.default_max()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"delayEvictTime": "-1s"},
            'delayEvictTime: Invalid value: "-1s": delayEvictTime should be a positive value',
        ),
        ({"revokePodInterval": "soon"}, 'revokePodInterval: Invalid value: "soon": '),
        (
            {"defaultQuotaGroupMax": {"cpu": "-2"}},
            'defaultQuotaGroupMax[cpu]: Invalid value: "-2": quantity should be a positive value',
        ),
        ({"systemQuotaGroupMax": {"memory": "lots"}}, 'systemQuotaGroupMax[memory]: Invalid value: "lots": '),
    ],
)
def test_validation(raw: dict[str, object], message: str) -> None:
    args = msgspec.convert(raw, ElasticQuotaArgs)
    with pytest.raises(ArgsError) as err:
        args.validate()
    assert str(err.value).startswith(message)


def test_unknown_field_is_refused() -> None:
    with pytest.raises(msgspec.ValidationError, match="quotaGroupNamespaces"):
        msgspec.convert({"quotaGroupNamespaces": "x"}, ElasticQuotaArgs)


def test_default_profile_enables_elastic_quota_as_the_chart_does() -> None:
    (profile,) = load_config(default_profile_path(), REGISTRY).profiles
    assert ("ElasticQuota", 1) in profile.points["preFilter"]
    assert ("ElasticQuota", 1) in profile.points["reserve"]
    # Quota-aware preemption is in the chart example profile, before DefaultPreemption.
    assert ("ElasticQuota", 1) not in profile.points["postFilter"]
    (chart,) = load_config(CHART_EXAMPLE, REGISTRY).profiles
    assert [name for name, _ in chart.points["postFilter"]] == [
        "Reservation",
        "Coscheduling",
        "ElasticQuota",
        "DefaultPreemption",
    ]
    args = profile.args["ElasticQuota"]
    assert isinstance(args, ElasticQuotaArgs) and args.quota_group_namespace == "koordinator-system"


def test_chart_profile_loads_with_elastic_quota() -> None:
    (profile,) = load_config(KOORD_CHART.encode(), REGISTRY).profiles
    assert ("ElasticQuota", 1) in profile.points["preFilter"]
    args = profile.args["ElasticQuota"]
    assert isinstance(args, ElasticQuotaArgs)
