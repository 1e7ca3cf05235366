"""PodTopologySpreadArgs (kubescheduler.config.k8s.io/v1), its defaulting and validation.

``defaultingType`` defaults to ``System`` (``SetDefaults_PodTopologySpreadArgs``): the plugin
then uses kube-scheduler's built-in constraints, hostname maxSkew 3 and zone maxSkew 5, both
ScheduleAnyway. With ``List`` it uses ``defaultConstraints`` (none at all when the list is
empty). ``validate`` mirrors ``ValidatePodTopologySpreadArgs`` message for message, and also
checks what upstream leaves unchecked but would silently misread (a node inclusion policy
other than Honor/Ignore, a non-positive minDomains).
"""

from __future__ import annotations

import msgspec

from koordsched.api.core import LabelSelector, TopologySpreadConstraint
from koordsched.api.selectors import is_qualified_name
from koordsched.api.spread_checks import INCLUSION_POLICIES, LABEL_NAME_DETAIL, WHEN_UNSATISFIABLE
from koordsched.config.catalog import PluginArgs
from koordsched.plugins.helper import duplicate, invalid, raise_field_errors, required, unsupported

SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"

HONOR = "Honor"
IGNORE = "Ignore"

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE = "topology.kubernetes.io/zone"


#: ``systemDefaultConstraints``, in upstream's order.
SYSTEM_DEFAULT_CONSTRAINTS: tuple[TopologySpreadConstraint, ...] = (
    TopologySpreadConstraint(max_skew=3, topology_key=LABEL_HOSTNAME, when_unsatisfiable=SCHEDULE_ANYWAY),
    TopologySpreadConstraint(max_skew=5, topology_key=LABEL_ZONE, when_unsatisfiable=SCHEDULE_ANYWAY),
)


class DefaultConstraint(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """A ``v1.TopologySpreadConstraint`` as the args carry it (decoded strictly, as the config is)."""

    max_skew: int = 0
    topology_key: str = ""
    when_unsatisfiable: str = ""
    #: Must stay unset: the selector is deduced for each pod.
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] = []

    def as_constraint(self) -> TopologySpreadConstraint:
        return TopologySpreadConstraint(
            max_skew=self.max_skew,
            topology_key=self.topology_key,
            when_unsatisfiable=self.when_unsatisfiable,
            min_domains=self.min_domains,
            node_affinity_policy=self.node_affinity_policy,
            node_taints_policy=self.node_taints_policy,
            match_label_keys=list(self.match_label_keys),
        )


class PodTopologySpreadArgs(PluginArgs):
    default_constraints: list[DefaultConstraint] = []
    #: "" (unset) is defaulted to System.
    defaulting_type: str = ""

    def __post_init__(self) -> None:
        if self.defaulting_type == "":
            self.defaulting_type = SYSTEM_DEFAULTING

    @property
    def system_defaulted(self) -> bool:
        return self.defaulting_type == SYSTEM_DEFAULTING

    def constraints(self) -> tuple[TopologySpreadConstraint, ...]:
        """The default constraints the plugin applies to pods without their own."""
        if self.system_defaulted:
            return SYSTEM_DEFAULT_CONSTRAINTS
        return tuple(c.as_constraint() for c in self.default_constraints)

    def validate(self) -> None:
        errors: list[str] = []
        kind = self.defaulting_type
        if kind not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
            errors.append(unsupported("defaultingType", kind, (SYSTEM_DEFAULTING, LIST_DEFAULTING)))
        elif kind == SYSTEM_DEFAULTING and self.default_constraints:
            errors.append(invalid("defaultingType", kind, "when .defaultConstraints are not empty"))
        for i, c in enumerate(self.default_constraints):
            path = f"defaultConstraints[{i}]"
            if c.max_skew <= 0:
                errors.append(invalid(f"{path}.maxSkew", c.max_skew, "not in valid range (0, inf)"))
            if not c.topology_key:
                errors.append(required(f"{path}.topologyKey", "can not be empty"))
            elif not is_qualified_name(c.topology_key):
                errors.append(invalid(f"{path}.topologyKey", c.topology_key, LABEL_NAME_DETAIL))
            if not c.when_unsatisfiable:
                errors.append(required(f"{path}.whenUnsatisfiable", "can not be empty"))
            elif c.when_unsatisfiable not in WHEN_UNSATISFIABLE:
                errors.append(
                    unsupported(f"{path}.whenUnsatisfiable", c.when_unsatisfiable, WHEN_UNSATISFIABLE)
                )
            if c.label_selector is not None:
                errors.append(
                    f"{path}.labelSelector: Forbidden: constraint must not define a selector, "
                    "as they deduced for each pod"
                )
            for other in self.default_constraints[:i]:
                if (other.topology_key, other.when_unsatisfiable) == (c.topology_key, c.when_unsatisfiable):
                    errors.append(duplicate(path, f"{{{c.topology_key}, {c.when_unsatisfiable}}}"))
                    break
            # Beyond upstream: it reads any other policy as Ignore and any minDomains as given.
            for field, policy in (
                ("nodeAffinityPolicy", c.node_affinity_policy),
                ("nodeTaintsPolicy", c.node_taints_policy),
            ):
                if policy is not None and policy not in INCLUSION_POLICIES:
                    errors.append(unsupported(f"{path}.{field}", policy, INCLUSION_POLICIES))
            if c.min_domains is not None and c.min_domains <= 0:
                errors.append(invalid(f"{path}.minDomains", c.min_domains, "must be greater than zero"))
        raise_field_errors(errors)
