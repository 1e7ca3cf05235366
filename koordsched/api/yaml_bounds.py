"""Limits on YAML documents: nesting depth, alias expansion and recursive aliases.

PyYAML shares the node of an anchor between its aliases, so a 500-byte "billion laughs"
document composes into a few dozen nodes and builds into a few dozen shared lists; it is
whatever walks the result as a tree (dropping nulls, msgspec's conversion) that expands
it, for minutes. An alias inside its own anchor (``&a [*a]``) builds a list that contains
itself, and a deep document (libyaml accepts 1000 levels) exhausts Python's recursion.
:func:`check_document` walks the composed node graph once, iteratively, before anything is
built, and refuses all three with the line and column to look at.

Go's YAML decoder (go-yaml, through sigs.k8s.io/yaml) has similar guards ("document
contains excessive aliasing"); the limits here are tighter than Go's 10,000 levels but far
above any Kubernetes object (a Pod with affinity terms nests about a dozen levels).

:class:`BoundedLoaderMixin` puts the check in front of a loader's ``construct_document``
when the text has an alias at all (no ``*``, no alias: the walk is skipped, it would cost a
third of the load time of a large cluster file); :func:`drop_nulls`, which every reader
runs over what was built, refuses depth on its way, for free.
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

import yaml

__all__ = [
    "MAX_ALIAS_NODES",
    "MAX_DEPTH",
    "BoundedLoaderMixin",
    "NestingError",
    "YAMLBoundsError",
    "bounded_ints",
    "check_document",
    "drop_nulls",
]

#: Collections nested inside one another, aliases followed.
MAX_DEPTH: Final = 100
#: Nodes that aliases add to one document once expanded (beyond the nodes written out).
MAX_ALIAS_NODES: Final = 100_000

_GREY: Final = -1  # on the current path: meeting it again is a recursive alias


class YAMLBoundsError(yaml.MarkedYAMLError):
    """A document over a limit; ``problem_mark`` is where (readers print line and column)."""

    def __init__(self, problem: str, node: yaml.Node) -> None:
        super().__init__(problem=problem, problem_mark=node.start_mark)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def check_document(
    root: yaml.Node, *, max_depth: int = MAX_DEPTH, max_alias_nodes: int = MAX_ALIAS_NODES
) -> None:
    """Raise :class:`YAMLBoundsError` if ``root`` nests deeper than ``max_depth`` collections,
    refers to itself through an alias, or expands through aliases to more than
    ``max_alias_nodes`` nodes beyond those written out.

    Work is linear in the number of distinct nodes: each node's expanded size and height are
    computed once and reused wherever an alias repeats it.
    """
    # id(node) -> expanded size once finished, _GREY while on the path; heights alongside.
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    distinct = 0
    # (node, its children, index of the next child to visit)
    stack: list[tuple[yaml.Node, list[yaml.Node], int]] = []

    def enter(node: yaml.Node) -> None:
        nonlocal distinct
        key = id(node)
        state = size.get(key)
        if state == _GREY:
            raise YAMLBoundsError("recursive alias: a node contains itself", node)
        if state is not None:
            # Seen before (an alias): its height counts on this path too.
            if len(stack) + height[key] > max_depth:
                raise YAMLBoundsError(f"nesting deeper than {max_depth} levels (through an alias)", node)
            return
        distinct += 1
        children = _children(node)
        if not children:
            size[key], height[key] = 1, 0
            return
        if len(stack) >= max_depth:
            raise YAMLBoundsError(f"nesting deeper than {max_depth} levels", node)
        size[key] = _GREY
        stack.append((node, children, 0))

    enter(root)
    while stack:
        node, children, i = stack[-1]
        if i < len(children):
            stack[-1] = (node, children, i + 1)
            enter(children[i])
            continue
        stack.pop()
        total = 1 + sum(size[id(c)] for c in children)
        size[id(node)] = total
        height[id(node)] = 1 + max(height[id(c)] for c in children)
        if total - distinct > max_alias_nodes:
            # Compared as the walk goes: 9**9 repetitions are refused after a few dozen nodes.
            raise YAMLBoundsError(
                f"aliases expand to more than {max_alias_nodes} nodes "
                '(an exponential "billion laughs" document?)',
                node,
            )


class BoundedLoaderMixin:
    """Mix into a PyYAML Loader (before it): each document that may hold an alias is checked
    before it is built. Depth is left to :func:`drop_nulls` when there is none."""

    def __init__(self, stream: Any, *, may_alias: bool | None = None) -> None:
        # An alias is written "*name": text without a "*" has none (bytes and files: check,
        # unless the caller, having read them, says there is no "*").
        if may_alias is None:
            may_alias = not isinstance(stream, str) or "*" in stream
        self._may_alias = may_alias
        super().__init__(stream)  # type: ignore[call-arg]

    def construct_document(self, node: yaml.Node) -> Any:
        if self._may_alias:
            check_document(node)
        return super().construct_document(node)  # type: ignore[misc]


_INT_TAG: Final = "tag:yaml.org,2002:int"
L = TypeVar("L", bound=type)


def _construct_int(loader: yaml.constructor.SafeConstructor, node: yaml.ScalarNode) -> Any:
    try:
        return yaml.constructor.SafeConstructor.construct_yaml_int(loader, node)
    except ValueError:
        # Python refuses to read integers of more than 4300 digits (CVE-2020-10735).
        raise YAMLBoundsError(f"integer of {len(node.value)} characters is too long to read", node) from None


def bounded_ints(loader: L) -> L:
    """Class decorator: the loader refuses an overlong integer with its place, not a bare ValueError."""
    loader.add_constructor(_INT_TAG, _construct_int)  # type: ignore[attr-defined]
    return loader


class NestingError(ValueError):
    """Built data nested deeper than allowed; :attr:`path` leads to the spot (``spec.a[0].b``)."""

    def __init__(self, max_depth: int) -> None:
        super().__init__()
        self.max_depth = max_depth
        self._steps: list[str] = []  # innermost first, filled in as the error unwinds

    @property
    def path(self) -> str:
        out = ""
        for step in reversed(self._steps):
            out += step if step.startswith("[") or not out else f".{step}"
        return out

    def __str__(self) -> str:
        path = self.path
        if len(path) > 80:
            path = path[:80] + "..."
        return f"nesting deeper than {self.max_depth} levels (at {path or 'the top'})"


def drop_nulls(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """``value`` without the mapping keys whose value is null, refusing nesting past ``max_depth``.

    Both Kubernetes and kube-scheduler's config decoder read ``field: null`` as "not set".
    """
    try:
        return _drop(value, max_depth)
    except NestingError as err:
        err.max_depth = max_depth
        raise
    except RecursionError:  # pragma: no cover - only with max_depth above Python's own limit
        raise NestingError(max_depth) from None


def _drop(value: Any, left: int) -> Any:
    if isinstance(value, dict):
        if left <= 0:
            raise NestingError(0)  # the caller sets the limit
        out = {}
        for k, v in value.items():
            if v is None:
                continue
            try:
                out[k] = _drop(v, left - 1)
            except NestingError as err:
                err._steps.append(str(k))
                raise
        return out
    if isinstance(value, list):
        if left <= 0:
            raise NestingError(0)  # the caller sets the limit
        items = []
        for i, v in enumerate(value):
            try:
                items.append(_drop(v, left - 1))
            except NestingError as err:
                err._steps.append(f"[{i}]")
                raise
        return items
    return value
