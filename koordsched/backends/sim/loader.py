"""Cluster manifests (multi-document YAML) -> decoded objects, in the order the simulator feeds them.

Input is what ``kubectl get -o yaml`` prints or what people write by hand: Nodes, Pods,
PriorityClasses, ``kind: List`` wrappers, later Koordinator CRDs. Every problem that makes
the input unusable is an :class:`InputError` whose message names the file, the document and
the object, so a person can find it. Kinds the simulator does not know are skipped with a
warning rather than refused: a dump of a real namespace contains Deployments and Services.
"""

from __future__ import annotations

import codecs
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import yaml

from koordsched.api.core import Node, ObjectMeta, Pod, PriorityClass
from koordsched.api.defaults import default_pod
from koordsched.api.field_errors import Refused
from koordsched.api.sharing import PodSharing
from koordsched.api.validation import check_pending_pod, check_priority_class
from koordsched.api.yaml_bounds import (
    BoundedLoaderMixin,
    NestingError,
    YAMLBoundsError,
    bounded_ints,
    drop_nulls,
)
from koordsched.framework.registry import Registry

#: How the runner hands a kind to the scheduler: its own handler, or ``EventHandlers.on_object``.
Role = Literal["priorityclass", "node", "pod", "object"]

#: Feeding order: PriorityClasses (pods resolve their priority), watched objects (CRDs plugins
#: read), Nodes, Pods already bound, then pending Pods.
_STAGE = {"priorityclass": 0, "object": 1, "node": 2}


@dataclass(frozen=True)
class KindSpec:
    """How to decode one ``kind`` and where it goes."""

    type: type[Any]
    namespaced: bool
    role: Role = "object"
    #: Checks values the Struct cannot (quantities, timestamps); raises ValueError saying which
    #: field is wrong. A malformed value makes the file unusable (InputError); a well-formed one
    #: the scheduler refuses (:class:`~koordsched.api.field_errors.Refused`: out of range, an
    #: unknown enum) is what a cluster can hold, so the object is kept, with a warning, and the
    #: scheduler sets it aside as it would in a cluster.
    check: Callable[[Any], object] | None = None
    #: What the scheduler does with an object ``check`` refuses, for the warning.
    refused: str = "set aside"
    #: The API server's defaulting, which objects in a cluster went through (``api.defaults``).
    defaults: Callable[[Any], Any] | None = None


#: The kinds every cluster has; the others come from the plugins (``Registry.object_kinds``).
#: (A refused Node is reported by the runner, with nodes whose allocatable cannot be read.)
CORE_KINDS: dict[str, KindSpec] = {
    "PriorityClass": KindSpec(
        PriorityClass,
        namespaced=False,
        role="priorityclass",
        check=check_priority_class,
        refused="ignored: pods naming it fail as if it did not exist",
    ),
    "Node": KindSpec(Node, namespaced=False, role="node"),
    "Pod": KindSpec(
        Pod,
        namespaced=True,
        role="pod",
        check=check_pending_pod,
        refused="not scheduled",
        defaults=default_pod,
    ),
}


def kind_specs(registry: Registry) -> dict[str, KindSpec]:
    """The core kinds plus the kinds the registry's plugins read, as the loader decodes them."""
    out = dict(CORE_KINDS)
    for k, _ in registry.object_kinds().values():
        out[k.kind] = KindSpec(
            k.type,
            namespaced=k.namespaced,
            role="object",
            check=k.check,
            refused=k.refused,
            defaults=k.defaults,
        )
    return out


DEFAULT_NAMESPACE = "default"
#: Core Kubernetes' Namespace kind: one is implied by every namespaced object.
NAMESPACE = "Namespace"


class InputError(ValueError):
    """The cluster manifests cannot be used; the message says where and why."""


@dataclass(slots=True)
class LoadedObject:
    """One decoded object and where it came from (slots: a large input holds one per object)."""

    kind: str
    key: str  # ``namespace/name`` for namespaced kinds, else ``name``
    obj: Any
    role: Role
    #: Where it came from, for messages: the whole text, or (with ``position``) the file's path,
    #: one string for all its objects; :attr:`origin` puts the text together when asked.
    source: str
    #: ``document << 32 | item`` (item 0: not in a List); 0: ``source`` is the whole text.
    #: One int rather than a string per object: a large input holds one per pod.
    position: int = 0

    @property
    def origin(self) -> str:
        """``file: document N`` (or ``... item M``)."""
        if not self.position:
            return self.source
        return _origin(self.source, self.position)


