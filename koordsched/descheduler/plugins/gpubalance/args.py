"""``GPUBalanceArgs``: what GPU balance may move, and how much per round."""

from __future__ import annotations

import msgspec

from koordsched.api.core import LabelSelector
from koordsched.api.selectors import SelectorError, validate_label_selector
from koordsched.config.catalog import PluginArgs
from koordsched.descheduler.plugins.common import Namespaces, namespaces_errors
from koordsched.plugins.helper import invalid, raise_field_errors

_ARGS = "GPUBalanceArgs"


class GPUBalanceArgs(PluginArgs):
    paused: bool = False
    dry_run: bool = False
    #: Nodes emptied per round at most.
    max_nodes_per_round: int = 1
    #: A node with more GPU pods than this is not emptied (too much churn for one node).
    max_pods_per_node: int = 4
    #: Pods holding more GPUs than this never move (they are what whole nodes are freed for);
    #: a shared GPU counts as one.
    max_gpus_per_pod: int = msgspec.field(default=1, name="maxGPUsPerPod")
    evictable_namespaces: Namespaces | None = None
    node_selector: LabelSelector | None = msgspec.field(default=None)

    def validate(self) -> None:
        errs: list[str] = []
        for field, value in (
            ("maxNodesPerRound", self.max_nodes_per_round),
            ("maxPodsPerNode", self.max_pods_per_node),
            ("maxGPUsPerPod", self.max_gpus_per_pod),
        ):
            if value < 1:
                errs.append(invalid(f"{_ARGS}.{field}", value, "must be greater than 0"))
        errs += namespaces_errors(f"{_ARGS}.evictableNamespaces", self.evictable_namespaces)
        try:
            validate_label_selector(self.node_selector)
        except SelectorError as err:
            errs.append(f"{_ARGS}.nodeSelector: Invalid value: {err}")
        raise_field_errors(errs)
