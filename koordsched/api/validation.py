"""Checks the API server makes on the fields the scheduler reads of Pods, Nodes and PriorityClasses.

In a cluster the API server refuses these objects before anyone sees them; manifests given
to the simulator (and objects written by something that bypassed validation) have not been
through it. Each check returns the API server's field errors (``pod_errors``) or raises
:class:`~koordsched.api.field_errors.Refused` with its whole message (``check_*``), once per
object as it arrives, never per scheduling cycle.

What happens to a refused object: a pending Pod is reported unschedulable with the message
(a ``FailedScheduling`` event and condition in a cluster), a Node is left out of scheduling
(``Cache.bad_nodes``), a PriorityClass is ignored (pods naming it fail as if it were missing).
Bound pods are not checked: whatever they say, they run and hold what they hold.
"""

from __future__ import annotations

from typing import Final

from koordsched.api.core import Affinity, Container, Node, Pod, PriorityClass, Taint, Toleration
from koordsched.api.field_errors import Refused, invalid, invalid_object, not_supported, required
from koordsched.api.quantity import QuantityError, parse_quantity
from koordsched.api.spread_checks import spread_constraint_errors
from koordsched.api.taints import NO_EXECUTE, NO_SCHEDULE, OP_EQUAL, OP_EXISTS, PREFER_NO_SCHEDULE

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "check_node",
    "check_pending_pod",
    "check_priority_class",
    "node_errors",
    "pod_errors",
    "priority_class_errors",
]

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
_INT32_DETAIL: Final = f"must be a 32-bit integer ({INT32_MIN} to {INT32_MAX})"

#: ``validateTaintEffect``'s list, in its order (NoScheduleNoAdmit is not implemented upstream).
TAINT_EFFECTS: Final = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)
TOLERATION_OPERATORS: Final = (OP_EQUAL, OP_EXISTS)
#: ``supportedPortProtocols``, sorted as ``sets.List`` prints it.
PORT_PROTOCOLS: Final = ("SCTP", "TCP", "UDP")
_PORT_RANGE: Final = "must be between 1 and 65535, inclusive"


def _taint_effect(path: str, effect: str, allow_empty: bool) -> list[str]:
    if not effect:
        return [] if allow_empty else [required(path)]
    if effect not in TAINT_EFFECTS:
        return [not_supported(path, effect, TAINT_EFFECTS)]
    return []


def _toleration(path: str, t: Toleration) -> list[str]:
    """``ValidateTolerations`` for one toleration (key syntax aside: an odd key just matches nothing)."""
    errs: list[str] = []
    if not t.key and t.operator != OP_EXISTS:
        errs.append(
            invalid(
                f"{path}.operator",
                t.operator,
                'operator must be Exists when `key` is empty, which means "match all values and all keys"',
            )
        )
    if t.toleration_seconds is not None and t.effect != NO_EXECUTE:
        errs.append(
            invalid(f"{path}.effect", t.effect, "effect must be 'NoExecute' when `tolerationSeconds` is set")
        )
    if t.operator == OP_EXISTS:
        if t.value:
            errs.append(
                invalid(f"{path}.operator", t.operator, "value must be empty when `operator` is 'Exists'")
            )
    elif t.operator not in ("", OP_EQUAL):
        errs.append(not_supported(f"{path}.operator", t.operator, TOLERATION_OPERATORS))
    errs.extend(_taint_effect(f"{path}.effect", t.effect, allow_empty=True))
    return errs


def _ports(path: str, c: Container) -> list[str]:
    """``validateContainerPorts``: the port numbers and protocol NodePorts and the kubelet use."""
    errs: list[str] = []
    for i, p in enumerate(c.ports):
        here = f"{path}.ports[{i}]"
        if p.container_port == 0:
            errs.append(required(f"{here}.containerPort"))
        elif not 1 <= p.container_port <= 65535:
            errs.append(invalid(f"{here}.containerPort", p.container_port, _PORT_RANGE))
        if p.host_port != 0 and not 1 <= p.host_port <= 65535:
            errs.append(invalid(f"{here}.hostPort", p.host_port, _PORT_RANGE))
        # An empty protocol is defaulted to TCP before validation.
        if p.protocol and p.protocol not in PORT_PROTOCOLS:
            errs.append(not_supported(f"{here}.protocol", p.protocol, PORT_PROTOCOLS))
    return errs


_HOST_NETWORK_PORT = "must match `containerPort` when `hostNetwork` is true"


def _host_network_ports(path: str, c: Container) -> list[str]:
    """``validateHostNetwork``: a host-network pod listens on the node, so a host port given must be
    the container port (an absent one is defaulted to it before validation)."""
    return [
        invalid(
            f"{path}.ports[{i}].hostPort",
            p.host_port,
            "must match `containerPort` when `hostNetwork` is true",
        )
        for i, p in enumerate(c.ports)
        if p.host_port != 0 and p.host_port != p.container_port
    ]