@dataclass
class Cluster:
    """Everything the manifests held, objects in file order."""

    objects: list[LoadedObject] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def of_role(self, role: Role) -> list[LoadedObject]:
        return [o for o in self.objects if o.role == role]

    @property
    def nodes(self) -> list[Node]:
        return [o.obj for o in self.objects if o.role == "node"]

    @property
    def pods(self) -> list[Pod]:
        return [o.obj for o in self.objects if o.role == "pod"]

    def feed_order(self) -> list[LoadedObject]:
        """PriorityClasses, other objects, Nodes, bound Pods, pending Pods; file order within each."""

        def stage(o: LoadedObject) -> int:
            if o.role == "pod":
                return 3 if o.obj.spec.node_name else 4
            return _STAGE[o.role]

        return sorted(self.objects, key=stage)  # sorted() is stable: file order is kept


_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@bounded_ints
class _ManifestLoader(BoundedLoaderMixin, _SafeLoader):  # type: ignore[misc,valid-type]
    """SafeLoader (libyaml when present: clusters can be large) that leaves timestamps as strings
    and refuses recursive or exponential aliases (:mod:`koordsched.api.yaml_bounds`).

    Kubernetes turns YAML into JSON before decoding, so ``creationTimestamp: 2024-01-01T00:00:00Z``
    reaches a string field as a string; PyYAML would make it a datetime.
    """


_ManifestLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _describe(kind: str, doc: dict[str, Any], namespaced: bool) -> str:
    """``Pod default/web-1`` or ``Node gpu-1``, from the raw document (it may not decode)."""
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    if namespaced:
        return f"{kind} {meta.get('namespace') or DEFAULT_NAMESPACE}/{name}"
    return f"{kind} {name}"


#: Bytes read at a time: neither the file nor its parsed documents are held whole.
_CHUNK = 1 << 20


