"""Text -> :class:`KubeSchedulerConfiguration`, as strictly as kube-scheduler decodes it.

Upstream decodes with ``serializer.EnableStrict``: duplicate keys and unknown fields are
errors. PyYAML silently keeps the last of two equal keys, so a SafeLoader subclass
refuses them; msgspec's ``forbid_unknown_fields`` covers the rest. The text is read with
libyaml when present (PyYAML's own parser takes minutes over a few hundred kilobytes of
nested brackets) and bounded as cluster manifests are (:mod:`koordsched.api.yaml_bounds`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Hashable
from typing import Any

import msgspec
import yaml

from koordsched.api.yaml_bounds import BoundedLoaderMixin, NestingError, bounded_ints, drop_nulls
from koordsched.config.errors import ConfigError
from koordsched.config.types import CONFIG_KIND, CONFIG_VERSIONS, KubeSchedulerConfiguration

_DOCUMENT = "document"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_MERGE_TAG = "tag:yaml.org,2002:merge"


_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@bounded_ints
class _StrictLoader(BoundedLoaderMixin, _SafeLoader):  # type: ignore[misc,valid-type]
    """SafeLoader that rejects duplicate mapping keys and leaves dates as strings.

    Dates stay strings because Kubernetes converts YAML to JSON before decoding, so a
    value such as ``2024-01-01`` reaches a string field as a string there too.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: dict[Hashable, yaml.Mark] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, Hashable) and key in seen:
                first = seen[key]
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f'duplicate key "{key}" (first at line {first.line + 1}, column {first.column + 1})',
                    key_node.start_mark,
                )
            if isinstance(key, Hashable):
                seen[key] = key_node.start_mark
        mapping: dict[Hashable, Any] = super().construct_mapping(node, deep=deep)
        return mapping


_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_config_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a config file: the one place config loading touches the file system."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError("", f"cannot read the config: {exc.strerror or exc}", os.fspath(path)) from exc


def read_document(data: bytes) -> dict[str, Any]:
    """The single YAML (or JSON) mapping in ``data``."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(_DOCUMENT, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    try:
        documents = [doc for doc in yaml.load_all(text, Loader=_StrictLoader) if doc is not None]
    except RecursionError:
        raise ConfigError(_DOCUMENT, "nested too deeply") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else _DOCUMENT
        raise ConfigError(where, str(exc.problem or exc.context or "invalid YAML")) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(_DOCUMENT, f"invalid YAML: {exc}") from exc
    if not documents:
        raise ConfigError(_DOCUMENT, "the config is empty")
    if len(documents) > 1:
        raise ConfigError(_DOCUMENT, f"expected one YAML document, found {len(documents)}")
    doc = documents[0]
    if not isinstance(doc, dict):
        raise ConfigError(_DOCUMENT, f"the config must be a mapping, got {_kind_of(doc)}")
    try:
        cleaned: dict[str, Any] = drop_nulls(doc)
    except NestingError as exc:
        raise ConfigError(exc.path, str(exc)) from None
    return cleaned


def decode_config(doc: dict[str, Any]) -> KubeSchedulerConfiguration:
    """Check apiVersion and kind first (the most useful error), then decode the rest strictly."""
    api_version = doc.get("apiVersion")
    if api_version not in CONFIG_VERSIONS:
        wanted = " or ".join(f'"{v}"' for v in CONFIG_VERSIONS)
        got = "missing" if api_version is None else f'got "{api_version}"'
        raise ConfigError("apiVersion", f"must be {wanted}, {got}")
    kind = doc.get("kind")
    if kind != CONFIG_KIND:
        got = "missing" if kind is None else f'got "{kind}"'
        raise ConfigError("kind", f'must be "{CONFIG_KIND}", {got}')
    try:
        return msgspec.convert(doc, KubeSchedulerConfiguration)
    except msgspec.ValidationError as exc:
        raise error_from_validation(exc, root=CONFIG_KIND) from exc


_AT_PATH = re.compile(r"^(?P<detail>.*?) - at `\$(?P<path>[^`]*)`$", re.DOTALL)


def error_from_validation(exc: msgspec.ValidationError, root: str) -> ConfigError:
    """Move msgspec's trailing "- at `$.a.b`" to the front, as a field path."""
    message = str(exc)
    match = _AT_PATH.match(message)
    if match is None:
        return ConfigError(root, message)
    path = match["path"].removeprefix(".")
    return ConfigError(path or root, match["detail"])


def _kind_of(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return f"a {type(value).__name__}"
