"""kube-scheduler 1.28's flags on ``koordsched run``, and what each one does here.

:func:`add_kube_scheduler_flags` declares those :mod:`~koordsched.backends.kube.flags` does not
(the serving, authentication and authorization flags are there): kube-scheduler's names,
value syntax (pflag's) and defaults. :func:`run_flags` reads the parsed flags into
:class:`RunFlags`, which applies them to the configuration with kube-scheduler's precedence
(``cmd/kube-scheduler/app/options``, ``Options.ApplyTo``):

* the leader-election flags override the config file's ``leaderElection`` fields whenever they
  are given (pflag's ``Changed``), with or without ``--config``;
* the deprecated flags (``--profiling``, ``--contention-profiling``, ``--kube-api-qps``,
  ``--kube-api-burst``, ``--kube-api-content-type``; kube-scheduler 1.27's ``--lock-object-name``
  and ``--lock-object-namespace``) set their fields only when ``--config`` is not given: with a
  config file kube-scheduler ignores them, and so does koordsched, naming them at start-up;
* ``--master`` overrides the kubeconfig's server; ``--pod-max-in-unschedulable-pods-duration``
  is not a config field and always applies.

Flags that are accepted but change nothing here (the TLS tuning, front-proxy authentication,
metric filtering and the alpha JSON-log options) are named in one start-up warning when given;
kube-scheduler's own default for each is what koordsched does anyway. The flag defaults are
None where it matters whether a flag was given (pflag's ``Changed``); the help shows
kube-scheduler's default.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from koordsched.api.durations import parse_duration
from koordsched.backends.kube import goflags
from koordsched.backends.kube.featuregates import parse_feature_gates
from koordsched.backends.kube.goflags import StringSlice, go_bool
from koordsched.backends.kube.serving.options import OptionsError
from koordsched.config.resolved import SchedulerConfig
from koordsched.config.types import KubeSchedulerConfiguration

__all__ = [
    "HIDDEN_METRICS_VERSION",
    "NOT_HONOURED",
    "REMOVED_FLAGS",
    "RunFlags",
    "add_kube_scheduler_flags",
    "deprecation_warnings",
    "run_flags",
]

#: The only value kube-scheduler 1.28 takes for ``--show-hidden-metrics-for-version``.
HIDDEN_METRICS_VERSION = "1.27"
#: kube-scheduler's default ``--pod-max-in-unschedulable-pods-duration``.
POD_MAX_IN_UNSCHEDULABLE = 300.0

#: Flags kube-scheduler 1.28 no longer has that koordsched still takes (kube-scheduler 1.27's
#: meaning), each with what to use instead: pflag's deprecation line names them.
REMOVED_FLAGS: dict[str, str] = {
    "lock-object-name": "kube-scheduler 1.28 removed it; use --leader-elect-resource-name "
    "(or leaderElection.resourceName in --config) instead",
    "lock-object-namespace": "kube-scheduler 1.28 removed it; use --leader-elect-resource-namespace "
    "(or leaderElection.resourceNamespace in --config) instead",
}

#: Accepted, with kube-scheduler's syntax, but without effect here -> why (the start-up warning).
NOT_HONOURED: dict[str, str] = {
    "tls-cipher-suites": "the secure port uses Python's default TLS 1.2+ cipher suites",
    "tls-min-version": "the secure port always takes TLS 1.2 and above",
    "tls-sni-cert-key": "the secure port serves one certificate",
    "http2-max-streams-per-connection": "the secure port serves HTTP/1.1",
    "permit-port-sharing": "the secure port is bound as asyncio binds it: SO_REUSEADDR, no SO_REUSEPORT",
    "permit-address-sharing": "the secure port is bound as asyncio binds it: SO_REUSEADDR, no SO_REUSEPORT",
    "requestheader-client-ca-file": "front-proxy (request header) authentication is not implemented",
    "requestheader-allowed-names": "front-proxy (request header) authentication is not implemented",
    "requestheader-username-headers": "front-proxy (request header) authentication is not implemented",
    "requestheader-group-headers": "front-proxy (request header) authentication is not implemented",
    "requestheader-extra-headers-prefix": "front-proxy (request header) authentication is not implemented",
    "disabled-metrics": "every metric stays exported",
    "allow-metric-labels": "metric label values are not filtered",
    "allow-metric-labels-manifest": "metric label values are not filtered",
    "log-json-info-buffer-size": "JSON logs are not buffered",
    "log-json-split-stream": "JSON logs all go to stderr",
}

#: The flags whose fields kube-scheduler sets only without ``--config`` -> the dest holding each.
_DEPRECATED_DESTS: dict[str, str] = {
    "profiling": "profiling",
    "contention-profiling": "contention_profiling",
    "kube-api-content-type": "kube_api_content_type",
    "kube-api-qps": "kube_api_qps",
    "kube-api-burst": "kube_api_burst",
    "lock-object-name": "lock_object_name",
    "lock-object-namespace": "lock_object_namespace",
}

_METRIC_LABEL_KEY = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*,[a-zA-Z_][a-zA-Z0-9_]*")


def _dest(name: str) -> str:
    return name.replace("-", "_")


def _bool(parser: argparse._ActionsContainer, name: str, default: bool | None, help: str) -> None:

    parser.add_argument(
        f"--{name}", nargs="?", const=True, default=default, type=go_bool, metavar="true|false", help=help
    )


def _value(
    parser: argparse._ActionsContainer,
    name: str,
    help: str,
    *,
    type: Callable[[str], Any] = str,
    metavar: str = "string",
    **kw: Any,
) -> None:
    parser.add_argument(
        f"--{name}", type=type, default=kw.pop("default", None), metavar=metavar, help=help, **kw
    )


def _slice(parser: argparse._ActionsContainer, name: str, help: str) -> None:

    parser.add_argument(f"--{name}", action=StringSlice, default=None, metavar="strings", help=help)


def add_kube_scheduler_flags(parser: argparse.ArgumentParser) -> None:
    """kube-scheduler 1.28's flags that :func:`~koordsched.backends.kube.flags.add_run_arguments`
    does not declare itself, grouped as kube-scheduler's help groups them."""
    _add_misc(parser)
    _add_serving_extras(parser)
    _add_deprecated(parser)
    _add_leader_election(parser)
    _add_metrics(parser)
    _add_logs(parser)


