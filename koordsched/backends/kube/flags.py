"""``koordsched run``'s flags, kept apart from the backend so building the CLI parser stays light.

The serving flags are kube-scheduler's (secure serving, delegating authentication and
authorization options), with its defaults; :func:`serving_options` turns them into
:class:`~koordsched.backends.kube.serving.options.ServingOptions`.

``--port`` is kube-scheduler's old insecure port (removed upstream in 1.23; Koordinator's
manifests still pass ``--port=10251`` and probe it over plain HTTP). Here it serves the health
paths only, over plain HTTP, and only when given: /metrics and /configz are on the secure port
alone. It used to be an alias of ``--secure-port``, which made Koordinator's plain-HTTP probes
hit an HTTPS port.
"""

from __future__ import annotations

import argparse
import contextlib

from koordsched.backends.kube.goflags import StringSlice, go_bool, go_duration
from koordsched.backends.kube.scheduler_flags import add_kube_scheduler_flags
from koordsched.backends.kube.serving.options import (
    DEFAULT_ALWAYS_ALLOW_PATHS,
    DEFAULT_BIND_ADDRESS,
    DEFAULT_SECURE_PORT,
    AuthenticationOptions,
    AuthorizationOptions,
    OptionsError,
    ServingOptions,
)
from koordsched.backends.kube.shutdown import parse_grace

__all__ = [
    "DEFAULT_BIND_ADDRESS",
    "DEFAULT_SECURE_PORT",
    "OptionsError",
    "StringSlice",
    "add_run_arguments",
    "serving_options",
]


def _bool_flag(parser: argparse._ActionsContainer, flag: str, default: bool, help: str) -> None:
    parser.add_argument(
        flag, nargs="?", const=True, default=default, type=go_bool, metavar="true|false", help=help
    )


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``koordsched run`` (kube-scheduler's names, where it has them)."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="a KubeSchedulerConfiguration (default: the bundled koord-scheduler profile)",
    )
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig to connect with (default: clientConnection.kubeconfig, else in-cluster)",
    )
    _add_secure_serving(parser)
    _add_authentication(parser)
    _add_authorization(parser)
    parser.add_argument(
        "--shutdown-grace-period",
        type=_grace,
        default=None,
        metavar="DURATION",
        help="how long a stop (SIGTERM, SIGINT, a lost lease) may take before the process exits "
        "anyway, abandoning what is left; a Go duration (default 10s; not a kube-scheduler flag)",
    )
    _add_koordinator_flags(parser)
    add_kube_scheduler_flags(parser)


def _add_koordinator_flags(parser: argparse.ArgumentParser) -> None:
    """Flags Koordinator's Deployment passes to koord-scheduler, so its manifests work unchanged."""
    parser.add_argument(
        "--feature-gates",
        action="append",
        default=None,
        metavar="NAME=BOOL,...",
        help="Koordinator's scheduler feature gates (all off by default); koordsched implements "
        "DevicePluginAdaption and names each other one turned on, and each name it does not know, in a "
        "start-up warning",
    )
    parser.add_argument(
        "-v",
        "--v",
        dest="verbosity",
        type=klog_level,
        default=None,
        metavar="LEVEL",
        help="klog's log verbosity: V(n) lines up to LEVEL are written (2: a line per pod bound or not "
        "schedulable), 4 and above also the debug messages (--log-level wins when given)",
    )
    _bool_flag(
        parser,
        "--enable-network-topology-manager",
        False,
        "koord-scheduler's network topology manager: build the ClusterNetworkTopology 'default' tree "
        "from node labels and write its status (network-topology-aware gangs need it)",
    )


def klog_level(text: str) -> int:
    """``--v`` as klog reads it: a base-10 int32, or pflag's error for the value."""
    level: int | None = None
    if text.strip() == text and "_" not in text:  # Python's int() also takes these; Go's does not
        with contextlib.suppress(ValueError):
            level = int(text, 10)
    if level is None or not -(2**31) <= level < 2**31:
        why = "invalid syntax" if level is None else "value out of range"
        raise argparse.ArgumentTypeError(
            f'invalid argument "{text}" for "-v, --v" flag: strconv.ParseInt: parsing "{text}": {why}'
        )
    return level


