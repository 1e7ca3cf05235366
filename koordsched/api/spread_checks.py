"""The API server's checks of ``spec.topologySpreadConstraints`` (``validateTopologySpreadConstraints``).

A cluster never sends a pod that fails them; a manifest given to the simulator may. Without
them PodTopologySpread would half-honour such a pod (a misspelt ``whenUnsatisfiable`` drops
the constraint silently, ``maxSkew: 0`` refuses every node), so the pod is refused where it
enters, with the API server's words (:func:`koordsched.api.validation.pod_errors`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from koordsched.api.core import LabelSelector, TopologySpreadConstraint
from koordsched.api.field_errors import invalid, not_supported, required
from koordsched.api.selectors import is_qualified_name, is_valid_label_value

__all__ = [
    "INCLUSION_POLICIES",
    "LABEL_NAME_DETAIL",
    "WHEN_UNSATISFIABLE",
    "label_selector_errors",
    "spread_constraint_errors",
]

DO_NOT_SCHEDULE: Final = "DoNotSchedule"
#: ``supportedScheduleActions``, sorted as ``sets.List`` prints it.
WHEN_UNSATISFIABLE: Final = (DO_NOT_SCHEDULE, "ScheduleAnyway")
INCLUSION_POLICIES: Final = ("Honor", "Ignore")

_NOT_POSITIVE: Final = "must be greater than zero"
LABEL_NAME_DETAIL: Final = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_VALUE_DETAIL: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def _duplicate(path: str, value: str) -> str:
    return f'{path}: Duplicate value: "{value}"'


def _forbidden(path: str, detail: str) -> str:
    return f"{path}: Forbidden: {detail}"


def _label_map_errors(path: str, labels: Mapping[str, str]) -> list[str]:
    errs: list[str] = []
    for k, v in labels.items():
        if not is_qualified_name(k):
            errs.append(invalid(path, k, LABEL_NAME_DETAIL))
        if not is_valid_label_value(v):
            errs.append(invalid(path, v, _VALUE_DETAIL))
    return errs


def label_selector_errors(path: str, sel: LabelSelector | None) -> list[str]:
    """``ValidateLabelSelector``: label syntax, and each requirement's operator and values."""
    if sel is None:
        return []
    errs = _label_map_errors(f"{path}.matchLabels", sel.match_labels)
    for i, req in enumerate(sel.match_expressions):
        here = f"{path}.matchExpressions[{i}]"
        if req.operator in ("In", "NotIn"):
            if not req.values:
                errs.append(
                    required(f"{here}.values", "must be specified when `operator` is 'In' or 'NotIn'")
                )
        elif req.operator in ("Exists", "DoesNotExist"):
            if req.values:
                errs.append(
                    _forbidden(
                        f"{here}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                    )
                )
        else:
            errs.append(invalid(f"{here}.operator", req.operator, "not a valid selector operator"))
        if not is_qualified_name(req.key):
            errs.append(invalid(f"{here}.key", req.key, LABEL_NAME_DETAIL))
        for j, v in enumerate(req.values):
            if not is_valid_label_value(v):
                errs.append(invalid(f"{here}.values[{j}]", v, _VALUE_DETAIL))
    return errs


def _match_label_keys_errors(path: str, c: TopologySpreadConstraint) -> list[str]:
    if not c.match_label_keys:
        return []
    errs: list[str] = []
    sel = c.label_selector
    if sel is None:
        errs.append(_forbidden(path, "must not be specified when labelSelector is not set"))
    in_selector = set() if sel is None else {*sel.match_labels, *(r.key for r in sel.match_expressions)}
    for j, key in enumerate(c.match_label_keys):
        if not is_qualified_name(key):
            errs.append(invalid(f"{path}[{j}]", key, LABEL_NAME_DETAIL))
        if key in in_selector:
            errs.append(invalid(f"{path}[{j}]", key, "exists in both matchLabelKeys and labelSelector"))
    return errs


def spread_constraint_errors(constraints: Sequence[TopologySpreadConstraint]) -> list[str]:
    """Every field error of a pod's ``spec.topologySpreadConstraints``, as the API server words it."""
    errs: list[str] = []
    for i, c in enumerate(constraints):
        path = f"spec.topologySpreadConstraints[{i}]"
        if c.max_skew <= 0:
            errs.append(invalid(f"{path}.maxSkew", c.max_skew, _NOT_POSITIVE))
        if not c.topology_key:
            errs.append(required(f"{path}.topologyKey", "can not be empty"))
        if c.when_unsatisfiable not in WHEN_UNSATISFIABLE:
            errs.append(not_supported(f"{path}.whenUnsatisfiable", c.when_unsatisfiable, WHEN_UNSATISFIABLE))
        # {topologyKey, whenUnsatisfiable} names one constraint: compared with the ones after it.
        for other in constraints[i + 1 :]:
            if (other.topology_key, other.when_unsatisfiable) == (c.topology_key, c.when_unsatisfiable):
                pair = f"{{{c.topology_key}, {c.when_unsatisfiable}}}"
                errs.append(_duplicate(f"{path}.{{topologyKey, whenUnsatisfiable}}", pair))
                break
        if c.min_domains is not None:
            if c.min_domains <= 0:
                errs.append(invalid(f"{path}.minDomains", c.min_domains, _NOT_POSITIVE))
            if c.when_unsatisfiable != DO_NOT_SCHEDULE:
                detail = (
                    f"can only use minDomains if whenUnsatisfiable={DO_NOT_SCHEDULE}, "
                    f"not {c.when_unsatisfiable}"
                )
                errs.append(invalid(f"{path}.minDomains", c.min_domains, detail))
        for field, policy in (
            ("nodeAffinityPolicy", c.node_affinity_policy),
            ("nodeTaintsPolicy", c.node_taints_policy),
        ):
            if policy is not None and policy not in INCLUSION_POLICIES:
                errs.append(not_supported(f"{path}.{field}", policy, INCLUSION_POLICIES))
        errs.extend(_match_label_keys_errors(f"{path}.matchLabelKeys", c))
        errs.extend(label_selector_errors(f"{path}.labelSelector", c.label_selector))
    return errs
