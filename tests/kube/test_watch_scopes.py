"""Kinds of which a plugin reads one object are watched alone: DeviceShare's vNPU templates' ConfigMap.

Every profile's DeviceShare naming the same ConfigMap: its namespace's collection, filtered by name;
readers that disagree (or one reading the kind whole): every ConfigMap, as the RBAC grants allow.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from koordsched.api.kinds import CONFIG_MAPS
from koordsched.backends.kube.kinds import plugin_kinds, resource_kind
from koordsched.plugins.deviceshare import DeviceShare, DeviceShareArgs
from koordsched.plugins.registry import in_tree_registry
from tests.fakes import FakeHandle

DEFAULT = ("koordinator-system", "gpu-shared-resource-templates")


def device_share(**config: str) -> DeviceShare:
    args = msgspec.convert({"gpuSharedResourceTemplatesConfig": config}, DeviceShareArgs)
    return DeviceShare(args, FakeHandle())


@pytest.mark.parametrize(
    ("case", "profiles", "scopes"),
    [
        ("one profile, the defaults", [{"DeviceShare": device_share()}], {"ConfigMap": DEFAULT}),
        (
            "two profiles naming the same ConfigMap",
            [
                {"DeviceShare": device_share(configMapNamespace="ai")},
                {"DeviceShare": device_share(configMapNamespace="ai")},
            ],
            {"ConfigMap": ("ai", "gpu-shared-resource-templates")},
        ),
        (
            "two profiles naming different ConfigMaps: every ConfigMap",
            [{"DeviceShare": device_share()}, {"DeviceShare": device_share(configMapName="other")}],
            {},
        ),
        (
            "a profile without DeviceShare reads no ConfigMap",
            [{"DeviceShare": device_share()}, {}],
            {"ConfigMap": DEFAULT},
        ),
        ("no reader", [{}], {}),
    ],
)
def test_scopes_over_profiles(case: str, profiles: list[dict[str, Any]], scopes: dict[str, Any]) -> None:
    assert in_tree_registry().watch_scopes(profiles) == scopes, case


def test_a_scoped_kind_watches_its_namespace_by_name() -> None:
    kind = resource_kind(CONFIG_MAPS, ("DeviceShare",), ("ai", "vnpu"))
    assert (kind.path, kind.field_selector) == ("/api/v1/namespaces/ai/configmaps", "metadata.name=vnpu")
    whole = resource_kind(CONFIG_MAPS, ("DeviceShare",))
    assert (whole.path, whole.field_selector) == ("/api/v1/configmaps", "")
    (scoped,) = [
        k for k in plugin_kinds(in_tree_registry(), {"ConfigMap": ("ai", "vnpu")}) if k.kind == "ConfigMap"
    ]
    assert scoped.path == "/api/v1/namespaces/ai/configmaps" and scoped.readers == ("DeviceShare",)
