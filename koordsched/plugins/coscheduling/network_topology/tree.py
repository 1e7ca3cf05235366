"""The network topology tree: domains built from node labels (Koordinator's ``networktopology``
tree and tree manager, spec A.2).

Layers are ordered from parent to child by following ``parentTopologyLayer`` up from
``NodeTopologyLayer``. Each node is placed layer by layer: its own name at the node layer, the
first non-empty label of the layer's ``labelKey`` elsewhere; a node without a value for the layer
directly above the node layer gets a virtual domain named after itself, one missing any higher
layer is left out. Domains are keyed by (layer, name), as Koordinator's are: two spines naming
the same block share it (the block stays under the spine that named it first, nodes in name order).

:class:`TreeManager` rebuilds the tree whenever the ``default`` object or a node changed since the
last build (Koordinator rebuilds every 10 s; the result for the same inputs is the same). A build
that fails (no ``default``, an invalid layer chain) keeps the last tree, as Koordinator does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from koordsched.api.core import Node
from koordsched.api.network_topology import (
    CLUSTER_TOPOLOGY_LAYER,
    DEFAULT_NAME,
    NODE_TOPOLOGY_LAYER,
    ClusterNetworkTopology,
    ClusterNetworkTopologyDetailStatus,
    NetworkTopologyLayerSpec,
    TopologyInfo,
)

log = logging.getLogger(__name__)


class TopologyError(ValueError):
    """A spec the tree cannot be built from."""


class TreeNode:
    """One domain (a node leaf at ``NodeTopologyLayer``). Compared by identity."""

    __slots__ = ("children", "layer", "name", "parent")

    def __init__(self, layer: str, name: str, parent: TreeNode | None) -> None:
        self.layer = layer
        self.name = name
        self.parent = parent
        #: name -> child domain.
        self.children: dict[str, TreeNode] = {}

    @property
    def is_node(self) -> bool:
        return self.layer == NODE_TOPOLOGY_LAYER

    def __repr__(self) -> str:
        return f"TreeNode({self.layer}/{self.name})"


def order_layers(spec: Sequence[NetworkTopologyLayerSpec]) -> list[NetworkTopologyLayerSpec]:
    """The layers from the topmost listed (index 0) to ``NodeTopologyLayer`` (last), found by
    following parents up from the node layer; exactly ``len(spec)`` of them or an error."""
    by_layer: dict[str, NetworkTopologyLayerSpec] = {}
    current: NetworkTopologyLayerSpec | None = None
    for layer in spec:
        if layer.topology_layer == NODE_TOPOLOGY_LAYER and current is None:
            current = layer
        by_layer[layer.topology_layer] = layer
    wanted = NODE_TOPOLOGY_LAYER
    out: list[NetworkTopologyLayerSpec] = [None] * len(spec)  # type: ignore[list-item]
    for i in range(len(spec) - 1, -1, -1):
        if current is None:
            raise TopologyError(f'topology layer "{wanted}" not found in spec')
        out[i] = current
        wanted = current.parent_topology_layer
        current = by_layer.get(wanted)
    return out


class Tree:
    """A built tree: its root (``ClusterTopologyLayer``, name ``""``), the layer order and each
    node's leaf."""

    def __init__(self, layers: Sequence[NetworkTopologyLayerSpec]) -> None:
        self.layers = list(layers)
        self.layer_index = {layer.topology_layer: i for i, layer in enumerate(self.layers)}
        self.root = TreeNode(CLUSTER_TOPOLOGY_LAYER, "", None)
        self._index: dict[tuple[str, str], TreeNode] = {(CLUSTER_TOPOLOGY_LAYER, ""): self.root}
        #: node name -> its leaf.
        self.leaves: dict[str, TreeNode] = {}

    def is_ancestor(self, a: str, b: str) -> bool:
        """Layer ``a`` above layer ``b``: a layer not in the spec (the root's too) has index 0."""
        return self.layer_index.get(a, 0) < self.layer_index.get(b, 0)

    def path_of(self, node: Node) -> list[tuple[str, str]] | None:
        """(layer, name) from the top layer down to the node, or None when it is left out."""
        name = node.metadata.name
        labels = node.metadata.labels
        out = []
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            if layer.topology_layer == NODE_TOPOLOGY_LAYER:
                value = name
            else:
                value = next((v for key in layer.label_key if (v := labels.get(key, ""))), "")
            if not value:
                if i != last - 1:
                    log.debug('node "%s" missing network topology layer "%s"', name, layer.topology_layer)
                    return None
                value = name  # a virtual domain: every leaf at the same depth
            out.append((layer.topology_layer, value))
        return out

    def add_node(self, node: Node) -> None:
        path = self.path_of(node)
        if path is None:
            return
        parent = self.root
        for key in path:
            domain = self._index.get(key)
            if domain is None:
                domain = self._index[key] = TreeNode(key[0], key[1], parent)
                parent.children[key[1]] = domain
            parent = domain
        if parent.is_node:
            self.leaves[node.metadata.name] = parent

    def domains(self) -> Iterator[TreeNode]:
        """Every domain depth first, children in name order, from the root."""
        stack = [self.root]
        while stack:
            domain = stack.pop()
            yield domain
            stack.extend(domain.children[n] for n in sorted(domain.children, reverse=True))

    def node_count(self, domain: TreeNode) -> int:
        if domain.is_node:
            return 1
        return sum(self.node_count(c) for c in domain.children.values())

    def detail_status(self) -> list[ClusterNetworkTopologyDetailStatus]:
        """``status.detailStatus`` as Koordinator writes it: every domain above the nodes, depth
        first, child names sorted and left out when the children are nodes."""
        counts: dict[int, int] = {}

        def count(domain: TreeNode) -> int:
            n = 1 if domain.is_node else sum(count(c) for c in domain.children.values())
            counts[id(domain)] = n
            return n

        count(self.root)
        out = []
        for domain in self.domains():
            if domain.is_node:
                continue
            names = sorted(domain.children)
            child_layer = domain.children[names[0]].layer if names else ""
            parent = domain.parent
            out.append(
                ClusterNetworkTopologyDetailStatus(
                    topology_info=TopologyInfo(topology_layer=domain.layer, topology_name=domain.name),
                    parent_topology_info=(
                        TopologyInfo(topology_layer=parent.layer, topology_name=parent.name)
                        if parent is not None
                        else None
                    ),
                    child_topology_layer=child_layer,
                    child_topology_names=names if child_layer != NODE_TOPOLOGY_LAYER else [],
                    node_num=counts[id(domain)],
                )
            )
        return out


