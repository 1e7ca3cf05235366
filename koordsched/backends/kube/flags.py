"""``koordsched run``'s flags, kept apart from the backend so building the CLI parser stays light."""

from __future__ import annotations

import argparse

from koordsched.backends.kube.shutdown import parse_grace

DEFAULT_BIND_ADDRESS = "0.0.0.0"
DEFAULT_PORT = 10259

IGNORED_FLAGS = (
    "--authentication-skip-lookup",
    "--feature-gates",
    "--enable-network-topology-manager",
    "--v",
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
    parser.add_argument(
        "--bind-address",
        default=DEFAULT_BIND_ADDRESS,
        metavar="IP",
        help=f"address for /healthz, /livez, /readyz, /metrics, /configz (default {DEFAULT_BIND_ADDRESS})",
    )
    parser.add_argument(
        "--secure-port",
        "--port",
        dest="port",
        type=int,
        default=DEFAULT_PORT,
        metavar="PORT",
        help=f"port for those endpoints, plain HTTP for now (default {DEFAULT_PORT}; Koordinator: 10251)",
    )
    parser.add_argument(
        "--shutdown-grace-period",
        type=_grace,
        default=None,
        metavar="DURATION",
        help="how long a stop (SIGTERM, SIGINT, a lost lease) may take before the process exits "
        "anyway, abandoning what is left; a Go duration (default 10s; not a kube-scheduler flag)",
    )
    for flag in IGNORED_FLAGS:
        parser.add_argument(flag, nargs="?", const="true", default=None, help=argparse.SUPPRESS)


def _grace(text: str) -> float:
    try:
        return parse_grace(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--shutdown-grace-period: ")) from exc
