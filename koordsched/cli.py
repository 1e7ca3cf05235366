"""The ``koordsched`` command: ``simulate`` (in memory) and ``run`` (against a cluster).

Each subcommand is a ``_add_<name>`` function that declares its arguments and a ``_cmd_<name>``
function that runs it and returns the exit status; :func:`main` only dispatches. Exit status:
0 when the input was valid (an unschedulable pod is a result, not an error), 2 for invalid
input or config, 1 for anything unexpected.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
from collections.abc import Callable, Sequence

from koordsched import __version__

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_INVALID = 2

log = logging.getLogger("koordsched")

Command = Callable[[argparse.Namespace], int]


LOG_LEVELS = ("debug", "info", "warning", "error")


def _common() -> argparse.ArgumentParser:
    """Options every subcommand also accepts after its name (``koordsched simulate x --log-level info``)."""
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: when not given here, the value before the subcommand (or its default) stands.
    common.add_argument("--log-level", choices=LOG_LEVELS, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return common


def _add_simulate(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "simulate",
        parents=[_common()],
        help="schedule the pending pods of some manifests, in memory",
        description=(
            "Load Nodes, Pods and PriorityClasses from multi-document YAML files, schedule every "
            "pending pod through the same queue, framework and plugins as a cluster run, and show "
            "where each pod went and why. The summary ends with a GPU fragmentation report, before "
            "and after the run: whole free, partly used and fully used GPU nodes, stranded GPUs "
            "(idle GPUs on partly used nodes), partly used shared GPUs, and CPU-stranded GPUs (idle "
            "GPUs on nodes with less than 1 cpu or 1Gi of memory free). Run two --config profiles on "
            "the same file to compare them."
        ),
    )
    p.add_argument(
        "files", nargs="+", metavar="CLUSTER.yaml", help="Kubernetes manifests (multi-document YAML)"
    )
    p.add_argument(
        "--config",
        metavar="PROFILE.yaml",
        help="a KubeSchedulerConfiguration (default: the bundled koord-scheduler profile)",
    )
    p.add_argument("--output", "-o", choices=("table", "json"), default="table", help="output format")
    p.add_argument(
        "--explain",
        action="store_true",
        help=(
            "explain every pod: Filter verdicts and Score plugins' scores on its best nodes (in the "
            "table output, a block per pod that did not schedule, after the tables)"
        ),
    )
    p.add_argument(
        "--explain-pod",
        action="append",
        default=[],
        type=_pod_key,
        metavar="NAMESPACE/NAME",
        help="explain this pod (scheduled or not) in the table and JSON output; may be repeated",
    )
    p.add_argument(
        "--wide",
        action="store_true",
        help="print messages whole in the table output (by default they are cut to the terminal's width)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed for tie-breaking between equal nodes")
    p.add_argument(
        "--enable-network-topology-manager",
        action="store_true",
        help=(
            "as koord-scheduler's flag: read the ClusterNetworkTopology 'default' among the files and "
            "build the network topology tree (network-topology-aware gangs need it)"
        ),
    )
    p.add_argument(
        "--feature-gates",
        action="append",
        default=None,
        metavar="NAME=BOOL,...",
        help=(
            "as koord-scheduler's flag (same syntax): DevicePluginAdaption=true makes DeviceShare write "
            "the vendor device plugins' annotations (docs/vendor-accelerators.md); any other gate "
            "turned on, and any name not known, is named in a warning"
        ),
    )
    p.set_defaults(command=_cmd_simulate)


def _pod_key(text: str) -> str:
    """``--explain-pod``'s NAMESPACE/NAME, both parts non-empty."""
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAMESPACE/NAME (for example default/web-0)")
    return text


