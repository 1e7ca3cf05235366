"""ClusterNetworkTopology (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped) and the gang
annotations of network-topology-aware scheduling (Koordinator v1.7, spec A.1).

The scheduler reads only the object named ``default``: its ``spec.networkTopologySpec`` lists the
layers (each naming its parent and the node label keys that give a domain's name) and the
scheduler writes ``status.detailStatus`` back (one entry per domain). A gang asks for placement
through the PodGroup annotation ``gang.scheduling.koordinator.sh/network-topology-spec``; its
pods carry their rank (``network-topology-index``) and, optionally, a selector grouping them
with pods already placed (``network-topology-selector``).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from koordsched.api.annotations import decode_json
from koordsched.api.core import ObjectMeta, Pod
from koordsched.api.field_errors import Refused, invalid, invalid_object, not_supported, required

CLUSTER_NETWORK_TOPOLOGY_API_VERSION = "scheduling.koordinator.sh/v1alpha1"
#: The only object the scheduler reads.
DEFAULT_NAME = "default"

#: The implicit root of every tree: never listed in the spec.
CLUSTER_TOPOLOGY_LAYER = "ClusterTopologyLayer"
#: The Kubernetes Node: must be listed; its domain name is the node name.
NODE_TOPOLOGY_LAYER = "NodeTopologyLayer"

ANNOTATION_NETWORK_TOPOLOGY_SPEC = "gang.scheduling.koordinator.sh/network-topology-spec"
ANNOTATION_NETWORK_TOPOLOGY_INDEX = "gang.scheduling.koordinator.sh/network-topology-index"
ANNOTATION_NETWORK_TOPOLOGY_SELECTOR = "scheduling.koordinator.sh/network-topology-selector"

MUST_GATHER = "MustGather"
PREFER_GATHER = "PreferGather"
STRATEGIES = (MUST_GATHER, PREFER_GATHER)

_KIND = "ClusterNetworkTopology.scheduling.koordinator.sh"
INT32_MAX = 2**31 - 1


class _Base(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    pass


class NetworkTopologyLayerSpec(_Base):
    """One layer (Koordinator's ``NetworkTopologySpec``)."""

    topology_layer: str = ""
    parent_topology_layer: str = ""
    #: Node label keys: the first one with a non-empty value names the node's domain.
    label_key: list[str] = []


class ClusterNetworkTopologySpec(_Base):
    network_topology_spec: list[NetworkTopologyLayerSpec] = []


class TopologyInfo(msgspec.Struct, kw_only=True, rename="camel"):
    """Both fields are required by the CRD (the root's name is ``""``)."""

    topology_layer: str = ""
    topology_name: str = ""


class ClusterNetworkTopologyDetailStatus(_Base):
    """One domain of the built tree, as the scheduler writes it."""

    topology_info: TopologyInfo = msgspec.field(default_factory=TopologyInfo)
    parent_topology_info: TopologyInfo | None = None
    child_topology_layer: str = ""
    #: Sorted; left out when the children are nodes.
    child_topology_names: list[str] = []
    node_num: int = 0


class ClusterNetworkTopologyStatus(_Base):
    detail_status: list[ClusterNetworkTopologyDetailStatus] = []


class ClusterNetworkTopology(_Base):
    api_version: str = CLUSTER_NETWORK_TOPOLOGY_API_VERSION
    kind: str = "ClusterNetworkTopology"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ClusterNetworkTopologySpec = msgspec.field(default_factory=ClusterNetworkTopologySpec)
    status: ClusterNetworkTopologyStatus = msgspec.field(default_factory=ClusterNetworkTopologyStatus)


def check_cluster_network_topology(obj: ClusterNetworkTopology) -> None:
    """What the CRD's schema refuses (required fields, int32 counts), each error naming its field.

    A layer chain that does not reach every layer is *not* refused here: the API server accepts
    it, and the tree build reports it (``topology layer "<layer>" not found in spec``) as
    Koordinator's does.
    """
    errs: list[str] = []
    layers = obj.spec.network_topology_spec
    if not layers:
        errs.append(required("spec.networkTopologySpec"))
    for i, layer in enumerate(layers):
        path = f"spec.networkTopologySpec[{i}]"
        if not layer.topology_layer:
            errs.append(required(f"{path}.topologyLayer"))
        elif layer.topology_layer == CLUSTER_TOPOLOGY_LAYER:
            errs.append(
                invalid(f"{path}.topologyLayer", layer.topology_layer, "the implicit root is never listed")
            )
    for i, detail in enumerate(obj.status.detail_status):
        if not 0 <= detail.node_num <= INT32_MAX:
            errs.append(
                invalid(
                    f"status.detailStatus[{i}].nodeNum", detail.node_num, f"must be between 0 and {INT32_MAX}"
                )
            )
    if errs:
        raise Refused(invalid_object(_KIND, obj.metadata.name, errs))


# --- the gang's requirement ---------------------------------------------------------------------


class GatherRule(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True, frozen=True):
    layer: str = ""
    strategy: str = ""
    #: The count placed in each domain of ``layer`` must be a multiple of it (<= 1: ignored).
    pod_count_multiple: int = 0


class NetworkTopologySpec(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True, frozen=True):
    """``extension.NetworkTopologySpec``: an empty rule list still turns placement on."""

    gather_strategy: tuple[GatherRule, ...] = ()


class TopologySpecError(ValueError):
    """An annotation value that is not the JSON Koordinator reads (the gang then has no requirement)."""


def parse_network_topology_spec(raw: str | None) -> NetworkTopologySpec | None:
    """The annotation as Koordinator reads it: None when missing or empty; raises
    :class:`TopologySpecError` for a value that is not the JSON object (the caller logs it and
    treats the gang as having no requirement, as Koordinator does)."""
    if not raw:
        return None
    try:
        spec: NetworkTopologySpec = decode_json(raw, NetworkTopologySpec)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as err:
        raise TopologySpecError(f"annotation {ANNOTATION_NETWORK_TOPOLOGY_SPEC}: {err}") from None
    return spec


def spec_notes(spec: NetworkTopologySpec) -> list[str]:
    """What a person should hear about a readable spec: rules Koordinator reads other than as
    written (an unknown strategy counts as PreferGather; a rule without a layer matches none)."""
    notes = []
    for i, rule in enumerate(spec.gather_strategy):
        path = f"annotation {ANNOTATION_NETWORK_TOPOLOGY_SPEC}: gatherStrategy[{i}]"
        if not rule.layer:
            notes.append(required(f"{path}.layer") + "; the rule matches no layer")
        if rule.strategy not in STRATEGIES:
            notes.append(
                not_supported(f"{path}.strategy", rule.strategy, STRATEGIES) + "; read as PreferGather"
            )
    return notes


def pod_count_multiples(spec: NetworkTopologySpec | None) -> dict[str, int]:
    """Layer -> multiple, from every rule with ``podCountMultiple`` > 1, whatever its strategy."""
    if spec is None:
        return {}
    return {r.layer: r.pod_count_multiple for r in spec.gather_strategy if r.pod_count_multiple > 1}


def topology_index(pod: Pod | None) -> int:
    """The pod's ``network-topology-index`` (-1 when absent, unreadable or for no pod)."""
    if pod is None:
        return -1
    raw = pod.metadata.annotations.get(ANNOTATION_NETWORK_TOPOLOGY_INDEX, "")
    if not raw:
        return -1
    sign = raw[0] in "+-"
    digits = raw[1:] if sign else raw
    # strconv.Atoi: optional sign, ASCII digits only.
    if not digits or not digits.isascii() or not digits.isdigit():
        return -1
    return int(raw)


def topology_selector(pod: Pod) -> str:
    """The pod's ``network-topology-selector`` ("" for none)."""
    return pod.metadata.annotations.get(ANNOTATION_NETWORK_TOPOLOGY_SELECTOR, "")


def index_order_key(pod: Pod) -> tuple[int, int, str]:
    """``SortPodsByIndex`` as a key: indexed pods (>= 0) first by index, then the rest; ties by name."""
    index = topology_index(pod)
    return (0, index, pod.metadata.name) if index >= 0 else (1, 0, pod.metadata.name)


def sort_pods_by_index(pods: Sequence[Pod]) -> list[Pod]:
    return sorted(pods, key=index_order_key)
