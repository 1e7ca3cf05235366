"""Small arg types several descheduler plugins share (Koordinator's ``Namespaces``)."""

from __future__ import annotations

import msgspec


class _Part(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    pass


class Namespaces(_Part):
    include: list[str] = []
    exclude: list[str] = []

    def admits(self, namespace: str) -> bool:
        if self.include:
            return namespace in self.include
        return namespace not in self.exclude


def namespaces_errors(path: str, ns: Namespaces | None) -> list[str]:
    if ns is not None and ns.include and ns.exclude:
        value = f"{{include: {ns.include}, exclude: {ns.exclude}}}"
        return [f"{path}: Invalid value: {value}: only one of Include/Exclude namespaces can be set"]
    return []
