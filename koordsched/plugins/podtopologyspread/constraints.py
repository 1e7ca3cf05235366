"""A pod's topology spread constraints as the plugin evaluates them, and their validation.

``filterTopologySpreadConstraints``: the constraints of one ``whenUnsatisfiable`` action, each
with its selector (``matchLabelKeys`` merged in from the pod's labels), minDomains (1 when
unset) and node inclusion policies (affinity Honor, taints Ignore when unset). Which pods count
is a :class:`~koordsched.framework.pod_topology.Term`: the pod's namespace, the selector, and
never a terminating pod.

Pods the API server would have refused (a cluster never sends them; a simulator manifest
may) are refused here with the API server's message, instead of being half-honoured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from koordsched.api.core import LabelSelector, LabelSelectorRequirement, Pod, TopologySpreadConstraint
from koordsched.api.selectors import (
    OP_IN,
    SelectorError,
    is_qualified_name,
    match_label_selector,
    validate_label_selector,
)
from koordsched.framework.pod_topology import Term
from koordsched.plugins.helper import duplicate, invalid, required, unsupported
from koordsched.plugins.podtopologyspread.args import (
    DO_NOT_SCHEDULE,
    HONOR,
    INCLUSION_POLICIES,
    LABEL_HOSTNAME,
    LABEL_NAME_DETAIL,
    SCHEDULE_ANYWAY,
    WHEN_UNSATISFIABLE,
)

_NOT_POSITIVE = "must be greater than zero"


@dataclass(frozen=True, slots=True)
class Constraint:
    max_skew: int
    topology_key: str
    #: The pods that count; None for a nil labelSelector, which selects no pod.
    term: Term | None
    min_domains: int
    honor_affinity: bool
    honor_taints: bool
    #: Whether the pod being scheduled matches its own selector (it then adds one to its domain).
    self_match: bool

    @property
    def hostname(self) -> bool:
        return self.topology_key == LABEL_HOSTNAME

    def matches(self, pod: Pod) -> bool:
        """The selector matches ``pod``'s labels (namespace and deletion aside)."""
        return self.term is not None and match_label_selector(self.term.selector, pod.metadata.labels)


@dataclass(frozen=True, slots=True)
class Constraints:
    """A pod's constraints for the Filter (DoNotSchedule) and the Score (ScheduleAnyway)."""

    hard: tuple[Constraint, ...]
    soft: tuple[Constraint, ...]
    #: The pod's own (True) or the plugin's default constraints (False).
    own: bool


NONE = Constraints((), (), own=False)


def _merged(
    selector: LabelSelector | None, keys: Sequence[str], labels: dict[str, str]
) -> LabelSelector | None:
    """``mergeLabelSetWithSelector``: the pod's values of ``keys`` ANDed to the selector; a nil
    selector stays nil (it selects nothing whatever is added)."""
    if selector is None or not keys:
        return selector
    extra = [LabelSelectorRequirement(key=k, operator=OP_IN, values=[labels[k]]) for k in keys if k in labels]
    if not extra:
        return selector
    return LabelSelector(
        match_labels=dict(selector.match_labels),
        match_expressions=[*extra, *selector.match_expressions],
    )


def _constraint(spec: TopologySpreadConstraint, selector: LabelSelector | None, pod: Pod) -> Constraint:
    meta = pod.metadata
    term = None if selector is None else Term(frozenset((meta.namespace,)), selector, skip_terminating=True)
    return Constraint(
        max_skew=spec.max_skew,
        topology_key=spec.topology_key,
        term=term,
        min_domains=spec.min_domains if spec.min_domains is not None else 1,
        honor_affinity=(spec.node_affinity_policy or HONOR) == HONOR,
        honor_taints=spec.node_taints_policy == HONOR,
        self_match=selector is not None and match_label_selector(selector, meta.labels),
    )


def own_constraints(pod: Pod) -> Constraints:
    """The pod's ``spec.topologySpreadConstraints`` (already validated)."""
    hard: list[Constraint] = []
    soft: list[Constraint] = []
    labels = pod.metadata.labels
    for spec in pod.spec.topology_spread_constraints:
        selector = _merged(spec.label_selector, spec.match_label_keys, labels)
        target = hard if spec.when_unsatisfiable == DO_NOT_SCHEDULE else soft
        target.append(_constraint(spec, selector, pod))
    return Constraints(tuple(hard), tuple(soft), own=True)