def _affinity_weights(affinity: Affinity | None) -> list[str]:
    """``validatePreferredSchedulingTerms`` and ``validateWeightedPodAffinityTerms``: weights 1-100."""
    if affinity is None:
        return []
    weights: list[tuple[str, int]] = []
    if affinity.node_affinity is not None:
        path = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        prefs = affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
        weights += [(f"{path}[{i}].weight", p.weight) for i, p in enumerate(prefs)]
    for field, pa in (
        ("podAffinity", affinity.pod_affinity),
        ("podAntiAffinity", affinity.pod_anti_affinity),
    ):
        if pa is not None:
            path = f"spec.affinity.{field}.preferredDuringSchedulingIgnoredDuringExecution"
            terms = pa.preferred_during_scheduling_ignored_during_execution
            weights += [(f"{path}[{i}].weight", t.weight) for i, t in enumerate(terms)]
    return [invalid(path, w, "must be in the range 1-100") for path, w in weights if not 1 <= w <= 100]


def pod_errors(pod: Pod) -> list[str]:
    """The API server's field errors for what the scheduler reads of a pod: tolerations,
    container ports, preferred affinity weights, topology spread constraints and
    ``spec.priority``. Quantities are checked where requests are read."""
    spec = pod.spec
    errs: list[str] = []
    for i, t in enumerate(spec.tolerations):
        errs.extend(_toleration(f"spec.tolerations[{i}]", t))
    for field, containers in (("containers", spec.containers), ("initContainers", spec.init_containers)):
        for i, c in enumerate(containers):
            errs.extend(_ports(f"spec.{field}[{i}]", c))
            if spec.host_network:
                errs.extend(_host_network_ports(f"spec.{field}[{i}]", c))
    errs.extend(_affinity_weights(spec.affinity))
    errs.extend(spread_constraint_errors(spec.topology_spread_constraints))
    if spec.priority is not None and not INT32_MIN <= spec.priority <= INT32_MAX:
        errs.append(invalid("spec.priority", spec.priority, _INT32_DETAIL))
    return errs


def check_pending_pod(pod: Pod) -> None:
    """Raise :class:`Refused` for a pod still to be scheduled that the API server would refuse.

    A bound pod passes whatever it says: it runs on its node and holds what it holds.
    """
    if pod.spec.node_name:
        return
    errs = pod_errors(pod)
    if errs:
        raise Refused(invalid_object("Pod", pod.metadata.name, errs))


def _taint(path: str, taint: Taint) -> list[str]:
    errs = _taint_effect(f"{path}.effect", taint.effect, allow_empty=False)
    if not taint.key:
        errs.insert(0, invalid(f"{path}.key", taint.key, "name part must be non-empty"))
    return errs


def node_errors(node: Node) -> list[str]:
    """The API server's field errors for a node's taints (``validateNodeTaints``) and negative
    capacity or allocatable (``ValidateResourceQuantityValue``). A malformed or too large amount
    is the cache's to report (``Cache.bad_nodes``)."""
    errs: list[str] = []
    for i, taint in enumerate(node.spec.taints):
        errs.extend(_taint(f"spec.taints[{i}]", taint))
    for field, resources in (("capacity", node.status.capacity), ("allocatable", node.status.allocatable)):
        for name, q in resources.items():
            try:
                negative = parse_quantity(q) < 0
            except QuantityError:
                continue
            if negative:
                errs.append(invalid(f"status.{field}[{name}]", q, "must be greater than or equal to 0"))
    return errs


def check_node(node: Node) -> None:
    """Raise :class:`Refused` for a node the API server would refuse (an unknown taint effect, a
    negative allocatable)."""
    errs = node_errors(node)
    if errs:
        raise Refused(invalid_object("Node", node.metadata.name, errs))


#: The API server's limit for classes users define, and the classes it defines itself.
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}
PREEMPTION_POLICIES = ("Never", "PreemptLowerPriority")


def priority_class_errors(pc: PriorityClass) -> list[str]:
    """What the API server refuses (``ValidatePriorityClass``): ``value`` wider than int32, a
    value above 1e9 for a class that is not a system one, a ``system-`` name it does not define,
    an unknown ``preemptionPolicy``."""
    errs: list[str] = []
    name = pc.metadata.name
    if not INT32_MIN <= pc.value <= INT32_MAX:
        errs.append(invalid("value", pc.value, _INT32_DETAIL))
    elif name.startswith("system-"):
        known = SYSTEM_PRIORITY_CLASSES.get(name)
        why = (
            f"{name} is not a known system priority class"
            if known is None
            else f"value of {name} PriorityClass must be {known}"
            if pc.value != known
            else f"globalDefault of {name} PriorityClass must be false"
            if pc.global_default
            else ""
        )
        if why:
            errs.append(
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for "
                f"system use only. error: {why}"
            )
    elif pc.value > HIGHEST_USER_DEFINABLE_PRIORITY:
        errs.append(
            "value: Forbidden: maximum allowed value of a user defined priority is "
            f"{HIGHEST_USER_DEFINABLE_PRIORITY}"
        )
    if pc.preemption_policy is not None and pc.preemption_policy not in PREEMPTION_POLICIES:
        errs.append(not_supported("preemptionPolicy", pc.preemption_policy, PREEMPTION_POLICIES))
    return errs


def check_priority_class(pc: PriorityClass) -> None:
    """Raise :class:`Refused` for a PriorityClass whose value does not fit the API's int32."""
    errs = priority_class_errors(pc)
    if errs:
        raise Refused(invalid_object("PriorityClass", pc.metadata.name, errs))
