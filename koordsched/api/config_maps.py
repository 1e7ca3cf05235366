"""The ConfigMap, as far as plugins read one: its ``data`` strings (DeviceShare's vNPU templates)."""

from __future__ import annotations

import msgspec

from koordsched.api.core import ObjectMeta


class ConfigMap(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    data: dict[str, str] = {}
