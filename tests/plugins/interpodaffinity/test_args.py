"""InterPodAffinityArgs: defaults and validation messages as kube-scheduler's; the plugin's registration."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from koordsched.api.kinds import NAMESPACES
from koordsched.config.catalog import ArgsError
from koordsched.config.errors import ConfigError
from koordsched.config.load import load_config
from koordsched.framework.types import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    ASSIGNED_POD_UPDATE,
    NODE_ADD,
    NODE_UPDATE,
)
from koordsched.plugins.interpodaffinity import InterPodAffinity, InterPodAffinityArgs
from koordsched.plugins.registry import in_tree_registry
from tests.fakes import FakeHandle


def decode(fields: dict[str, Any]) -> InterPodAffinityArgs:
    return msgspec.convert(fields, InterPodAffinityArgs)


def test_defaults() -> None:
    args = InterPodAffinityArgs()
    assert args.hard_pod_affinity_weight == 1
    assert args.ignore_preferred_terms_of_existing_pods is False
    args.validate()


@pytest.mark.parametrize("weight", [0, 1, 100])
def test_weight_range_edges(weight: int) -> None:
    args = decode({"hardPodAffinityWeight": weight, "ignorePreferredTermsOfExistingPods": True})
    args.validate()
    assert args.hard_pod_affinity_weight == weight


@pytest.mark.parametrize("weight", [-1, 101, 2**31])
def test_weight_out_of_range(weight: int) -> None:
    with pytest.raises(ArgsError) as info:
        decode({"hardPodAffinityWeight": weight}).validate()
    assert str(info.value) == f"hardPodAffinityWeight: Invalid value: {weight}: not in valid range [0-100]"


def test_plugin_refuses_invalid_args() -> None:
    with pytest.raises(ArgsError, match="hardPodAffinityWeight"):
        InterPodAffinity(decode({"hardPodAffinityWeight": 200}), FakeHandle())


def _profile(args: str) -> bytes:
    return f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  plugins:
    multiPoint:
      enabled: [{{name: InterPodAffinity, weight: 2}}]
  pluginConfig:
  - name: InterPodAffinity
    args: {args}
""".encode()


def test_args_through_the_profile() -> None:
    config = load_config(
        _profile("{hardPodAffinityWeight: 5, ignorePreferredTermsOfExistingPods: true}"), in_tree_registry()
    )
    args = config.profiles[0].args["InterPodAffinity"]
    assert isinstance(args, InterPodAffinityArgs)
    assert args.hard_pod_affinity_weight == 5
    assert args.ignore_preferred_terms_of_existing_pods is True


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (
            "{hardPodAffinityWeight: 101}",
            "hardPodAffinityWeight: Invalid value: 101: not in valid range [0-100]",
        ),
        ("{hardPodAffinityWeight: heavy}", "Expected `int`, got `str`"),
        ("{weight: 3}", "unknown field `weight`"),
    ],
)
def test_bad_args_in_the_profile(args: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(_profile(args), in_tree_registry())
    assert fragment in str(info.value)
    assert "InterPodAffinityArgs" in str(info.value)


def test_registered_with_its_points_and_the_namespace_kind() -> None:
    spec = in_tree_registry()["InterPodAffinity"]
    assert spec.args_type is InterPodAffinityArgs
    assert spec.points == frozenset({"preFilter", "filter", "preScore", "score"})
    assert spec.kinds == (NAMESPACES,)
    assert spec.warm_up is not None
    events = {e.event for e in InterPodAffinity(None, FakeHandle()).events_to_register()}
    assert {ASSIGNED_POD_ADD, ASSIGNED_POD_UPDATE, ASSIGNED_POD_DELETE, NODE_ADD, NODE_UPDATE} <= events
    assert {e.label for e in events if e.resource == "Namespace"} == {
        "NamespaceAdd",
        "NamespaceUpdate",
        "NamespaceDelete",
    }
