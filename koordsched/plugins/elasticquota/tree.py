"""The quota tree: every ElasticQuota by name, with its parent and children, built once per change
of the ElasticQuota objects (spec 2.6, 4.5).

Koordinator keys quotas by name alone (a pod's label names a quota, a child's label names its
parent), so the tree is by name too. Besides the objects the tree always holds the two built-in
groups, ``koordinator-default-quota`` and ``koordinator-system-quota``, outside the tree (their
runtime is their max) with the max from the args; an ElasticQuota object of either name
overrides their min and max, as in Koordinator. An object named ``koordinator-root-quota`` is
the tree's root and takes no part otherwise.

A quota the scheduler cannot use is *refused*, with a reason that names it: its object cannot
be read (:func:`~koordsched.api.elastic_quota.parse_elastic_quota`), its name is already taken
by an ElasticQuota in another namespace (the first namespace in sorted order keeps it), its
parent does not exist or is not marked ``is-parent``, its parents form a cycle, or an ancestor
is refused. Pods charged to a refused quota are refused with that reason; nothing else changes.

Multiple quota trees (a quota labelled ``quota.scheduling.koordinator.sh/tree-id`` or ``is-root``,
each tree with its own root and total) need Koordinator's ``MultiQuotaTree`` feature gate, off by
default; koordsched has no such gate. Koordinator with the gate off reads such a quota as part of
the one tree, sharing the cluster with every other quota, which is not what its labels ask: here
the quota is refused, with a reason that says so, and so are its pods and its children.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from koordsched.api.elastic_quota import (
    DEFAULT_QUOTA_NAME,
    LABEL_IS_PARENT,
    LABEL_TREE_ID,
    ROOT_QUOTA_NAME,
    SYSTEM_QUOTA_NAME,
    ElasticQuota,
    QuotaSpec,
    parse_elastic_quota,
)

BUILT_IN = (DEFAULT_QUOTA_NAME, SYSTEM_QUOTA_NAME)
LABEL_IS_ROOT = "quota.scheduling.koordinator.sh/is-root"


def multi_tree_use(eq: ElasticQuota, spec: QuotaSpec) -> str:
    """Why the quota asks for a tree of its own ("" when it does not)."""
    if spec.tree_id:
        what = f"label {LABEL_TREE_ID}={spec.tree_id}"
    elif eq.metadata.labels.get(LABEL_IS_ROOT) == "true":
        what = f"label {LABEL_IS_ROOT}=true"
    else:
        return ""
    return (
        f"{what} asks for a quota tree of its own, which needs the MultiQuotaTree feature gate "
        "(off by default, as in Koordinator; koordsched does not support multiple quota trees)"
    )


@dataclass
class QuotaNode:
    name: str
    #: ``namespace/name`` of the object, "" for a built-in group without one.
    key: str
    parent: str
    is_parent: bool
    allow_lent: bool
    tree_id: str = ""
    min: dict[str, int] = field(default_factory=dict)
    max: dict[str, int] = field(default_factory=dict)
    shared_weight: dict[str, int] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    #: Why the quota cannot be used; "" when it can.
    refusal: str = ""

    @property
    def built_in(self) -> bool:
        return self.name in BUILT_IN


def _node_of(spec: QuotaSpec, key: str) -> QuotaNode:
    return QuotaNode(
        name=spec.name,
        key=key,
        parent=spec.parent,
        is_parent=spec.is_parent,
        allow_lent=spec.allow_lent,
        tree_id=spec.tree_id,
        min=dict(spec.min),
        max=dict(spec.max),
        shared_weight=dict(spec.shared_weight),
    )


class QuotaTree:
    """Quotas by name; ``top`` lists the root's usable children (not the built-in groups)."""

    def __init__(
        self, nodes: dict[str, QuotaNode], namespaces: dict[str, str], shadowed: list[QuotaNode] | None = None
    ) -> None:
        self.nodes = nodes
        #: Objects refused because another ElasticQuota already has their name.
        self.shadowed = shadowed or []
        #: namespace -> the quota whose ``namespaces`` annotation lists it (first by object key).
        self.by_namespace = namespaces
        self.top = sorted(
            n.name for n in nodes.values() if not n.built_in and not n.refusal and n.parent == ROOT_QUOTA_NAME
        )
        #: Every resource some quota's max names (Koordinator's resource keys), sorted.
        self.keys = sorted({r for n in nodes.values() if not n.built_in for r in n.max})

    @classmethod
    def build(
        cls,
        objects: Iterable[tuple[str, ElasticQuota]],
        default_max: dict[str, int],
        system_max: dict[str, int],
    ) -> QuotaTree:
        nodes: dict[str, QuotaNode] = {
            DEFAULT_QUOTA_NAME: QuotaNode(
                DEFAULT_QUOTA_NAME, "", ROOT_QUOTA_NAME, False, True, max=dict(default_max)
            ),
            SYSTEM_QUOTA_NAME: QuotaNode(
                SYSTEM_QUOTA_NAME, "", ROOT_QUOTA_NAME, False, True, max=dict(system_max)
            ),
        }
        namespaces: dict[str, str] = {}
        shadowed: list[QuotaNode] = []
        for key, eq in sorted(objects, key=lambda kv: kv[0]):
            name = eq.metadata.name
            if name == ROOT_QUOTA_NAME:
                continue
            known = nodes.get(name)
            if known is not None and known.key:
                # Koordinator keys quotas by name: a second object of the name would replace the first.
                shadowed.append(
                    QuotaNode(
                        name,
                        key,
                        ROOT_QUOTA_NAME,
                        False,
                        True,
                        refusal=f'ElasticQuota "{key}" is refused: quota name {name} is already used by '
                        f'ElasticQuota "{known.key}"',
                    )
                )
                continue
            try:
                spec = parse_elastic_quota(eq)
            except ValueError as err:
                if known is not None:  # a built-in group: keeps its args' max, refused for its pods
                    known.key, known.refusal = key, str(err)
                else:
                    nodes[name] = QuotaNode(name, key, ROOT_QUOTA_NAME, False, True, refusal=str(err))
                continue
            if known is not None:
                # Only min and max are read for the built-in groups; they stay outside the tree.
                known.key, known.min, known.max = key, dict(spec.min), dict(spec.max)
                continue
            multi = multi_tree_use(eq, spec)
            node = nodes[name] = _node_of(spec, key)
            if multi:
                # Its pods (namespaces included) are charged to it and refused with the reason,
                # never moved silently to the default quota.
                node.refusal = f'ElasticQuota "{key}" is refused: {multi}'
            for ns in spec.namespaces:
                namespaces.setdefault(ns, name)
        _link(nodes)
        return cls(nodes, namespaces, shadowed)

    def get(self, name: str) -> QuotaNode | None:
        return self.nodes.get(name)

    def path_to_top(self, name: str) -> list[QuotaNode]:
        """The quota, its parent, ... up to the root's child (the quota alone for a built-in group)."""
        out: list[QuotaNode] = []
        node = self.nodes.get(name)
        while node is not None:
            out.append(node)
            if node.built_in or node.parent == ROOT_QUOTA_NAME:
                break
            node = self.nodes.get(node.parent)
        return out

    def refused(self) -> list[QuotaNode]:
        return sorted(
            [n for n in self.nodes.values() if n.refusal] + self.shadowed,
            key=lambda n: n.key or n.name,
        )


