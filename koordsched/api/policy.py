"""PodDisruptionBudget (policy/v1, or policy/v1beta1 on API servers before 1.21): what preemption reads.

Only the fields DefaultPreemption reads are declared: the selector and the status's
``disruptionsAllowed`` and ``disruptedPods``. policy/v1beta1 objects decode into the same
Struct (their fields are the same).
"""

from __future__ import annotations

import re

import msgspec

from koordsched.api.core import LabelSelector, ObjectMeta
from koordsched.api.selectors import SelectorError, validate_label_selector

INT32_MAX = 2**31 - 1


class _Base(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    pass


class PodDisruptionBudgetSpec(_Base):
    selector: LabelSelector | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None


class PodDisruptionBudgetStatus(_Base):
    disruptions_allowed: int = 0
    #: Pod name -> when the eviction was admitted: already counted against the budget.
    disrupted_pods: dict[str, str] = {}
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0


class PodDisruptionBudget(_Base):
    api_version: str = "policy/v1"
    kind: str = "PodDisruptionBudget"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodDisruptionBudgetSpec = msgspec.field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = msgspec.field(default_factory=PodDisruptionBudgetStatus)


def check_pod_disruption_budget(pdb: PodDisruptionBudget) -> None:
    """What the API server would refuse: an invalid selector or a disruptionsAllowed outside int32.

    Raises ValueError naming the field; such a PDB is set aside (upstream's preemption treats a
    selector it cannot parse as matching no pod, so setting it aside changes nothing).
    """
    try:
        validate_label_selector(pdb.spec.selector)
    except SelectorError as err:
        raise ValueError(f"spec.selector: {err}") from None
    allowed = pdb.status.disruptions_allowed
    if not -(2**31) <= allowed <= INT32_MAX:
        raise ValueError(f"status.disruptionsAllowed: Invalid value: {allowed}: must fit in int32")
    errs = _int_or_percent_errors("spec.minAvailable", pdb.spec.min_available)
    errs += _int_or_percent_errors("spec.maxUnavailable", pdb.spec.max_unavailable)
    if pdb.spec.min_available is not None and pdb.spec.max_unavailable is not None:
        errs.insert(
            0,
            f"spec.minAvailable: Invalid value: {_shown(pdb.spec.min_available)}: "
            "minAvailable and maxUnavailable cannot be both set",
        )
    if errs:
        raise ValueError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")


_PERCENT = re.compile(r"[0-9]+%")


def _shown(value: int | str) -> str:
    return str(value) if isinstance(value, int) else f'"{value}"'


def _int_or_percent_errors(path: str, value: int | str | None) -> list[str]:
    """The API server's ValidatePositiveIntOrPercent and IsNotMoreThan100Percent."""
    if value is None:
        return []
    if isinstance(value, bool):
        return [f"{path}: Invalid value: {value}: must be an integer or percentage (e.g '5%')"]
    if isinstance(value, int):
        if value < 0:
            return [f"{path}: Invalid value: {value}: must be greater than or equal to 0"]
        if value > INT32_MAX:
            return [f"{path}: Invalid value: {value}: must fit in int32"]
        return []
    if not _PERCENT.fullmatch(value):
        return [
            f"{path}: Invalid value: {_shown(value)}: a valid percent string must be a numeric string "
            "followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
        ]
    if int(value[:-1]) > 100:
        return [f"{path}: Invalid value: {_shown(value)}: must not be greater than 100%"]
    return []
