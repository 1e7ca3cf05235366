"""vNPU templates (Koordinator v1.7): the ConfigMap's cache and the strict match of a shared request.

The ConfigMap named by ``gpuSharedResourceTemplatesConfig`` holds, under ``data.yaml``, YAML of the
shape ``"<vendor>-<model>" -> template name -> ResourceList``. Adding or updating it replaces the
whole cache, deleting it empties the cache, and a version that cannot be parsed is logged and
leaves the cache as it was (:class:`TemplateCache`).

A shared GPU request whose per-card request holds one of ``matchedResources`` must equal a
template exactly (the same resource names, equal quantities; ``gpu.shared`` is not part of the
per-card request): :func:`match_templates` gives, per model key, the names of the templates it
equals. With none anywhere the pod is UnschedulableAndUnresolvable at PreFilter; on a node whose
``<gpu-vendor>-<gpu-model>`` labels name no such model it is refused there with the same text;
with exactly one name that name goes into every GPU allocation's ``extension``, with several
(identical lists under several names) none does, as Koordinator does.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import yaml

from koordsched.api.config_maps import ConfigMap
from koordsched.api.core import Node
from koordsched.api.koordinator import LABEL_GPU_MODEL, LABEL_GPU_VENDOR
from koordsched.api.quantity import QuantityError
from koordsched.api.resources import to_canonical
from koordsched.api.yaml_bounds import BoundedLoaderMixin, bounded_ints

log = logging.getLogger(__name__)

#: Koordinator's text, at PreFilter (no model has the template) and per node (not this node's model).
ERR_NO_MATCHED_TEMPLATE: Final = "no matched GPU shared resource template"
#: The ConfigMap key the templates are read from.
DATA_KEY: Final = "data.yaml"

#: model key -> template name -> per-card resources (canonical integers).
Templates = dict[str, dict[str, dict[str, int]]]


_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@bounded_ints
class _Loader(BoundedLoaderMixin, _SafeLoader):  # type: ignore[misc,valid-type]
    """Safe, with alias expansion and integer length bounded (a ConfigMap is user input)."""


class TemplateError(ValueError):
    """A ``data.yaml`` that does not have the templates' shape."""


def parse_templates(text: str) -> Templates:
    """``data.yaml`` as templates; raises :class:`TemplateError` saying where it is wrong."""
    try:
        raw = yaml.load(text, Loader=_Loader)  # a safe loader, bounded
    except yaml.YAMLError as err:
        # One line: the message goes into a log line and a pod's event.
        raise TemplateError(f"invalid YAML: {' '.join(str(err).split())}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise TemplateError(f"expected a map of <vendor>-<model> to templates, got {type(raw).__name__}")
    out: Templates = {}
    for model, templates in raw.items():
        if not isinstance(model, str):
            raise TemplateError(f"model key {model!r}: expected a string")
        if templates is None:
            out[model] = {}
            continue
        if not isinstance(templates, dict):
            raise TemplateError(f"{model}: expected a map of template name to resources")
        parsed: dict[str, dict[str, int]] = {}
        for name, resources in templates.items():
            if not isinstance(name, str):
                raise TemplateError(f"{model}: template name {name!r}: expected a string")
            if not isinstance(resources, dict):
                raise TemplateError(f"{model}.{name}: expected a map of resource name to quantity")
            parsed[name] = _resources(f"{model}.{name}", resources)
        out[model] = parsed
    return out


def _resources(where: str, raw: Mapping[object, object]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, q in raw.items():
        if not isinstance(name, str) or isinstance(q, bool) or not isinstance(q, str | int | float):
            raise TemplateError(f"{where}: {name!r}: expected a resource name and a quantity")
        try:
            out[name] = to_canonical(name, q)
        except QuantityError as err:
            raise TemplateError(f"{where}: {name}: {err}") from None
    return out


def model_key(node: Node) -> str:
    """``<gpu-vendor>-<gpu-model>`` from the Node's labels (each empty when absent)."""
    labels = node.metadata.labels
    return f"{labels.get(LABEL_GPU_VENDOR, '')}-{labels.get(LABEL_GPU_MODEL, '')}"


@dataclass(frozen=True, slots=True)
class TemplateMatch:
    """A shared request's templates: model key -> names of the templates it equals (never empty)."""

    candidates: Mapping[str, tuple[str, ...]]

    def allows(self, key: str) -> bool:
        return key in self.candidates

    def name_for(self, key: str) -> str:
        """The template name an allocation on a node of ``key`` records: "" unless exactly one."""
        names = self.candidates.get(key, ())
        return names[0] if len(names) == 1 else ""


def enforced(per_card: Mapping[str, int], shared: bool, matched: frozenset[str]) -> bool:
    """Templates apply to a shared request whose per-card request holds a matched resource."""
    return shared and not matched.isdisjoint(per_card)


def match_templates(templates: Templates, per_card: Mapping[str, int]) -> TemplateMatch:
    """The strict match over every model (an empty ``candidates``: none matches)."""
    wanted = dict(per_card)
    candidates = {
        model: names
        for model, by_name in templates.items()
        if (names := tuple(sorted(n for n, res in by_name.items() if res == wanted)))
    }
    return TemplateMatch(candidates)


class TemplateCache:
    """The templates of one ConfigMap, re-read whenever the stored object changes."""

    def __init__(self, namespace: str, name: str) -> None:
        self.namespace = namespace
        self.name = name
        self.templates: Templates = {}
        #: Why the newest version could not be read (None: it was, or there is none).
        self.error: str | None = None
        self._seen: ConfigMap | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def update(self, config_map: ConfigMap | None) -> None:
        """Follow the stored object: replace on add/update, empty on delete, keep on a parse error."""
        if config_map is self._seen:
            return
        self._seen = config_map
        if config_map is None:
            self.templates, self.error = {}, None
            return
        try:
            self.templates = parse_templates(config_map.data.get(DATA_KEY, ""))
            self.error = None
        except TemplateError as err:
            self.error = f"ConfigMap {self.key} {DATA_KEY}: {err}; the templates read before are kept"
            log.error("DeviceShare: %s", self.error)
