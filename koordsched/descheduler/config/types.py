"""``DeschedulerConfiguration`` as decoded (Koordinator v1.6, ``descheduler/v1alpha2``).

Decoding is strict, as Koordinator's (a component-base scheme with strict decoding): an
unknown field anywhere is an error. Plugin args stay raw here; each plugin decodes its own
(:mod:`koordsched.descheduler.config.load`).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from koordsched.api.core import LabelSelector

CONFIG_VERSION: Final = "descheduler/v1alpha2"
CONFIG_KIND: Final = "DeschedulerConfiguration"
#: The profile name a single unnamed profile gets.
DEFAULT_PROFILE_NAME: Final = "koord-descheduler"
#: Extension points of a descheduler profile, in the order they run.
POINTS: Final = ("deschedule", "balance", "evict", "filter")


class _Strict(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    pass


class Plugin(_Strict):
    name: str = ""


class PluginSet(_Strict):
    enabled: list[Plugin] = []
    disabled: list[Plugin] = []


class Plugins(_Strict):
    deschedule: PluginSet = msgspec.field(default_factory=PluginSet)
    balance: PluginSet = msgspec.field(default_factory=PluginSet)
    evict: PluginSet = msgspec.field(default_factory=PluginSet)
    filter: PluginSet = msgspec.field(default_factory=PluginSet)


class PluginConfig(_Strict):
    name: str
    args: dict[str, Any] | None = None


class DeschedulerProfile(_Strict):
    name: str = ""
    plugin_config: list[PluginConfig] = []
    plugins: Plugins | None = None
    node_selector: LabelSelector | None = None


class LeaderElection(_Strict):
    """component-base's LeaderElectionConfiguration."""

    leader_elect: bool | None = None
    lease_duration: str = "15s"
    renew_deadline: str = "10s"
    retry_period: str = "2s"
    resource_lock: str = "leases"
    resource_name: str = "koord-descheduler"
    resource_namespace: str = "koordinator-system"


class ClientConnection(_Strict):
    kubeconfig: str = ""
    accept_content_types: str = ""
    content_type: str = ""
    qps: float = msgspec.field(default=50.0, name="qps")
    burst: int = 100


class DeschedulerConfiguration(_Strict):
    api_version: str = ""
    kind: str = ""
    leader_election: LeaderElection = msgspec.field(default_factory=LeaderElection)
    client_connection: ClientConnection = msgspec.field(default_factory=ClientConnection)
    enable_profiling: bool | None = None
    enable_contention_profiling: bool | None = None
    healthz_bind_address: str | None = None
    metrics_bind_address: str | None = None
    #: A Go duration; 0 (the default) runs one round and stops, as Koordinator does.
    descheduling_interval: str = "0s"
    dry_run: bool = False
    profiles: list[DeschedulerProfile] = []
    node_selector: LabelSelector | None = None
    max_no_of_pods_to_evict_per_node: int | None = None
    max_no_of_pods_to_evict_per_namespace: int | None = None
    max_no_of_pods_to_evict_total: int | None = None