def _check_utf8(path: str) -> bool:
    """Refuses a file that is not UTF-8, naming the first bad byte, before any of it is parsed;
    says whether it holds a ``*`` (an alias may need checking, see ``api.yaml_bounds``)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    star = False
    try:
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                pending = len(decoder.getstate()[0])
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as exc:
                    at = offset - pending + exc.start
                    raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {at})") from exc
                star = star or b"*" in chunk
                offset += len(chunk)
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError as exc:
                at = offset - len(decoder.getstate()[0]) + exc.start
                raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {at})") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return star


def _read_documents(path: str) -> Iterator[Any]:
    """The file's documents one at a time: a document is parsed when the one before is decoded,
    so a large cluster never holds every parsed document (or the whole text) at once."""
    may_alias = _check_utf8(path)
    try:
        with open(path, "rb") as f:  # libyaml reads it in chunks (and skips a BOM)
            loader = _ManifestLoader(f, may_alias=may_alias)
            try:
                while loader.check_data():
                    yield loader.get_data()
            finally:
                loader.dispose()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        what = " ".join(str(p) for p in (exc.context, exc.problem) if p) or "invalid YAML"
        kind = "YAML refused" if isinstance(exc, YAMLBoundsError) else "YAML syntax error"
        raise InputError(f"{path}: {where}{kind}: {what}") from exc
    except RecursionError:
        # Only PyYAML's pure-Python parser recurses per level (libyaml stops at 1000 levels).
        raise InputError(f"{path}: YAML refused: nested too deeply") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: YAML syntax error: {exc}") from exc


def _origin(path: str, position: int) -> str:
    """The text of a :attr:`LoadedObject.position` in ``path``."""
    doc, item = position >> _ITEM_BITS, position & _ITEM_MASK
    where = f"{path}: document {doc}"
    return f"{where} item {item}" if item else where


_ITEM_BITS = 32
_ITEM_MASK = (1 << _ITEM_BITS) - 1


def _entries(path: str, docs: Iterable[Any]) -> Iterator[tuple[int, Any]]:
    """(position, raw object) for each document, unwrapping ``kind: List`` (and ``PodList`` ...).

    A List's items are let go one by one once decoded (``kubectl get -o yaml`` prints one List
    for a whole cluster), so its parsed form shrinks as its objects are built."""
    for i, doc in enumerate(docs, start=1):
        if doc is None:
            continue
        position = i << _ITEM_BITS
        if isinstance(doc, dict) and isinstance(doc.get("kind"), str) and doc["kind"].endswith("List"):
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise InputError(f"{_origin(path, position)} ({doc['kind']}): items must be a list")
            del doc
            for j in range(len(items)):
                item, items[j] = items[j], None
                yield position | (j + 1), item
                del item
        else:
            yield position, doc


class _Names:
    """Names for objects that only have ``metadata.generateName``, deterministic across runs."""

    def __init__(self) -> None:
        self._n = 0

    def generate(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n:05d}"


def _decode(
    path: str,
    position: int,
    raw: Any,
    names: _Names,
    cluster: Cluster,
    kinds: Mapping[str, KindSpec],
    sharing: PodSharing | None = None,
) -> LoadedObject | None:
    origin = _origin(path, position)  # for messages only: built per object, kept by none
    if not isinstance(raw, dict):
        raise InputError(f"{origin}: expected a Kubernetes object (a mapping), got {type(raw).__name__}")
    kind = raw.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InputError(f"{origin}: the object has no kind")
    spec = kinds.get(kind)
    if spec is None:
        cluster.warnings.append(f"{origin} ({_describe(kind, raw, False)}): unknown kind {kind!r}, skipped")
        return None
    what = _describe(kind, raw, spec.namespaced)
    try:
        obj = msgspec.convert(drop_nulls(raw), spec.type)
    except NestingError as exc:
        raise InputError(f"{origin} ({what}): {exc}") from None
    except msgspec.ValidationError as exc:
        raise InputError(f"{origin} ({what}): {exc}") from exc
    if spec.check is not None:
        try:
            spec.check(obj)
        except Refused as exc:
            cluster.warnings.append(f"{origin} ({what}): {exc}; {spec.refused}")
        except ValueError as exc:
            raise InputError(f"{origin} ({what}): {exc}") from exc
    meta = obj.metadata
    if not meta.name:
        if not meta.generate_name:
            raise InputError(f"{origin} ({what}): metadata.name is required")
        meta = msgspec.structs.replace(meta, name=names.generate(meta.generate_name))
    if spec.namespaced and not meta.namespace:
        meta = msgspec.structs.replace(meta, namespace=DEFAULT_NAMESPACE)
    if meta is not obj.metadata:
        obj = msgspec.structs.replace(obj, metadata=meta)
    if spec.defaults is not None:
        obj = spec.defaults(obj)
    if sharing is not None and isinstance(obj, Pod):
        obj = sharing.pod(obj)  # pods of one template hold one spec, labels, status
    # Interned: the simulator's port names the pod by the same string in each of its tables (and
    # the kind, a new string per document as parsed, is one string).
    key = sys.intern(f"{meta.namespace}/{meta.name}") if spec.namespaced else meta.name
    return LoadedObject(sys.intern(kind), key, obj, spec.role, path, position)


def load_cluster(paths: Iterable[str | os.PathLike[str]], kinds: Mapping[str, KindSpec]) -> Cluster:
    """Read and decode every file; raises :class:`InputError` on the first unusable object.

    ``kinds`` are those to decode (:func:`kind_specs`); any other kind is skipped with a warning.
    """
    cluster = Cluster()
    names = _Names()
    sharing = PodSharing()
    # kind -> key -> the object first defined there (its origin names the place).
    seen: dict[str, dict[str, LoadedObject]] = {}
    for p in paths:
        path = os.fspath(p)
        for position, raw in _entries(path, _read_documents(path)):
            loaded = _decode(path, position, raw, names, cluster, kinds, sharing)
            if loaded is None:
                continue
            of_kind = seen.setdefault(loaded.kind, {})
            first = of_kind.get(loaded.key)
            if first is not None:
                where = f"{loaded.origin} ({loaded.kind} {loaded.key})"
                raise InputError(f"{where}: duplicate object, already defined at {first.origin}")
            of_kind[loaded.key] = loaded
            cluster.objects.append(loaded)
    _imply_namespaces(cluster, kinds)
    return cluster


def _imply_namespaces(cluster: Cluster, kinds: Mapping[str, KindSpec]) -> None:
    """In a cluster every namespaced object's Namespace exists: where a plugin reads Namespaces
    (InterPodAffinity's ``namespaceSelector`` matches their labels), add the ones the manifests
    use but do not contain, as the API server would have them (the name label only)."""
    spec = kinds.get(NAMESPACE)
    if spec is None:
        return
    given = {o.key for o in cluster.objects if o.kind == NAMESPACE}
    implied: dict[str, str] = {}
    for o in cluster.objects:
        meta = getattr(o.obj, "metadata", None)
        ns = meta.namespace if isinstance(meta, ObjectMeta) else ""
        if ns and ns not in given and ns not in implied:
            implied[ns] = o.origin
    for ns, origin in implied.items():
        obj = msgspec.convert({"metadata": {"name": ns}}, spec.type)
        if spec.defaults is not None:
            obj = spec.defaults(obj)
        cluster.objects.append(LoadedObject(NAMESPACE, ns, obj, "object", f"{origin} (its namespace)"))
