"""``MigrationControllerArgs`` (spec 7.2): fields, Koordinator's defaults and validation.

``evictQPS`` is a ``Float64OrString`` in Koordinator (the shipped config writes ``"10"``);
both forms are read. Limits that are unset mean unlimited, except ``maxMigratingPerNode``
(default 2) and the per-workload ones, derived from the replica count when unset.
"""

from __future__ import annotations

import math
from typing import Any, Final

import msgspec

from koordsched.api.core import LabelSelector
from koordsched.api.durations import DurationError, parse_duration
from koordsched.api.selectors import SelectorError, validate_label_selector
from koordsched.config.catalog import PluginArgs
from koordsched.descheduler.migration.node_selector import NodeSelectorSyntaxError, parse_node_selector
from koordsched.descheduler.plugins.common import Namespaces, namespaces_errors
from koordsched.plugins.helper import invalid, raise_field_errors, unsupported

RESERVATION_FIRST: Final = "ReservationFirst"
EVICT_DIRECTLY: Final = "EvictDirectly"
JOB_MODES: Final = (RESERVATION_FIRST, EVICT_DIRECTLY)
POLICY_EVICTION: Final = "Eviction"
POLICY_DELETE: Final = "Delete"
POLICY_SOFT: Final = "SoftEviction"
EVICTION_POLICIES: Final = (POLICY_EVICTION, POLICY_DELETE, POLICY_SOFT)
WORKLOAD: Final = "workload"
NAMESPACE: Final = "namespace"
_ARGS = "MigrationControllerArgs"


