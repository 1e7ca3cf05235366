"""PodTopologySpreadArgs: defaulting and ValidatePodTopologySpreadArgs' messages, and the config path."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from koordsched.config.catalog import ArgsError
from koordsched.config.errors import ConfigError
from koordsched.config.load import load_config
from koordsched.plugins.podtopologyspread import PodTopologySpreadArgs
from koordsched.plugins.podtopologyspread.args import SYSTEM_DEFAULT_CONSTRAINTS
from koordsched.plugins.registry import in_tree_registry


def args(raw: dict[str, Any]) -> PodTopologySpreadArgs:
    return msgspec.convert(raw, PodTopologySpreadArgs)


def error(raw: dict[str, Any]) -> str:
    with pytest.raises(ArgsError) as exc:
        args(raw).validate()
    return str(exc.value)


ZONE = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}


def test_defaulting_type_defaults_to_system() -> None:
    a = args({})
    assert a.defaulting_type == "System" and a.system_defaulted
    a.validate()
    got = [(c.topology_key, c.max_skew, c.when_unsatisfiable) for c in a.constraints()]
    assert got == [
        ("kubernetes.io/hostname", 3, "ScheduleAnyway"),
        ("topology.kubernetes.io/zone", 5, "ScheduleAnyway"),
    ]
    assert a.constraints() is SYSTEM_DEFAULT_CONSTRAINTS


def test_list_takes_the_given_constraints_and_may_be_empty() -> None:
    a = args({"defaultingType": "List", "defaultConstraints": [ZONE]})
    a.validate()
    assert [(c.topology_key, c.max_skew) for c in a.constraints()] == [("zone", 1)]
    empty = args({"defaultingType": "List"})
    empty.validate()
    assert empty.constraints() == ()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"defaultingType": "Nope"},
            'defaultingType: Unsupported value: "Nope": supported values: "System", "List"',
        ),
        (
            {"defaultingType": "System", "defaultConstraints": [ZONE]},
            'defaultingType: Invalid value: "System": when .defaultConstraints are not empty',
        ),
        (
            {"defaultingType": "List", "defaultConstraints": [{**ZONE, "maxSkew": 0}]},
            "defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)",
        ),
        (
            {"defaultingType": "List", "defaultConstraints": [{**ZONE, "topologyKey": ""}]},
            "defaultConstraints[0].topologyKey: Required value: can not be empty",
        ),
        (
            {"defaultingType": "List", "defaultConstraints": [{**ZONE, "topologyKey": "a b"}]},
            'defaultConstraints[0].topologyKey: Invalid value: "a b": name part must consist of '
            "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
            "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
        (
            {"defaultingType": "List", "defaultConstraints": [{**ZONE, "whenUnsatisfiable": ""}]},
            "defaultConstraints[0].whenUnsatisfiable: Required value: can not be empty",
        ),
        (
            {"defaultingType": "List", "defaultConstraints": [{**ZONE, "whenUnsatisfiable": "Later"}]},
            'defaultConstraints[0].whenUnsatisfiable: Unsupported value: "Later": supported values: '
            '"DoNotSchedule", "ScheduleAnyway"',
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [{**ZONE, "labelSelector": {"matchLabels": {"a": "b"}}}],
            },
            "defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector, "
            "as they deduced for each pod",
        ),
        (
            {"defaultingType": "List", "defaultConstraints": [ZONE, {**ZONE, "maxSkew": 2}]},
            'defaultConstraints[1]: Duplicate value: "{zone, DoNotSchedule}"',
        ),
        # Beyond upstream (which would read the typo as Ignore): named, not silently misread.
        (
            {"defaultingType": "List", "defaultConstraints": [{**ZONE, "nodeTaintsPolicy": "honor"}]},
            'defaultConstraints[0].nodeTaintsPolicy: Unsupported value: "honor": supported values: '
            '"Honor", "Ignore"',
        ),
        (
            {"defaultingType": "List", "defaultConstraints": [{**ZONE, "minDomains": 0}]},
            "defaultConstraints[0].minDomains: Invalid value: 0: must be greater than zero",
        ),
    ],
)
def test_validation_messages(raw: dict[str, Any], message: str) -> None:
    assert error(raw) == message


def test_several_errors_are_aggregated() -> None:
    raw = {
        "defaultingType": "List",
        "defaultConstraints": [{"maxSkew": -1, "topologyKey": "", "whenUnsatisfiable": "X"}],
    }
    assert error(raw) == (
        "[defaultConstraints[0].maxSkew: Invalid value: -1: not in valid range (0, inf), "
        "defaultConstraints[0].topologyKey: Required value: can not be empty, "
        'defaultConstraints[0].whenUnsatisfiable: Unsupported value: "X": supported values: '
        '"DoNotSchedule", "ScheduleAnyway"]'
    )


def test_unknown_fields_are_refused_as_the_config_is_strict() -> None:
    with pytest.raises(msgspec.ValidationError):
        args({"defaultingType": "List", "defaultConstraints": [{**ZONE, "maxSkeww": 1}]})
    with pytest.raises(msgspec.ValidationError):
        args({"defaultingtype": "List"})


def test_profile_with_bad_args_fails_to_load_naming_the_plugin() -> None:
    raw = b"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: koord-scheduler
    pluginConfig:
      - name: PodTopologySpread
        args:
          defaultingType: List
          defaultConstraints:
            - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {}}
"""
    with pytest.raises(ConfigError) as exc:
        load_config(raw, in_tree_registry())
    assert "PodTopologySpreadArgs" in str(exc.value)
    assert "defaultConstraints[0].labelSelector: Forbidden" in str(exc.value)


def test_profile_with_list_defaults_loads() -> None:
    raw = b"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: koord-scheduler
    pluginConfig:
      - name: PodTopologySpread
        args:
          defaultingType: List
          defaultConstraints:
            - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
"""
    config = load_config(raw, in_tree_registry())
    (profile,) = config.profiles
    got = profile.args["PodTopologySpread"]
    assert isinstance(got, PodTopologySpreadArgs)
    assert not got.system_defaulted and got.constraints()[0].when_unsatisfiable == "DoNotSchedule"
    # kube-scheduler's default set runs the plugin at preFilter, filter, preScore and score (weight 2).
    assert ("PodTopologySpread", 2) in profile.points["score"]
    assert any(name == "PodTopologySpread" for name, _ in profile.points["filter"])