def default_constraints(
    specs: Sequence[TopologySpreadConstraint], selector: LabelSelector, pod: Pod
) -> Constraints:
    """``buildDefaultConstraints``: the args' constraints, each with the pod's default selector
    (Services and controller; :mod:`koordsched.plugins.podtopologyspread.defaults`)."""
    hard = tuple(_constraint(s, selector, pod) for s in specs if s.when_unsatisfiable == DO_NOT_SCHEDULE)
    soft = tuple(_constraint(s, selector, pod) for s in specs if s.when_unsatisfiable == SCHEDULE_ANYWAY)
    return Constraints(hard, soft, own=False)


def validation_errors(pod: Pod) -> list[str]:
    """What ``validateTopologySpreadConstraints`` (the API server's pod validation) reports."""
    errors: list[str] = []
    specs = pod.spec.topology_spread_constraints
    for i, c in enumerate(specs):
        path = f"spec.topologySpreadConstraints[{i}]"
        if c.max_skew <= 0:
            errors.append(invalid(f"{path}.maxSkew", c.max_skew, _NOT_POSITIVE))
        if not c.topology_key:
            errors.append(required(f"{path}.topologyKey", "can not be empty"))
        if c.when_unsatisfiable not in WHEN_UNSATISFIABLE:
            errors.append(unsupported(f"{path}.whenUnsatisfiable", c.when_unsatisfiable, WHEN_UNSATISFIABLE))
        for other in specs[i + 1 :]:
            if (other.topology_key, other.when_unsatisfiable) == (c.topology_key, c.when_unsatisfiable):
                errors.append(
                    duplicate(
                        f"{path}.{{topologyKey, whenUnsatisfiable}}",
                        f"{{{c.topology_key}, {c.when_unsatisfiable}}}",
                    )
                )
                break
        if c.min_domains is not None:
            if c.min_domains <= 0:
                errors.append(invalid(f"{path}.minDomains", c.min_domains, _NOT_POSITIVE))
            if c.when_unsatisfiable != DO_NOT_SCHEDULE:
                errors.append(
                    invalid(
                        f"{path}.minDomains",
                        c.min_domains,
                        f"can only use minDomains if whenUnsatisfiable={DO_NOT_SCHEDULE}, "
                        f"not {c.when_unsatisfiable}",
                    )
                )
        for field, policy in (
            ("nodeAffinityPolicy", c.node_affinity_policy),
            ("nodeTaintsPolicy", c.node_taints_policy),
        ):
            if policy is not None and policy not in INCLUSION_POLICIES:
                errors.append(unsupported(f"{path}.{field}", policy, INCLUSION_POLICIES))
        errors.extend(_match_label_keys_errors(f"{path}.matchLabelKeys", c))
        try:
            validate_label_selector(c.label_selector)
        except SelectorError as err:
            errors.append(f"{path}.labelSelector.{err}")
    return errors


def _match_label_keys_errors(path: str, c: TopologySpreadConstraint) -> list[str]:
    if not c.match_label_keys:
        return []
    errors: list[str] = []
    sel = c.label_selector
    if sel is None:
        errors.append(f"{path}: Forbidden: must not be specified when labelSelector is not set")
    in_selector = set() if sel is None else {*sel.match_labels, *(r.key for r in sel.match_expressions)}
    for j, key in enumerate(c.match_label_keys):
        if not is_qualified_name(key):
            errors.append(invalid(f"{path}[{j}]", key, LABEL_NAME_DETAIL))
        if key in in_selector:
            errors.append(invalid(f"{path}[{j}]", key, "exists in both matchLabelKeys and labelSelector"))
    return errors


def invalid_pod_message(pod: Pod, errors: list[str]) -> str:
    """The API server's refusal: ``Pod "name" is invalid: <error>`` (several in brackets)."""
    detail = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return f'Pod "{pod.metadata.name}" is invalid: {detail}'