def _names(amounts: dict[str, int]) -> str:
    return "[" + " ".join(sorted(amounts)) + "]"


def _key_refusal(node: QuotaNode, parent: QuotaNode) -> str:
    """Koordinator's webhook (``checkSubAndParentGroupQuotaKey``, ElasticQuotaEnableUpdateResourceKey
    off by default): a child's max names the same resources as its parent's, its min only resources
    the parent's min names. A child whose max names fewer would be unlimited in what the parent
    caps (``spec: null`` names none), so its pods could push the parent's used past its max."""
    if set(node.max) != set(parent.max):
        return (
            f'ElasticQuota "{node.key}" is refused: spec.max names {_names(node.max)}, its parent quota '
            f"{parent.name}'s spec.max names {_names(parent.max)}: a child quota's max must name the same "
            "resources as its parent's (checkSubAndParentGroupQuotaKey)"
        )
    extra = sorted(set(node.min) - set(parent.min))
    if extra:
        return (
            f'ElasticQuota "{node.key}" is refused: spec.min names {", ".join(extra)}, which its parent '
            f"quota {parent.name}'s spec.min does not (checkSubAndParentGroupQuotaKey)"
        )
    return ""


def _refuse_min_overflow(nodes: dict[str, QuotaNode]) -> None:
    """Koordinator's webhook (``checkMinQuotaValidate``): the children's mins add up to no more
    than their parent's min, in every resource. Taken in name order, the child whose min makes
    the sum pass the parent's is refused (the webhook refuses the object that breaks it)."""
    by_parent: dict[str, list[QuotaNode]] = {}
    for node in sorted(nodes.values(), key=lambda n: n.name):
        if not node.built_in and not node.refusal and node.parent != ROOT_QUOTA_NAME:
            by_parent.setdefault(node.parent, []).append(node)
    for parent_name, children in by_parent.items():
        parent = nodes[parent_name]
        total: dict[str, int] = {}
        for child in children:
            summed = {r: total.get(r, 0) + child.min.get(r, 0) for r in {*total, *child.min}}
            over = sorted(r for r, v in summed.items() if v > parent.min.get(r, 0))
            if over:
                child.refusal = (
                    f'ElasticQuota "{child.key}" is refused: spec.min with its siblings\' adds up to more '
                    f"than its parent quota {parent.name}'s spec.min in {', '.join(over)} "
                    f"(checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: {parent.name})"
                )
                continue
            total = summed


