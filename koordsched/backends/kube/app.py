"""``koordsched run``: start-up, from the process starting to the run proper, and the exit status.

/livez must answer within about a second of the process starting, whatever state numba's cache
is in: importing the plugins compiles their numba kernels (eager signatures, ``cache=True``),
which takes seconds on a cold cache (about 1 s even from a warm one). So start-up goes:

1. read and decode the config (a malformed file exits 2 at once);
2. serve health, metrics and configz (HTTPS, delegated authn/authz: ``serving/``): /livez
   answers; /readyz fails ``sched-handler-sync``;
3. in a worker thread, import the plugins (compiling or loading the kernels), resolve the
   config against them (bad plugin args exit 2), and warm the kernels up;
4. hand over to :class:`~koordsched.backends.kube.runner.SchedulerRunner`, which syncs the
   caches, reports ready, campaigns for the lease and schedules.

This module therefore imports nothing that imports numba or the plugins. The worker thread is
the only one importing them while the event loop serves probes, and numba compiles under its own
global lock, so compiling there is safe.

SIGTERM/SIGINT stop the run gracefully and the exit status is 0; see the runner for 1 and 2.
Whatever the state (loading, warming up, syncing, standing by, leading mid-burst, the API server
gone or hanging), the stop takes at most ``--shutdown-grace-period`` (default 10 s): every step
shares that deadline (:mod:`~koordsched.backends.kube.shutdown`), a worker thread still compiling
is abandoned (it is a daemon thread, and the process leaves with ``os._exit`` rather than
finalise the interpreter under it), and a hard deadline exits the process when the grace is
over, whatever is still running. A second SIGTERM/SIGINT exits at once with status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from koordsched.backends.kube.featuregates import gate_notices, parse_feature_gates
from koordsched.backends.kube.flags import OptionsError, serving_options
from koordsched.backends.kube.lifecycle import (
    EXIT_FAILURE,
    EXIT_INVALID,
    EXIT_OK,
    in_daemon_thread,
    lingering_threads,
    until,
)
from koordsched.backends.kube.scheduler_flags import (
    RunFlags,
    complete_config,
    deprecation_warnings,
    run_flags,
    version_text,
)
from koordsched.backends.kube.server import configz
from koordsched.backends.kube.serving.options import ServingOptions
from koordsched.backends.kube.serving.servers import DelegationError, Servers, TLSConfigError, build_servers
from koordsched.backends.kube.shutdown import DEFAULT_GRACE, HardDeadline, Shutdown, answer_signals_to_the_end
from koordsched.config.default_profile import default_profile_path
from koordsched.config.errors import ConfigError
from koordsched.config.load import read_config, resolve_config
from koordsched.config.resolved import SchedulerConfig
from koordsched.config.types import KubeSchedulerConfiguration
from koordsched.config.validate import resolve_leader_election
from koordsched.observability.health import (
    HANDLER_SYNC,
    HANDLER_SYNC_PENDING,
    SHUTDOWN,
    SHUTTING_DOWN,
    HealthChecks,
)
from koordsched.observability.logs import set_verbosity
from koordsched.observability.metrics import SchedulerMetrics
from koordsched.observability.startup import KERNELS_WARM, PLUGINS_LOADED, SERVING, StartupTimeline
from koordsched.observability.tracing import CycleTracer, TracingConfigError, tracer_provider_from_env

if TYPE_CHECKING:
    from koordsched.backends.kube.runner import SchedulerRunner
    from koordsched.framework.registry import Registry
    from koordsched.kernels.cache import KernelCacheReport

log = logging.getLogger(__name__)

#: ``/readyz/sched-handler-sync`` while the kernels compile (then upstream's "not synchronized").
KERNELS_PENDING = "numba kernels are not compiled yet"
#: Closing the HTTP server (aiohttp waits this long for requests in progress) and flushing traces.
CLOSE_SERVER = 2.0
FLUSH_TRACES = 5.0


def run_command(args: argparse.Namespace) -> int:
    """What the CLI calls for ``koordsched run``: the exit status."""
    try:
        notices = koordinator_flag_notices(args)
        serving = serving_options(args)
        flags, early = kube_scheduler_flags(args)
    except OptionsError as err:
        log.error("%s", err)
        return EXIT_INVALID
    if early is not None:  # --version, --write-config-to: done before anything is served
        return early
    notices = (*notices, *kube_scheduler_flag_notices(flags))
    grace = getattr(args, "shutdown_grace_period", None) or DEFAULT_GRACE
    shutdown = Shutdown(grace)
    deadline = HardDeadline()
    shutdown.on_begin(deadline.arm)
    shutdown.force_exit = deadline.exit_now
    code = asyncio.run(
        run_scheduler(
            args.config,
            kubeconfig=args.kubeconfig,
            serving=serving,
            shutdown=shutdown,
            notices=notices,
            flags=flags,
        )
    )
    left = lingering_threads()
    if left:
        # A compile still running: do not finalise the interpreter under it (nor wait for it).
        log.info("exiting with status %d without waiting for %s", code, ", ".join(left))
        deadline.exit_now(code)
    # The deadline stays armed: it also bounds the interpreter's own exit.
    return code


def koordinator_flag_notices(args: argparse.Namespace) -> tuple[str, ...]:
    """What koordsched does not honour of Koordinator's own flags (``--feature-gates``): start-up
    warnings. Raises :class:`OptionsError` for a malformed ``--feature-gates``."""
    return tuple(gate_notices(parse_feature_gates(getattr(args, "feature_gates", None))))


def kube_scheduler_flags(args: argparse.Namespace) -> tuple[RunFlags, int | None]:
    """kube-scheduler's flags (:mod:`~koordsched.backends.kube.scheduler_flags`), with the exit
    status when one of them ends the command at once (``--version``, ``--write-config-to``).

    pflag's deprecation lines go to stderr first, as kube-scheduler prints them while parsing.
    Raises :class:`OptionsError` for a value kube-scheduler refuses.
    """
    for line in deprecation_warnings(args):
        print(line, file=sys.stderr)
    version = version_text(args)
    if version is not None:
        print(version)
        return run_flags(args), EXIT_OK
    flags = run_flags(args)
    if flags.write_config_to:
        from koordsched.backends.kube.write_config import write_config

        source = args.config or os.fspath(default_profile_path())
        return flags, write_config(source, flags.apply, flags.write_config_to)
    return flags, None


def kube_scheduler_flag_notices(flags: RunFlags) -> tuple[str, ...]:
    """The one start-up warning naming the kube-scheduler flags given that change nothing."""
    line = flags.notice()
    return (line,) if line else ()


@dataclass(frozen=True)
class _Loaded:
    """What the worker thread hands back: the resolved config and what runs it."""

    config: SchedulerConfig
    registry: Registry
    runner: type[SchedulerRunner]
    #: Runs every kernel once, then says which kernels came from numba's cache.
    warm_up: Callable[[], KernelCacheReport]


def _load(raw: KubeSchedulerConfiguration, source: str, flags: RunFlags | None = None) -> _Loaded:
    """Import the plugins (compiling or loading their numba kernels) and resolve the config.

    Runs in a worker thread: seconds on a cold numba cache.
    """
    from koordsched.backends.kube.runner import SchedulerRunner
    from koordsched.kernels.cache import kernel_cache_report
    from koordsched.plugins.registry import in_tree_registry

    registry = in_tree_registry(
        network_topology_manager=flags is not None and flags.network_topology_manager,
        feature_gates=flags.feature_gates if flags is not None else None,
    )
    try:
        config = resolve_config(raw, registry, source)
    except ConfigError as exc:
        raise exc.in_source(source) from exc.__cause__
    config = complete_config(config, flags)

    def warm_up() -> KernelCacheReport:
        registry.warm_up()
        return kernel_cache_report()

    return _Loaded(config, registry, SchedulerRunner, warm_up)


async def run_scheduler(
    config_path: str | None,
    *,
    kubeconfig: str | None,
    bind_address: str | None = None,
    port: int | None = None,
    serving: ServingOptions | None = None,
    stop: asyncio.Event | None = None,
    shutdown: Shutdown | None = None,
    notices: tuple[str, ...] = (),
    flags: RunFlags | None = None,
) -> int:
    """Run until ``stop`` is set (or SIGTERM/SIGINT when no ``stop`` is given); returns the exit status.

    ``serving`` says how to serve (kube-scheduler's defaults when None); ``bind_address`` and
    ``port`` (the secure port) override it. 0 after a graceful stop, 1 when leadership was lost
    or something broke, 2 for an invalid config, kubeconfig or serving flag. Once stopping, it
    returns within ``shutdown``'s grace. ``notices`` (what the flags ask that koordsched does not
    honour) are logged with the start-up notice naming the default plugins it lacks. ``flags``
    (kube-scheduler's flags) apply to the config file as kube-scheduler applies them.
    """
    shutdown = shutdown or Shutdown()
    serving = serving or ServingOptions()
    timeline = StartupTimeline()
    if bind_address is not None:
        serving = msgspec.structs.replace(serving, bind_address=bind_address)
    if port is not None:
        serving = msgspec.structs.replace(serving, secure_port=port)
    source = config_path or os.fspath(default_profile_path())
    try:
        raw = read_config(source)
        if flags is not None:
            raw = flags.apply(raw)
        # The health checks depend on it; resolved again, with the rest, once the plugins are in.
        leader_elect = resolve_leader_election(raw.leader_election).leader_elect
    except ConfigError as err:
        log.error("invalid configuration: %s", err)
        return EXIT_INVALID
    try:
        provider = tracer_provider_from_env()
    except TracingConfigError as err:
        log.error("%s", err)
        return EXIT_INVALID

    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    if stop is None:
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, _on_signal, sig, stop, shutdown)
                installed.append(sig)
    metrics = SchedulerMetrics(process_metrics=True)
    health = HealthChecks(leader_elect=leader_elect)
    health.set_ready(HANDLER_SYNC, False, KERNELS_PENDING)
    try:
        served = await _serve(serving, raw, kubeconfig, health, metrics, stop)
        if not isinstance(served, Servers):
            return served
        timeline.mark(SERVING)
        code = EXIT_FAILURE  # if the run raises
        try:
            code = await _load_and_run(
                raw,
                source,
                kubeconfig,
                health,
                metrics,
                CycleTracer(provider),
                stop,
                shutdown,
                timeline,
                notices,
                flags,
            )
            return code
        finally:
            shutdown.begin("the run ended", code)  # a no-op when a stop or a lost lease began it
            health.set_ready(SHUTDOWN, False, SHUTTING_DOWN)
            await shutdown.step("closing the HTTP server", served.close(), CLOSE_SERVER)
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        answer_signals_to_the_end(installed, stop.is_set, shutdown, EXIT_FAILURE)
        if provider is not None:  # flushes batched spans
            await shutdown.step(
                "flushing traces",
                in_daemon_thread(provider.shutdown, "koordsched-tracing-flush"),
                FLUSH_TRACES,
            )


async def _serve(
    options: ServingOptions,
    raw: KubeSchedulerConfiguration,
    kubeconfig: str | None,
    health: HealthChecks,
    metrics: SchedulerMetrics,
    stop: asyncio.Event,
) -> Servers | int:
    """Step 2: the started servers, or the exit status when they cannot be (or a stop came first).

    Delegation connects with the scheduler's own connection unless told otherwise, and looks
    the client CA up in the cluster (bounded), so a stop is watched meanwhile.
    """
    building = asyncio.ensure_future(
        build_servers(
            options,
            health=health,
            metrics=metrics,
            config=lambda: configz(raw),
            default_kubeconfig=kubeconfig or raw.client_connection.kubeconfig or None,
            client_metrics=metrics,
            profiling=raw.enable_profiling,
            set_verbosity=_set_log_verbosity,
        )
    )
    try:
        if not await until(stop, building):
            return EXIT_OK
        servers = building.result()
    except DelegationError as err:
        log.error("%s", err)
        return err.code
    except TLSConfigError as err:
        log.error("%s", err)
        return EXIT_INVALID
    try:
        await servers.start()
    except OSError as err:
        log.error("cannot serve on %s: %s", options.listen_address, err)
        return EXIT_FAILURE
    return servers


async def _load_and_run(
    raw: KubeSchedulerConfiguration,
    source: str,
    kubeconfig: str | None,
    health: HealthChecks,
    metrics: SchedulerMetrics,
    tracer: CycleTracer,
    stop: asyncio.Event,
    shutdown: Shutdown,
    timeline: StartupTimeline,
    notices: tuple[str, ...] = (),
    flags: RunFlags | None = None,
) -> int:
    """Steps 3 and 4 of the start-up, with the health server up."""
    loading = asyncio.ensure_future(
        in_daemon_thread(lambda: _load(raw, source, flags), "koordsched-load-plugins")
    )
    try:
        if not await until(stop, loading):
            shutdown.begin("a stop while loading the plugins", EXIT_OK)
            return EXIT_OK
    except ConfigError as err:
        log.error("invalid configuration: %s", err)
        return EXIT_INVALID
    except Exception:
        log.exception("loading the plugins and their numba kernels failed")
        return EXIT_FAILURE
    loaded = loading.result()
    timeline.mark(PLUGINS_LOADED)
    warming = asyncio.ensure_future(in_daemon_thread(loaded.warm_up, "koordsched-warm-up"))
    try:
        if not await until(stop, warming):
            shutdown.begin("a stop while warming up the kernels", EXIT_OK)
            return EXIT_OK
    except Exception:
        log.exception("warming up the numba kernels failed")
        return EXIT_FAILURE
    timeline.mark(KERNELS_WARM)
    report = warming.result()
    # Compiling at start means the image's cache did not fit (another CPU model, other paths).
    log.log(logging.WARNING if report.compiled else logging.INFO, "%s", report.summary())
    health.set_ready(HANDLER_SYNC, False, HANDLER_SYNC_PENDING)
    config = loaded.config
    for line in (*config.not_implemented(), *notices):
        log.warning("%s", line)
    runner = loaded.runner(
        config,
        loaded.registry,
        kubeconfig=kubeconfig or config.client_connection.kubeconfig or None,
        health=health,
        metrics=metrics,
        tracer=tracer,
        shutdown=shutdown,
        timeline=timeline,
        master=(flags.master or None) if flags is not None else None,
    )
    return await runner.run(stop)


def _set_log_verbosity(verbosity: int) -> None:
    """``PUT /debug/flags/v``: klog takes any int32 there; a negative level shows what 0 shows."""
    set_verbosity(max(verbosity, 0))


def _on_signal(sig: signal.Signals, stop: asyncio.Event, shutdown: Shutdown) -> None:
    if stop.is_set():
        # k8s.io/apiserver's signal handler, which kube-scheduler uses: the second signal exits.
        log.warning("received %s again, exiting now", sig.name)
        shutdown.exit_now(EXIT_FAILURE)
        return
    log.info("received %s, shutting down", sig.name)
    shutdown.begin(f"received {sig.name}", EXIT_OK)
    stop.set()