class _Part(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    pass


class PriorityThreshold(_Part):
    value: int | None = None
    name: str = ""


class ObjectLimiter(_Part):
    duration: str = "0s"
    max_migrating: int | str | None = None
    burst: int = 0


class ArbitrationArgs(_Part):
    enabled: bool = True
    interval: str = "500ms"


class DeleteOptions(_Part):
    grace_period_seconds: int | None = None
    propagation_policy: str | None = None
    dry_run: list[str] = []
    preconditions: dict[str, Any] | None = None
    api_version: str | None = None
    kind: str | None = None


def _default_object_limiters() -> dict[str, ObjectLimiter]:
    return {WORKLOAD: ObjectLimiter(duration="5m")}


class MigrationControllerArgs(PluginArgs):
    dry_run: bool = False
    max_concurrent_reconciles: int = 1
    evict_failed_bare_pods: bool = False
    evict_all_bare_pods: bool = False
    evict_local_storage_pods: bool = False
    evict_system_critical_pods: bool = False
    ignore_pvc_pods: bool = False
    priority_threshold: PriorityThreshold | None = None
    label_selector: LabelSelector | None = None
    namespaces: Namespaces | None = None
    node_fit: bool = False
    node_selector: str = ""
    max_migrating_globally: int | None = None
    max_migrating_per_node: int | None = 2
    max_migrating_per_namespace: int | None = None
    max_migrating_per_workload: int | str | None = None
    max_unavailable_per_workload: int | str | None = None
    skip_check_expected_replicas: bool = False
    object_limiters: dict[str, ObjectLimiter] = msgspec.field(default_factory=_default_object_limiters)
    default_job_mode: str = RESERVATION_FIRST
    default_job_ttl: str = msgspec.field(default="5m", name="defaultJobTTL")  # Koordinator spells TTL so
    scheduler_names: list[str] = msgspec.field(default_factory=lambda: ["koord-scheduler"])
    evict_qps: float | str = msgspec.field(default=10.0, name="evictQPS")
    evict_burst: int = 1
    eviction_policy: str = POLICY_EVICTION
    default_delete_options: DeleteOptions | None = None
    arbitration_args: ArbitrationArgs = msgspec.field(default_factory=ArbitrationArgs)

    @property
    def qps(self) -> float:
        return float(self.evict_qps)

    @property
    def ttl(self) -> float:
        return parse_duration(self.default_job_ttl)

    def validate(self) -> None:
        errs: list[str] = []
        try:
            qps = float(self.evict_qps)
            if not math.isfinite(qps) or qps < 0:
                errs.append(invalid(f"{_ARGS}.evictQPS", self.evict_qps, "must be a non-negative number"))
        except ValueError:
            errs.append(invalid(f"{_ARGS}.evictQPS", self.evict_qps, "must be a number"))
        if self.evict_burst < 0:
            errs.append(
                invalid(f"{_ARGS}.evictBurst", self.evict_burst, "must be greater than or equal to 0")
            )
        if self.default_job_mode not in JOB_MODES:
            errs.append(unsupported(f"{_ARGS}.defaultJobMode", self.default_job_mode, JOB_MODES))
        if self.eviction_policy == POLICY_SOFT:
            # Koordinator's SoftEviction only marks the pod for another component to evict;
            # koordsched has no such component, so the policy would silently do nothing.
            errs.append(
                invalid(f"{_ARGS}.evictionPolicy", self.eviction_policy, "not supported by koordsched")
            )
        elif self.eviction_policy not in EVICTION_POLICIES:
            errs.append(unsupported(f"{_ARGS}.evictionPolicy", self.eviction_policy, EVICTION_POLICIES))
        if self.max_concurrent_reconciles <= 0:
            errs.append(
                invalid(
                    f"{_ARGS}.maxConcurrentReconciles",
                    self.max_concurrent_reconciles,
                    "must be greater than 0",
                )
            )
        for field, value in (
            ("maxMigratingGlobally", self.max_migrating_globally),
            ("maxMigratingPerNode", self.max_migrating_per_node),
            ("maxMigratingPerNamespace", self.max_migrating_per_namespace),
        ):
            if value is not None and value < 0:
                errs.append(invalid(f"{_ARGS}.{field}", value, "must be greater than or equal to 0"))
        for field, v in (
            ("maxMigratingPerWorkload", self.max_migrating_per_workload),
            ("maxUnavailablePerWorkload", self.max_unavailable_per_workload),
        ):
            if v is not None and int_or_percent_error(v) is not None:
                errs.append(invalid(f"{_ARGS}.{field}", v, int_or_percent_error(v) or ""))
        for field, text in (
            ("defaultJobTTL", self.default_job_ttl),
            ("arbitrationArgs.interval", self.arbitration_args.interval),
        ):
            try:
                if parse_duration(text) < 0:
                    errs.append(invalid(f"{_ARGS}.{field}", text, "must not be negative"))
            except DurationError as err:
                errs.append(f"{_ARGS}.{field}: {err}")
        for kind, lim in sorted(self.object_limiters.items()):
            if kind not in (WORKLOAD, NAMESPACE):
                errs.append(unsupported(f"{_ARGS}.objectLimiters", kind, (WORKLOAD, NAMESPACE)))
            try:
                parse_duration(lim.duration)
            except DurationError as err:
                errs.append(f"{_ARGS}.objectLimiters[{kind}].duration: {err}")
            if lim.max_migrating is not None and int_or_percent_error(lim.max_migrating) is not None:
                errs.append(
                    invalid(
                        f"{_ARGS}.objectLimiters[{kind}].maxMigrating",
                        lim.max_migrating,
                        "must be an integer or a percentage",
                    )
                )
        if (
            self.priority_threshold is not None
            and self.priority_threshold.value is not None
            and self.priority_threshold.name
        ):
            errs.append(
                invalid(
                    f"{_ARGS}.priorityThreshold",
                    self.priority_threshold.name,
                    "only one of priorityThreshold fields can be set",
                )
            )
        try:
            validate_label_selector(self.label_selector)
        except SelectorError as err:
            errs.append(f"{_ARGS}.labelSelector: Invalid value: {err}")
        errs += namespaces_errors(f"{_ARGS}.namespaces", self.namespaces)
        if self.node_selector:
            try:
                parse_node_selector(self.node_selector)
            except NodeSelectorSyntaxError as err:
                errs.append(invalid(f"{_ARGS}.nodeSelector", self.node_selector, str(err)))
        for name in self.scheduler_names:
            if not name:
                errs.append(invalid(f"{_ARGS}.schedulerNames", name, "must not be empty"))
        raise_field_errors(errs)


def int_or_percent_error(value: int | str) -> str | None:
    if isinstance(value, int):
        return None if value >= 0 else "must be greater than or equal to 0"
    if value.endswith("%") and value[:-1].isdigit():
        return None
    return 'must be an integer or a percentage ("10%")'


def scaled(value: int | str, total: int, *, round_up: bool) -> int:
    """``intstr.GetScaledValueFromIntOrPercent``."""
    if isinstance(value, int):
        return value
    pct = int(value[:-1])
    return -(-pct * total // 100) if round_up else pct * total // 100