def _link(nodes: dict[str, QuotaNode]) -> None:
    """Children lists, and refusals for quotas whose parent is missing, not a parent, refused, or
    whose parent labels form a cycle."""
    for node in nodes.values():
        if node.built_in or node.refusal or node.parent == ROOT_QUOTA_NAME:
            continue
        parent = nodes.get(node.parent)
        if parent is None or parent.built_in:
            node.refusal = (
                f'ElasticQuota "{node.key}" is refused: its parent quota {node.parent} does not exist'
            )
        elif parent.refusal:
            node.refusal = f'ElasticQuota "{node.key}" is refused: its parent quota {parent.name} is refused'
        elif not parent.is_parent:
            node.refusal = (
                f'ElasticQuota "{node.key}" is refused: its parent quota {node.parent} is not labelled '
                f"{LABEL_IS_PARENT}=true"
            )
        else:
            node.refusal = _key_refusal(node, parent)
    _refuse_min_overflow(nodes)
    # Walk up from each quota once (iteratively: a hostile chain may be long), settling each
    # quota after its parent, so a refusal runs down the whole subtree.
    settled: set[str] = set()
    for start in sorted(nodes):
        path: list[str] = []
        index: dict[str, int] = {}
        name = start
        while name not in settled:
            node = nodes[name]
            if node.refusal or node.built_in or node.parent == ROOT_QUOTA_NAME:
                settled.add(name)
                break
            if name in index:
                for member in path[index[name] :]:
                    looped = nodes[member]
                    looped.refusal = f'ElasticQuota "{looped.key}" is refused: its parent labels form a cycle'
                    settled.add(member)
                del path[index[name] :]
                break
            index[name] = len(path)
            path.append(name)
            name = node.parent
        for member in reversed(path):
            node = nodes[member]
            parent = nodes[node.parent]
            if parent.refusal and not node.refusal:
                node.refusal = (
                    f'ElasticQuota "{node.key}" is refused: its parent quota {parent.name} is refused'
                )
            settled.add(member)
    for node in sorted(nodes.values(), key=lambda n: n.name):
        if node.built_in or node.refusal or node.parent == ROOT_QUOTA_NAME:
            continue
        nodes[node.parent].children.append(node.name)