def _add_secure_serving(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("secure serving")
    g.add_argument(
        "--bind-address",
        default=DEFAULT_BIND_ADDRESS,
        metavar="IP",
        help="The IP address on which to listen for the --secure-port port. If blank or an unspecified "
        f"address, all interfaces are used. (default {DEFAULT_BIND_ADDRESS})",
    )
    g.add_argument(
        "--secure-port",
        type=int,
        default=DEFAULT_SECURE_PORT,
        metavar="PORT",
        help="The port on which to serve HTTPS with authentication and authorization: /healthz, "
        "/livez, /readyz, /metrics, /configz. If 0, don't serve HTTPS at all. "
        f"(default {DEFAULT_SECURE_PORT})",
    )
    g.add_argument(
        "--port",
        dest="insecure_port",
        type=int,
        default=0,
        metavar="PORT",
        help="DEPRECATED: a port serving the health checks only (/healthz, /livez, /readyz) over plain "
        "HTTP, without authentication, for probes written for koord-scheduler's insecure --port. "
        "/metrics and /configz are never served on it. If 0, don't serve plain HTTP at all. (default 0)",
    )
    g.add_argument(
        "--cert-dir",
        default="",
        metavar="DIR",
        help="The directory where the TLS certs are located. If --tls-cert-file and "
        "--tls-private-key-file are provided, this flag will be ignored.",
    )
    g.add_argument(
        "--tls-cert-file",
        default="",
        metavar="FILE",
        help="File containing the default x509 Certificate for HTTPS. (CA cert, if any, concatenated "
        "after server cert). If --tls-cert-file and --tls-private-key-file are not provided, a "
        "self-signed certificate and key are generated at start, in memory, or saved to --cert-dir "
        "when it is set.",
    )
    g.add_argument(
        "--tls-private-key-file",
        default="",
        metavar="FILE",
        help="File containing the default x509 private key matching --tls-cert-file.",
    )


def _add_authentication(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("authentication")
    g.add_argument(
        "--authentication-kubeconfig",
        default="",
        metavar="FILE",
        help="kubeconfig file pointing at the 'core' kubernetes server with enough rights to create "
        "tokenreviews.authentication.k8s.io. If empty, the scheduler's own connection "
        "(--kubeconfig, clientConnection.kubeconfig, else in-cluster).",
    )
    _bool_flag(
        g,
        "--authentication-skip-lookup",
        False,
        "If false, the authentication-kubeconfig will be used to lookup missing authentication "
        "configuration from the cluster.",
    )
    g.add_argument(
        "--authentication-token-webhook-cache-ttl",
        type=go_duration,
        default=10.0,
        metavar="DURATION",
        help="The duration to cache responses from the webhook token authenticator. (default 10s)",
    )
    _bool_flag(
        g,
        "--authentication-tolerate-lookup-failure",
        True,
        "If true, failures to look up missing authentication configuration from the cluster are not "
        "considered fatal. Note that this can result in authentication that treats all requests as "
        "anonymous. (default true)",
    )
    g.add_argument(
        "--client-ca-file",
        default="",
        metavar="FILE",
        help="If set, any request presenting a client certificate signed by one of the authorities in "
        "the client-ca-file is authenticated with an identity corresponding to the CommonName of the "
        "client certificate.",
    )


def _add_authorization(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("authorization")
    g.add_argument(
        "--authorization-always-allow-paths",
        action=StringSlice,
        default=DEFAULT_ALWAYS_ALLOW_PATHS,
        metavar="PATHS",
        help="A list of HTTP paths to skip during authorization, i.e. these are authorized without "
        "contacting the 'core' kubernetes server. (default " + ",".join(DEFAULT_ALWAYS_ALLOW_PATHS) + ")",
    )
    g.add_argument(
        "--authorization-kubeconfig",
        default="",
        metavar="FILE",
        help="kubeconfig file pointing at the 'core' kubernetes server with enough rights to create "
        "subjectaccessreviews.authorization.k8s.io. If empty, the scheduler's own connection.",
    )
    g.add_argument(
        "--authorization-webhook-cache-authorized-ttl",
        type=go_duration,
        default=10.0,
        metavar="DURATION",
        help="The duration to cache 'authorized' responses from the webhook authorizer. (default 10s)",
    )
    g.add_argument(
        "--authorization-webhook-cache-unauthorized-ttl",
        type=go_duration,
        default=10.0,
        metavar="DURATION",
        help="The duration to cache 'unauthorized' responses from the webhook authorizer. (default 10s)",
    )


def serving_options(args: argparse.Namespace) -> ServingOptions:
    """The parsed flags as options; raises :class:`OptionsError` for a value kube-scheduler refuses."""
    options = ServingOptions(
        bind_address=args.bind_address,
        secure_port=args.secure_port,
        insecure_port=args.insecure_port,
        cert_dir=args.cert_dir,
        tls_cert_file=args.tls_cert_file,
        tls_private_key_file=args.tls_private_key_file,
        authentication=AuthenticationOptions(
            kubeconfig=args.authentication_kubeconfig,
            client_ca_file=args.client_ca_file,
            skip_lookup=args.authentication_skip_lookup,
            tolerate_lookup_failure=args.authentication_tolerate_lookup_failure,
            cache_ttl=args.authentication_token_webhook_cache_ttl,
        ),
        authorization=AuthorizationOptions(
            kubeconfig=args.authorization_kubeconfig,
            always_allow_paths=tuple(args.authorization_always_allow_paths),
            allow_cache_ttl=args.authorization_webhook_cache_authorized_ttl,
            deny_cache_ttl=args.authorization_webhook_cache_unauthorized_ttl,
        ),
    )
    options.validate()
    return options


def _grace(text: str) -> float:
    try:
        return parse_grace(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--shutdown-grace-period: ")) from exc
