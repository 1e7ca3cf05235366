"""``KubeSchedulerConfiguration`` as decoded, for ``kubescheduler.config.k8s.io/v1`` and ``v1beta3``.

Both versions have the same fields here, so one set of Structs serves both. Decoding is
strict, as kube-scheduler's is: an unknown field anywhere is an error. Defaults are
upstream's; the few that upstream applies to zero values as well ("" or ``0s``) are
applied when the config is resolved, not here.
"""

from __future__ import annotations

from typing import Any

import msgspec

CONFIG_GROUP = "kubescheduler.config.k8s.io"
CONFIG_VERSIONS = (f"{CONFIG_GROUP}/v1", f"{CONFIG_GROUP}/v1beta3")
CONFIG_KIND = "KubeSchedulerConfiguration"

#: Extension point name in the config -> attribute of :class:`Plugins`. ``multiPoint`` is not one.
POINT_FIELDS: dict[str, str] = {
    "preEnqueue": "pre_enqueue",
    "queueSort": "queue_sort",
    "preFilter": "pre_filter",
    "filter": "filter",
    "postFilter": "post_filter",
    "preScore": "pre_score",
    "score": "score",
    "reserve": "reserve",
    "permit": "permit",
    "preBind": "pre_bind",
    "bind": "bind",
    "postBind": "post_bind",
}
MULTI_POINT = "multiPoint"


class _Strict(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """Base: camelCase names on the wire, unknown fields refused."""


class Plugin(_Strict):
    name: str
    #: Only read for Score (and multiPoint entries that score); absent and 0 both mean 1.
    weight: int | None = None


class PluginSet(_Strict):
    enabled: list[Plugin] = []
    disabled: list[Plugin] = []


class Plugins(_Strict):
    pre_enqueue: PluginSet = msgspec.field(default_factory=PluginSet)
    queue_sort: PluginSet = msgspec.field(default_factory=PluginSet)
    pre_filter: PluginSet = msgspec.field(default_factory=PluginSet)
    filter: PluginSet = msgspec.field(default_factory=PluginSet)
    post_filter: PluginSet = msgspec.field(default_factory=PluginSet)
    pre_score: PluginSet = msgspec.field(default_factory=PluginSet)
    score: PluginSet = msgspec.field(default_factory=PluginSet)
    reserve: PluginSet = msgspec.field(default_factory=PluginSet)
    permit: PluginSet = msgspec.field(default_factory=PluginSet)
    pre_bind: PluginSet = msgspec.field(default_factory=PluginSet)
    bind: PluginSet = msgspec.field(default_factory=PluginSet)
    post_bind: PluginSet = msgspec.field(default_factory=PluginSet)
    multi_point: PluginSet = msgspec.field(default_factory=PluginSet)

    def at(self, point: str) -> PluginSet:
        """The set for an extension point named as in the config (``preFilter``, ``multiPoint``)."""
        attr = "multi_point" if point == MULTI_POINT else POINT_FIELDS[point]
        result: PluginSet = getattr(self, attr)
        return result


class PluginConfig(_Strict):
    name: str
    #: Decoded later against the plugin's own ``<Name>Args`` Struct.
    args: dict[str, Any] | None = None


class KubeSchedulerProfile(_Strict):
    scheduler_name: str = ""
    #: Overrides the global value for this profile; None means "use the global one".
    percentage_of_nodes_to_score: int | None = None
    plugins: Plugins | None = None
    plugin_config: list[PluginConfig] = []


class LeaderElectionConfiguration(_Strict):
    leader_elect: bool = True
    lease_duration: str = "15s"
    renew_deadline: str = "10s"
    retry_period: str = "2s"
    resource_lock: str = "leases"
    resource_name: str = "kube-scheduler"
    resource_namespace: str = "kube-system"


class ClientConnectionConfiguration(_Strict):
    kubeconfig: str = ""
    accept_content_types: str = ""
    #: Upstream defaults this to protobuf; koordsched's client speaks JSON whatever is set.
    content_type: str = ""
    qps: float = 50.0
    burst: int = 100


class KubeSchedulerConfiguration(_Strict):
    api_version: str = CONFIG_VERSIONS[0]
    kind: str = CONFIG_KIND
    parallelism: int = 16
    leader_election: LeaderElectionConfiguration = msgspec.field(default_factory=LeaderElectionConfiguration)
    client_connection: ClientConnectionConfiguration = msgspec.field(
        default_factory=ClientConnectionConfiguration
    )
    enable_profiling: bool = True
    enable_contention_profiling: bool = True
    #: 0 means adaptive (``50 - nodes/125``, at least 5 %).
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    profiles: list[KubeSchedulerProfile] = []
    #: Accepted so the field decodes, but koordsched has no extender client: must be empty.
    extenders: list[dict[str, Any]] = []
    delay_cache_until_active: bool = False