def _cmd_simulate(args: argparse.Namespace) -> int:
    from koordsched.backends.sim.loader import InputError
    from koordsched.backends.sim.report import render_table, write_json
    from koordsched.backends.sim.runner import simulate
    from koordsched.config.errors import ConfigError
    from koordsched.observability.tracing import CycleTracer, TracingConfigError, tracer_provider_from_env

    try:
        # Spans printed by OTEL_TRACES_EXPORTER=console go to stderr: stdout is the result.
        provider = tracer_provider_from_env(console_out=sys.stderr)
    except TracingConfigError as err:
        print(f"koordsched simulate: {err}", file=sys.stderr)
        return EXIT_INVALID
    from koordsched.backends.kube.featuregates import FeatureGateError, gate_notices, parse_feature_gates

    try:
        gates = parse_feature_gates(args.feature_gates)
    except FeatureGateError as err:
        print(f"koordsched simulate: {err}", file=sys.stderr)
        return EXIT_INVALID
    for line in gate_notices(gates):
        print(f"warning: {line}", file=sys.stderr)
    registry = None
    if args.enable_network_topology_manager or gates:
        from koordsched.plugins.registry import in_tree_registry

        registry = in_tree_registry(
            network_topology_manager=args.enable_network_topology_manager, feature_gates=gates
        )
    try:
        result = simulate(
            args.files,
            config_path=args.config,
            registry=registry,
            explain=args.explain,
            explain_pods=args.explain_pod,
            seed=args.seed,
            tracer=CycleTracer(provider),
        )
    except (InputError, ConfigError) as err:
        print(f"koordsched simulate: {err}", file=sys.stderr)
        return EXIT_INVALID
    finally:
        if provider is not None:
            # Exports what the batch processor still holds; bounded by the exporter's own timeout
            # (OTEL_EXPORTER_OTLP_TIMEOUT, 10 s by default).
            provider.shutdown()
    explained = {p.key for p in result.pods if p.explain is not None}
    for key in args.explain_pod:
        if key not in explained:
            print(
                f"warning: --explain-pod {key}: no pending pod of this scheduler's profiles has that name",
                file=sys.stderr,
            )
    if args.output == "json":
        write_json(result, sys.stdout)
    else:
        for warning in (*result.notices, *result.warnings):
            print(f"warning: {warning}", file=sys.stderr)
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
        sys.stdout.write(render_table(result, width, wide=args.wide))
    return EXIT_OK


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from koordsched.backends.kube.flags import add_run_arguments

    p = sub.add_parser(
        "run",
        parents=[_common()],
        # pflag takes no abbreviations: --leader would otherwise be read as some --leader-elect-*.
        allow_abbrev=False,
        help="schedule pods in a cluster, as a second scheduler next to kube-scheduler",
        description=(
            "List and watch Pods, Nodes and PriorityClasses from the API server, schedule the pods "
            "whose schedulerName matches a profile, and bind them. Serves /healthz, /livez, /readyz, "
            "/metrics and /configz over HTTPS, as kube-scheduler does: requests are authenticated "
            "(TokenReview, client certificates) and authorized (SubjectAccessReview) by the API "
            "server, and only the health paths are open to anyone. With leader election enabled "
            "only the leader schedules."
        ),
    )
    add_run_arguments(p)
    p.set_defaults(command=_cmd_run)


def _cmd_run(args: argparse.Namespace) -> int:
    from koordsched.backends.kube.app import run_command

    return run_command(args)


def _add_deschedule(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "deschedule",
        parents=[_common()],
        help="show what one descheduling round would move, in memory",
        description=(
            "Load a cluster's manifests (Nodes, Pods, NodeMetrics, Devices, ...), schedule its pending "
            "pods, then run koord-descheduler's profiles over it (LowNodeLoad by default): print the "
            "migrations chosen (pod, from, to, reason), carry them out through the MigrationController's "
            "limits with the scheduler placing each moved pod, and report node usage (NodeMetric) and "
            "GPU fragmentation before and after."
        ),
    )
    p.add_argument(
        "files",
        nargs="*",
        metavar="CLUSTER.yaml",
        help="Kubernetes manifests (multi-document YAML); none with --kubeconfig",
    )
    p.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="run as koord-descheduler against this cluster (long-running, with its own Lease)",
    )
    p.add_argument(
        "--leader-elect",
        choices=("true", "false"),
        default="true",
        help="with --kubeconfig: campaign for the Lease before descheduling (default: true)",
    )
    p.add_argument(
        "--bind-address",
        default="0.0.0.0",
        help="with --kubeconfig: address of the HTTPS health and metrics port (default: 0.0.0.0)",
    )
    p.add_argument(
        "--secure-port",
        type=int,
        default=10251,
        help="with --kubeconfig: HTTPS port for /healthz, /readyz and /metrics, as koord-descheduler's "
        "(default: 10251; 0 turns it off)",
    )
    p.add_argument(
        "--config",
        metavar="DESCHEDULER.yaml",
        help="a DeschedulerConfiguration (default: the bundled koord-descheduler config with LowNodeLoad)",
    )
    p.add_argument(
        "--scheduler-config",
        metavar="PROFILE.yaml",
        help="the KubeSchedulerConfiguration that places pods (default: the bundled koord-scheduler profile)",
    )
    p.add_argument("--output", "-o", choices=("table", "json"), default="table", help="output format")
    p.add_argument("--seed", type=int, default=0, help="seed for tie-breaking between equal nodes")
    p.set_defaults(command=_cmd_deschedule)