def build_tree(obj: ClusterNetworkTopology, nodes: Iterable[Node]) -> Tree:
    """The tree of ``obj`` over ``nodes`` (placed in name order); raises :class:`TopologyError`."""
    tree = Tree(order_layers(obj.spec.network_topology_spec))
    for node in sorted(nodes, key=lambda n: n.metadata.name):
        tree.add_node(node)
    return tree


class TreeManager:
    """The current tree, rebuilt when its inputs change (see the module docstring).

    ``objects`` is the store of ClusterNetworkTopologies by name; ``nodes`` lists the cluster's
    Node objects (each a new object when it changes, so identity tells a change).
    """

    def __init__(
        self, objects: Mapping[str, ClusterNetworkTopology], nodes: Callable[[], Sequence[Node]]
    ) -> None:
        self._objects = objects
        self._nodes = nodes
        self._tree: Tree | None = None
        self._built_from: tuple[ClusterNetworkTopology, list[Node]] | None = None
        #: Why the last build failed ("" when it did not).
        self.error = ""

    def tree(self) -> Tree | None:
        """The current tree (None when none was ever built)."""
        obj = self._objects.get(DEFAULT_NAME)
        if obj is None:
            return self._tree  # Koordinator keeps the last tree cached
        nodes = list(self._nodes())
        built = self._built_from
        if built is not None and built[0] is obj and _same(built[1], nodes):
            return self._tree
        self._built_from = (obj, nodes)
        try:
            self._tree = build_tree(obj, nodes)
        except TopologyError as err:
            if str(err) != self.error:
                log.error("ClusterNetworkTopology %s: %s; keeping the last tree", DEFAULT_NAME, err)
            self.error = str(err)
            return self._tree
        self.error = ""
        return self._tree


def _same(a: list[Node], b: list[Node]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
