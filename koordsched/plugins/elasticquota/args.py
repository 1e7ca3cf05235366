"""ElasticQuotaArgs (Koordinator v1.6, spec 4.5 "Args"): defaults and validation.

Defaults as ``SetDefaults_ElasticQuotaArgs``: ``delayEvictTime`` 120s, ``revokePodInterval`` 1s,
the default and system quota groups' max cpu and memory ``MaxInt64/5`` (cores and bytes),
``quotaGroupNamespace`` ``koordinator-system``, ``enableRuntimeQuota`` true, the rest false.

``delayEvictTime``, ``revokePodInterval`` and ``monitorAllQuotas`` drive the overuse revoke
controller (:mod:`~koordsched.plugins.elasticquota.revoke`), which evicts running pods of a quota
whose used stays above its runtime; it runs only when ``monitorAllQuotas`` is true.
"""

from __future__ import annotations

from typing import Final

from koordsched.api.core import ResourceList
from koordsched.api.durations import DurationError, duration_ns
from koordsched.api.quantity import QuantityError
from koordsched.api.resources import resource_list
from koordsched.config.catalog import PluginArgs
from koordsched.plugins.helper import invalid, raise_field_errors

DEFAULT_QUOTA_GROUP_NAMESPACE: Final = "koordinator-system"
#: ``math.MaxInt64 / 5``, in cores for cpu and bytes for memory.
DEFAULT_GROUP_MAX: Final = (2**63 - 1) // 5


def default_group_max() -> ResourceList:
    return {"cpu": DEFAULT_GROUP_MAX, "memory": DEFAULT_GROUP_MAX}


class ElasticQuotaArgs(PluginArgs):
    delay_evict_time: str | None = None
    revoke_pod_interval: str | None = None
    default_quota_group_max: ResourceList | None = None
    system_quota_group_max: ResourceList | None = None
    quota_group_namespace: str = ""
    monitor_all_quotas: bool | None = None
    enable_check_parent_quota: bool | None = None
    enable_runtime_quota: bool | None = None

    def __post_init__(self) -> None:
        if self.delay_evict_time is None:
            self.delay_evict_time = "120s"
        if self.revoke_pod_interval is None:
            self.revoke_pod_interval = "1s"
        if not self.default_quota_group_max:
            self.default_quota_group_max = default_group_max()
        if not self.system_quota_group_max:
            self.system_quota_group_max = default_group_max()
        if not self.quota_group_namespace:
            self.quota_group_namespace = DEFAULT_QUOTA_GROUP_NAMESPACE
        if self.monitor_all_quotas is None:
            self.monitor_all_quotas = False
        if self.enable_check_parent_quota is None:
            self.enable_check_parent_quota = False
        if self.enable_runtime_quota is None:
            self.enable_runtime_quota = True

    @property
    def revoke_enabled(self) -> bool:
        return bool(self.monitor_all_quotas)

    def revoke_timing(self) -> tuple[float, float]:
        """(``delayEvictTime``, ``revokePodInterval``) in seconds (validated already)."""
        return duration_ns(self.delay_evict_time) / 1e9, duration_ns(self.revoke_pod_interval) / 1e9

    @property
    def check_parent(self) -> bool:
        return bool(self.enable_check_parent_quota)

    @property
    def runtime_enabled(self) -> bool:
        return bool(self.enable_runtime_quota)

    def default_max(self) -> dict[str, int]:
        return resource_list(self.default_quota_group_max or {})

    def system_max(self) -> dict[str, int]:
        return resource_list(self.system_quota_group_max or {})

    def validate(self) -> None:
        errors: list[str] = []
        for path, value in (
            ("delayEvictTime", self.delay_evict_time),
            ("revokePodInterval", self.revoke_pod_interval),
        ):
            try:
                ns = duration_ns(value)
            except DurationError as err:
                errors.append(invalid(path, value, str(err)))
                continue
            if ns < 0:
                errors.append(invalid(path, value, f"{path} should be a positive value"))
        for path, rl in (
            ("defaultQuotaGroupMax", self.default_quota_group_max),
            ("systemQuotaGroupMax", self.system_quota_group_max),
        ):
            for name, q in (rl or {}).items():
                try:
                    amount = resource_list({name: q})[name]
                except QuantityError as err:
                    errors.append(invalid(f"{path}[{name}]", str(q), str(err)))
                    continue
                if amount < 0:
                    errors.append(invalid(f"{path}[{name}]", str(q), "quantity should be a positive value"))
        raise_field_errors(errors)
