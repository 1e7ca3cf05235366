"""One ``pluginConfig`` entry's args decoded into its plugin's ``<Name>Args`` Struct.

The scheduler's and the descheduler's config loaders both decode args this way; they
differ only in the plugins they know (their catalogs), the wording of an unknown name and
the config versions an args document may state, which the caller passes in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import msgspec

from koordsched.config.catalog import ArgsError, PluginArgs
from koordsched.config.errors import ConfigError

#: Fields every args document may carry whatever its kind.
TYPE_META = ("apiVersion", "kind")


class ArgsEntry(Protocol):
    """A ``pluginConfig`` entry: a plugin's name and its args, still undecoded."""

    @property
    def name(self) -> str: ...
    @property
    def args(self) -> Mapping[str, Any] | None: ...


class ArgsSpec(Protocol):
    """What the decoder needs of a plugin: its args Struct (None: it takes no args)."""

    @property
    def args_type(self) -> type[PluginArgs] | None: ...


class ArgsCatalog(Protocol):
    def get(self, name: str) -> ArgsSpec | None: ...


def args_kind(plugin: str) -> str:
    return f"{plugin}Args"


def decode_plugin_args(
    entry: ArgsEntry,
    here: str,
    catalog: ArgsCatalog,
    *,
    versions: Sequence[str],
    unknown: Callable[[str], str],
) -> PluginArgs | None:
    """``entry``'s args, decoded strictly and validated; None for a plugin without args.

    ``here`` is the entry's path in the config (``profiles[0].pluginConfig[2]``),
    ``versions`` the ``apiVersion`` values allowed, ``unknown`` the message for a name
    ``catalog`` lacks.
    """
    spec = catalog.get(entry.name)
    if spec is None:
        raise ConfigError(f"{here}.name", unknown(entry.name))
    raw: Mapping[str, Any] = entry.args or {}
    kind = args_kind(entry.name)
    if "kind" in raw and raw["kind"] != kind:
        raise ConfigError(
            f"{here}.args.kind", f'must be "{kind}" for plugin "{entry.name}", got "{raw["kind"]}"'
        )
    if "apiVersion" in raw and raw["apiVersion"] not in versions:
        wanted = " or ".join(f'"{v}"' for v in versions)
        raise ConfigError(f"{here}.args.apiVersion", f'must be {wanted}, got "{raw["apiVersion"]}"')
    if spec.args_type is None:
        extra = sorted(str(key) for key in raw if key not in TYPE_META)
        if extra:
            raise ConfigError(f"{here}.args", f'plugin "{entry.name}" takes no args, got field `{extra[0]}`')
        return None
    label = f"{here}.args ({kind})"
    try:
        args = msgspec.convert(raw, spec.args_type)
    except msgspec.ValidationError as exc:
        raise ConfigError(label, str(exc)) from exc
    validate_args(args, label)
    return args


def validate_args(args: PluginArgs, where: str, what: str | None = None) -> None:
    """``args.validate()``, its error as a :class:`ConfigError` at ``where``.

    ``what`` (``default NodeResourcesFitArgs``) prefixes the message when the args are not
    the user's own, so that the error says they are the defaults.
    """
    try:
        args.validate()
    except ArgsError as exc:
        detail = str(exc) if what is None else f"{what} are invalid: {exc}"
        raise ConfigError(where, detail) from exc
