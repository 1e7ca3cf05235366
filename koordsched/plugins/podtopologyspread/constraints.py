"""A pod's topology spread constraints as the plugin evaluates them, and their validation.

``filterTopologySpreadConstraints``: the constraints of one ``whenUnsatisfiable`` action, each
with its selector (``matchLabelKeys`` merged in from the pod's labels), minDomains (1 when
unset) and node inclusion policies (affinity Honor, taints Ignore when unset). Which pods count
is a :class:`~koordsched.framework.pod_topology.Term`: the pod's namespace, the selector, and
never a terminating pod.

Pods whose constraints the API server would refuse never get here: they are refused where
they enter (:mod:`koordsched.api.spread_checks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from koordsched.api.core import LabelSelector, LabelSelectorRequirement, Pod, TopologySpreadConstraint
from koordsched.api.selectors import OP_IN, match_label_selector
from koordsched.framework.pod_topology import Term
from koordsched.plugins.podtopologyspread.args import DO_NOT_SCHEDULE, HONOR, LABEL_HOSTNAME, SCHEDULE_ANYWAY


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
