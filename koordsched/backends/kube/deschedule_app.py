"""``koordsched deschedule --kubeconfig``: load the configs, run until a signal, exit status.

0 after a stop (or after the single round of ``deschedulingInterval: 0``), 2 for an invalid
config or kubeconfig, 1 when the run failed (a watch died, the lease was lost).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from koordsched.backends.kube.lifecycle import EXIT_INVALID
from koordsched.config.default_profile import default_profile_path
from koordsched.config.errors import ConfigError

log = logging.getLogger(__name__)


def run_descheduler_command(args: argparse.Namespace) -> int:
    from koordsched.backends.kube.deschedule import DeschedulerRunner
    from koordsched.config.load import load_config
    from koordsched.descheduler.config.default import default_descheduler_config_path
    from koordsched.descheduler.config.load import load_descheduler_config
    from koordsched.descheduler.registry import in_tree_catalog
    from koordsched.plugins.registry import in_tree_registry

    registry = in_tree_registry()
    try:
        config = load_descheduler_config(args.config or default_descheduler_config_path(), in_tree_catalog())
        sched_config = load_config(args.scheduler_config or default_profile_path(), registry)
    except ConfigError as err:
        log.error("%s", err)
        print(f"koordsched deschedule: {err}", file=sys.stderr)
        return EXIT_INVALID
    registry.warm_up()
    from koordsched.backends.kube.serving.options import OptionsError, ServingOptions

    serving = ServingOptions(bind_address=args.bind_address, secure_port=args.secure_port)
    try:
        serving.validate()
    except OptionsError as err:
        print(f"koordsched deschedule: {err}", file=sys.stderr)
        return EXIT_INVALID
    runner = DeschedulerRunner(
        config,
        sched_config,
        registry,
        kubeconfig=args.kubeconfig,
        leader_elect=args.leader_elect == "true",
        serving=serving,
    )
    return asyncio.run(_run(runner))


async def _run(runner: object) -> int:
    from koordsched.backends.kube.deschedule import DeschedulerRunner

    assert isinstance(runner, DeschedulerRunner)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return await runner.run(stop)
