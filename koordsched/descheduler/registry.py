"""The in-tree descheduler plugins (the catalog a profile may name)."""

from __future__ import annotations

from koordsched.descheduler.catalog import DeschedulerPluginSpec, PluginCatalog
from koordsched.descheduler.migration.args import MigrationControllerArgs
from koordsched.descheduler.plugins.gpubalance.args import GPUBalanceArgs
from koordsched.descheduler.plugins.lownodeload.args import LowNodeLoadArgs

MIGRATION_CONTROLLER = "MigrationController"
LOW_NODE_LOAD = "LowNodeLoad"
GPU_BALANCE = "GPUBalance"


def in_tree_catalog() -> PluginCatalog:
    return PluginCatalog(
        [
            DeschedulerPluginSpec(
                MIGRATION_CONTROLLER, MigrationControllerArgs, frozenset({"evict", "filter"})
            ),
            DeschedulerPluginSpec(LOW_NODE_LOAD, LowNodeLoadArgs, frozenset({"balance"})),
            DeschedulerPluginSpec(GPU_BALANCE, GPUBalanceArgs, frozenset({"balance"})),
        ]
    )
