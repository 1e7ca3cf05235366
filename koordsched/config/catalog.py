"""What the config loader needs to know about plugins, without depending on the framework.

Plugin args types and their base live here (config sits below the framework); the
framework's ``Registry`` satisfies :class:`PluginCatalog`, so resolving a profile needs
only this small view of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import msgspec


class ArgsError(ValueError):
    """Invalid plugin args; the message names the field (``NodeResourcesFitArgs.scoringStrategy...``)."""


class PluginArgs(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """Base of every ``<Plugin>Args`` kind.

    ``apiVersion`` and ``kind`` may be given, as Koordinator's chart does; the loader
    checks ``kind`` against the plugin's name. Unknown fields are errors, matching the
    strict decoding of kube-scheduler's config.
    """

    api_version: str | None = None
    kind: str | None = None

    def validate(self) -> None:
        """Raise :class:`ArgsError` naming the offending field. Default: nothing to check."""


class PluginEntry(Protocol):
    """One plugin as the config sees it: its name, args type and extension points."""

    @property
    def name(self) -> str: ...
    @property
    def args_type(self) -> type[PluginArgs] | None: ...
    @property
    def points(self) -> frozenset[str]: ...
    def default_args(self) -> PluginArgs | None: ...


class PluginCatalog(Protocol):
    """The plugins a profile may name (``koordsched.framework.registry.Registry``)."""

    def get(self, name: str) -> PluginEntry | None: ...
    def __getitem__(self, name: str) -> PluginEntry: ...
    def __contains__(self, name: object) -> bool: ...
    def names(self) -> Iterable[str]: ...