def _cmd_deschedule(args: argparse.Namespace) -> int:
    if args.kubeconfig is not None:
        if args.files:
            print("koordsched deschedule: give either manifests or --kubeconfig, not both", file=sys.stderr)
            return EXIT_INVALID
        from koordsched.backends.kube.deschedule_app import run_descheduler_command

        return run_descheduler_command(args)
    if not args.files:
        print("koordsched deschedule: give manifests to simulate, or --kubeconfig", file=sys.stderr)
        return EXIT_INVALID
    from koordsched.backends.sim.deschedule import deschedule
    from koordsched.backends.sim.deschedule_report import render_json, render_table
    from koordsched.backends.sim.loader import InputError
    from koordsched.config.errors import ConfigError

    try:
        result = deschedule(
            args.files, config_path=args.config, scheduler_config_path=args.scheduler_config, seed=args.seed
        )
    except (InputError, ConfigError) as err:
        print(f"koordsched deschedule: {err}", file=sys.stderr)
        return EXIT_INVALID
    if args.output == "json":
        sys.stdout.write(render_json(result))
    else:
        for warning in result.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        sys.stdout.write(render_table(result))
    return EXIT_OK


_SUBCOMMANDS: tuple[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None], ...] = (
    _add_simulate,
    _add_run,
    _add_deschedule,
)


class _SubcommandParser(argparse.ArgumentParser):
    """A subcommand's parser: an argument it does not know is its own usage error (its usage,
    exit 2), not the top-level parser's, which would print the top-level usage instead."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="koordsched",
        description="A Kubernetes scheduler in Python, drop-in for Koordinator's koord-scheduler.",
    )
    parser.add_argument("--version", action="version", version=f"koordsched {__version__}")
    parser.add_argument(
        "--log-level",
        default=None,
        choices=LOG_LEVELS,
        help="log level of the messages written to stderr (default: warning)",
    )
    sub = parser.add_subparsers(
        dest="subcommand", metavar="COMMAND", required=True, parser_class=_SubcommandParser
    )
    for add in _SUBCOMMANDS:
        add(sub)  # type: ignore[arg-type]  # a _SubcommandParser is an ArgumentParser
    return parser


def _setup_logging(args: argparse.Namespace) -> None:
    """Log to stderr in klog's format (or JSON); stdout carries only the result, so it can be
    piped into jq. Raises LogConfigError for a bad --logging-format or --vmodule."""
    from koordsched.observability.logs import configure

    flush_frequency = getattr(args, "log_flush_frequency", None)
    if isinstance(flush_frequency, str):  # run's flag keeps the Go duration text, checked already
        from koordsched.api.durations import parse_duration

        flush_frequency = parse_duration(flush_frequency)
    configure(
        fmt=getattr(args, "logging_format", None) or "text",
        verbosity=getattr(args, "verbosity", None) or 0,
        vmodule=getattr(args, "vmodule", None) or "",
        flush_frequency=5.0 if flush_frequency is None else float(flush_frequency),
        level=_log_level(args),
    )


def _log_level(args: argparse.Namespace) -> str | None:
    """``--log-level`` when given; else None (``run``'s ``--v`` sets it), or warning without ``--v``."""
    if args.log_level is not None:
        return str(args.log_level)
    return None if getattr(args, "verbosity", None) is not None else "warning"


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), run the subcommand, return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors: argparse exits; we return instead
        return exc.code if isinstance(exc.code, int) else EXIT_INVALID
    from koordsched.observability.logs import LogConfigError, flush

    try:
        _setup_logging(args)
    except LogConfigError as err:
        print(f"koordsched: {err}", file=sys.stderr)
        return EXIT_INVALID
    command: Command = args.command
    try:
        return command(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `koordsched simulate ... | head`
        return EXIT_OK
    finally:
        flush()