def _add_misc(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("misc")
    _value(
        g, "write-config-to", "If set, write the configuration values to this file and exit.", metavar="FILE"
    )
    _value(g, "master", "The address of the Kubernetes API server (overrides any value in kubeconfig)")
    g.add_argument(
        "--version",
        nargs="?",
        const="true",
        default=None,
        metavar="true|raw",
        help="Print version information and quit; --version=raw prints it as a Python dict.",
    )


def _add_serving_extras(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("secure serving and authentication (accepted, not honoured)")
    _slice(g, "tls-cipher-suites", "Comma-separated list of cipher suites for the server (Go's names).")
    _value(
        g,
        "tls-min-version",
        "Minimum TLS version supported. Possible values: " + ", ".join(goflags.TLS_VERSIONS),
        type=goflags.tls_version,
    )
    g.add_argument(
        "--tls-sni-cert-key",
        action="append",
        default=None,
        metavar="namedCertKey",
        help="A pair of x509 certificate and private key file paths, optionally suffixed with a list "
        'of domain patterns ("cert,key:name,name"). May be given multiple times.',
    )
    _value(
        g,
        "http2-max-streams-per-connection",
        "The limit that the server gives to clients for the maximum number of streams in an HTTP/2 "
        "connection. Zero means to use golang's default.",
        type=goflags.go_int("--http2-max-streams-per-connection"),
        metavar="int",
    )
    _bool(
        g,
        "permit-port-sharing",
        None,
        "If true, SO_REUSEPORT will be used when binding the port. (default false)",
    )
    _bool(
        g,
        "permit-address-sharing",
        None,
        "If true, SO_REUSEADDR will be used when binding the port. (default false)",
    )
    _value(
        g,
        "requestheader-client-ca-file",
        "Root certificate bundle to use to verify client certificates on incoming requests before "
        "trusting usernames in headers specified by --requestheader-username-headers.",
    )
    for name, default in (
        ("requestheader-allowed-names", "[]"),
        ("requestheader-username-headers", "[x-remote-user]"),
        ("requestheader-group-headers", "[x-remote-group]"),
        ("requestheader-extra-headers-prefix", "[x-remote-extra-]"),
    ):
        _slice(g, name, f"kube-scheduler's front-proxy authentication setting. (default {default})")


def _add_deprecated(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("deprecated")
    ignored = " This parameter is ignored if a config file is specified in --config."
    _bool(
        g,
        "profiling",
        None,
        "DEPRECATED: enable profiling via web interface host:port/debug/pprof/." + ignored,
    )
    _bool(
        g,
        "contention-profiling",
        None,
        "DEPRECATED: enable block profiling, if profiling is enabled." + ignored,
    )
    _value(
        g,
        "kube-api-content-type",
        "DEPRECATED: content type of requests sent to apiserver (koordsched's client speaks "
        "application/json only)." + ignored,
    )
    _value(
        g,
        "kube-api-qps",
        "DEPRECATED: QPS to use while talking with kubernetes apiserver." + ignored,
        type=goflags.go_float32("--kube-api-qps"),
        metavar="float32",
    )
    _value(
        g,
        "kube-api-burst",
        "DEPRECATED: burst to use while talking with kubernetes apiserver." + ignored,
        type=goflags.go_int32("--kube-api-burst"),
        metavar="int32",
    )
    _value(
        g,
        "pod-max-in-unschedulable-pods-duration",
        "DEPRECATED: the maximum time a pod can stay in unschedulablePods. If a pod stays in "
        "unschedulablePods for longer than this value, the pod will be moved from unschedulablePods "
        "to backoffQ or activeQ. (default 5m0s)",
        type=goflags.go_duration_text("--pod-max-in-unschedulable-pods-duration"),
        metavar="duration",
    )
    for name, default, instead in (
        ("lock-object-name", "kube-scheduler", "leader-elect-resource-name"),
        ("lock-object-namespace", "kube-system", "leader-elect-resource-namespace"),
    ):
        _value(
            g,
            name,
            f"DEPRECATED (removed in kube-scheduler 1.28): use --{instead}."
            + ignored
            + f" (default {default})",
        )


def _add_leader_election(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("leader election")
    only = " This is only applicable if leader election is enabled."
    _bool(
        g,
        "leader-elect",
        None,
        "Start a leader election client and gain leadership before executing the main loop. Enable "
        "this when running replicated components for high availability. (default true)",
    )
    for name, default, text in (
        (
            "leader-elect-lease-duration",
            "15s",
            "The duration that non-leader candidates will wait after observing a leadership renewal "
            "until attempting to acquire leadership of a led but unrenewed leader slot.",
        ),
        (
            "leader-elect-renew-deadline",
            "10s",
            "The interval between attempts by the acting master to renew a leadership slot before it "
            "stops leading. This must be less than the lease duration.",
        ),
        (
            "leader-elect-retry-period",
            "2s",
            "The duration the clients should wait between attempting acquisition and renewal of a "
            "leadership.",
        ),
    ):
        _value(
            g,
            name,
            f"{text}{only} (default {default})",
            type=goflags.go_duration_text(f"--{name}"),
            metavar="duration",
        )
    _value(
        g,
        "leader-elect-resource-lock",
        "The type of resource object that is used for locking during leader election. Supported "
        "options are 'leases'. (default \"leases\")",
    )
    _value(
        g,
        "leader-elect-resource-name",
        "The name of resource object that is used for locking during leader election. "
        '(default "kube-scheduler")',
    )
    _value(
        g,
        "leader-elect-resource-namespace",
        "The namespace of resource object that is used for locking during leader election. "
        '(default "kube-system")',
    )


def _add_metrics(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("metrics")
    _value(
        g,
        "show-hidden-metrics-for-version",
        "The previous version for which you want to show hidden metrics. Only the previous minor "
        f"version is meaningful ({HIDDEN_METRICS_VERSION}), other values will not be allowed. "
        "koordsched hides no metric.",
    )
    _slice(g, "disabled-metrics", "Metrics to disable (fully qualified names). Accepted, not honoured.")
    g.add_argument(
        "--allow-metric-labels",
        action=goflags.StringToString,
        default=None,
        metavar="stringToString",
        help="The map from metric-label to value allow-list of this label. The key's format is "
        "<MetricName>,<LabelName>. The value's format is <allowed_value>,<allowed_value>... "
        "Accepted, not honoured.",
    )
    _value(
        g,
        "allow-metric-labels-manifest",
        "The path to the manifest file that contains the allow-list mapping. Accepted, not honoured.",
    )


def _add_logs(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("logs")
    _value(
        g,
        "logging-format",
        'Sets the log format. Permitted formats: "json", "text". (default "text")',
        type=goflags.logging_format,
        default="text",
    )
    g.add_argument(
        "--log-flush-frequency",
        type=goflags.go_duration_text("--log-flush-frequency"),
        default="5s",
        metavar="duration",
        help="Maximum number of seconds between log flushes (default 5s)",
    )
    g.add_argument(
        "--vmodule",
        type=goflags.vmodule,
        action=goflags.AppendJoined,
        default="",
        metavar="pattern=N,...",
        help="comma-separated list of pattern=N settings for file-filtered logging (only works for "
        "text log format)",
    )
    _value(
        g,
        "log-json-info-buffer-size",
        "[Alpha] In JSON format with split output streams, the info messages can be buffered for a "
        "while to increase performance. Accepted, not honoured. (default 0)",
        type=goflags.quantity("--log-json-info-buffer-size"),
        metavar="quantity",
    )
    _bool(
        g,
        "log-json-split-stream",
        None,
        "[Alpha] In JSON format, write error messages to stderr and info messages to stdout. "
        "Accepted, not honoured. (default false)",
    )


@dataclass(frozen=True)
class RunFlags:
    """kube-scheduler's flags as given (None: not given), ready to apply to the configuration."""

    config_given: bool
    master: str = ""
    write_config_to: str = ""
    leader_election: dict[str, Any] = field(default_factory=dict)
    #: The deprecated flags given -> value (applied only when ``config_given`` is False).
    deprecated: dict[str, Any] = field(default_factory=dict)
    #: Seconds, or None when not given (kube-scheduler's 5m then).
    pod_max_in_unschedulable: float | None = None
    #: Flags given that koordsched accepts and does not honour, as ``--name=value``.
    not_honoured: tuple[str, ...] = ()
    #: koord-scheduler's ``--enable-network-topology-manager``: build the network topology tree.
    network_topology_manager: bool = False
    #: koord-scheduler's ``--feature-gates`` as given (name -> on; a gate not given is off).
    feature_gates: dict[str, bool] = field(default_factory=dict)

    def apply(self, raw: KubeSchedulerConfiguration) -> KubeSchedulerConfiguration:
        """The configuration with the flags applied as kube-scheduler 1.28 applies them."""
        le = raw.leader_election
        cc = raw.client_connection
        top: dict[str, Any] = {}
        if not self.config_given:
            d = self.deprecated
            if "profiling" in d:
                top["enable_profiling"] = d["profiling"]
            if "contention-profiling" in d:
                top["enable_contention_profiling"] = d["contention-profiling"]
            cc = replace_struct(
                cc,
                content_type=d.get("kube-api-content-type", cc.content_type),
                qps=d.get("kube-api-qps", cc.qps),
                burst=d.get("kube-api-burst", cc.burst),
            )
            le = replace_struct(
                le,
                resource_name=d.get("lock-object-name", le.resource_name),
                resource_namespace=d.get("lock-object-namespace", le.resource_namespace),
            )
        # After the deprecated ones, as kube-scheduler's ApplyTo: these win.
        le = replace_struct(le, **self.leader_election)
        return msgspec.structs.replace(raw, leader_election=le, client_connection=cc, **top)

    def notice(self) -> str | None:
        """The one start-up warning naming every flag given that changes nothing, or None."""
        parts = []
        if self.not_honoured:
            parts.append("accepted but not honoured by koordsched: " + "; ".join(self.not_honoured))
        if self.config_given and self.deprecated:
            given = ", ".join(f"--{n}" for n in self.deprecated)
            parts.append(f"ignored because --config is given, as kube-scheduler ignores them: {given}")
        return ("kube-scheduler flags " + "; and ".join(parts)) if parts else None


def replace_struct(struct: Any, **changes: Any) -> Any:
    return msgspec.structs.replace(struct, **changes) if changes else struct


def _given(args: argparse.Namespace, name: str) -> Any:
    return getattr(args, _dest(name), None)


def run_flags(args: argparse.Namespace) -> RunFlags:
    """The parsed flags; raises :class:`OptionsError` for a value kube-scheduler refuses at start-up."""
    leader_election: dict[str, Any] = {}
    for name, attr in (
        ("leader-elect", "leader_elect"),
        ("leader-elect-lease-duration", "lease_duration"),
        ("leader-elect-renew-deadline", "renew_deadline"),
        ("leader-elect-retry-period", "retry_period"),
        ("leader-elect-resource-lock", "resource_lock"),
        ("leader-elect-resource-name", "resource_name"),
        ("leader-elect-resource-namespace", "resource_namespace"),
    ):
        value = _given(args, name)
        if value is not None:
            leader_election[attr] = value
    deprecated = {
        name: getattr(args, dest)
        for name, dest in _DEPRECATED_DESTS.items()
        if getattr(args, dest, None) is not None
    }
    _validate_metrics(args)
    not_honoured = tuple(
        f"--{name}={_show(value)} ({why})"
        for name, why in NOT_HONOURED.items()
        # An empty value is the flag's default (pflag's empty list, kube's default TLS version).
        if (value := _given(args, name)) not in (None, "", ())
    )
    pod_max = _given(args, "pod-max-in-unschedulable-pods-duration")
    return RunFlags(
        config_given=getattr(args, "config", None) is not None,
        master=_given(args, "master") or "",
        write_config_to=_given(args, "write-config-to") or "",
        leader_election=leader_election,
        deprecated=deprecated,
        pod_max_in_unschedulable=parse_duration(pod_max) if pod_max is not None else None,
        not_honoured=not_honoured,
        network_topology_manager=bool(getattr(args, "enable_network_topology_manager", False)),
        feature_gates=parse_feature_gates(getattr(args, "feature_gates", None)),
    )


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    return str(value)


def _validate_metrics(args: argparse.Namespace) -> None:
    """component-base's metrics.Options.Validate, which kube-scheduler runs before starting."""
    version = _given(args, "show-hidden-metrics-for-version")
    if version and version != HIDDEN_METRICS_VERSION:
        raise OptionsError(
            "--show-hidden-metrics-for-version must be omitted or have the value "
            f"'{HIDDEN_METRICS_VERSION}'. Only the previous minor version is allowed"
        )
    labels = _given(args, "allow-metric-labels") or {}
    if any(_METRIC_LABEL_KEY.fullmatch(key) is None for key in labels):
        raise OptionsError(
            "--allow-metric-labels must have a list of kv pair with format "
            "`metricName,labelName=labelValue, labelValue,...`"
        )


def deprecation_warnings(args: argparse.Namespace) -> list[str]:
    """pflag's line for each deprecated flag given (``Flag --NAME has been deprecated, MESSAGE``):
    what kube-scheduler would print on stderr; here the flags it has removed that koordsched takes."""
    return [
        f"Flag --{name} has been deprecated, {message}"
        for name, message in REMOVED_FLAGS.items()
        if _given(args, name) is not None
    ]


def version_text(args: argparse.Namespace) -> str | None:
    """What ``--version`` prints (verflag's ``true`` and ``raw``), or None when not asked for.

    Raises :class:`OptionsError` for a value verflag refuses.
    """
    from koordsched import __version__

    value = getattr(args, "version", None)
    if value is None:
        return None
    if value == "raw":
        return repr({"gitVersion": f"v{__version__}", "component": "koordsched"})
    try:
        wanted = go_bool(value)
    except argparse.ArgumentTypeError as err:
        raise OptionsError(f'invalid argument "{value}" for "--version" flag: {err}') from None
    return f"koordsched v{__version__}" if wanted else None


def complete_config(config: SchedulerConfig, flags: RunFlags | None) -> SchedulerConfig:
    """The resolved config with what flags set outside it (``--pod-max-in-unschedulable-pods-duration``)."""
    if flags is None or flags.pod_max_in_unschedulable is None:
        return config
    return replace(config, pod_max_in_unschedulable_pods_duration=flags.pod_max_in_unschedulable)
