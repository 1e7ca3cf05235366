"""DeviceShareArgs (``scheduling.koordinator.sh`` config, Koordinator v1.6).

Defaults as Koordinator's ``SetDefaults_DeviceShareArgs``: LeastAllocated over
``koordinator.sh/gpu-memory-ratio``, ``koordinator.sh/rdma`` and ``koordinator.sh/fpga``
with weight 1 each (gpu-core is deliberately not scored). ``validate`` refuses any other
strategy type (Koordinator fails plugin creation) and weights outside (0, 100].
"""

from __future__ import annotations

from typing import Final

import msgspec

from koordsched.api.koordinator import FPGA, GPU_MEMORY_RATIO, RDMA
from koordsched.config.catalog import PluginArgs
from koordsched.plugins.deviceshare.scorer import LEAST_ALLOCATED, MOST_ALLOCATED
from koordsched.plugins.helper import invalid, raise_field_errors, unsupported
from koordsched.plugins.scoring_args import ResourceSpec, ScoringStrategy

SCORING_STRATEGY_TYPES: Final = (LEAST_ALLOCATED, MOST_ALLOCATED)
_MAX_WEIGHT: Final = 100


def default_scoring_strategy() -> ScoringStrategy:
    return ScoringStrategy(
        type=LEAST_ALLOCATED,
        resources=[ResourceSpec(name=n, weight=1) for n in (GPU_MEMORY_RATIO, RDMA, FPGA)],
    )


class DeviceShareArgs(PluginArgs):
    scoring_strategy: ScoringStrategy | None = None
    disable_device_numa_topology_alignment: bool = msgspec.field(
        default=False, name="disableDeviceNUMATopologyAlignment"
    )
    #: Deprecated and ignored, accepted so old configs still load.
    allocator: str | None = None

    def __post_init__(self) -> None:
        if self.scoring_strategy is None:
            self.scoring_strategy = default_scoring_strategy()

    @property
    def strategy(self) -> ScoringStrategy:
        assert self.scoring_strategy is not None
        return self.scoring_strategy

    def weights(self) -> dict[str, int]:
        """Resource name -> weight (a later entry for the same name wins, as a Go map fill does)."""
        return {r.name: r.weight for r in self.strategy.resources}

    def validate(self) -> None:
        errors: list[str] = []
        strategy = self.strategy
        if strategy.type not in SCORING_STRATEGY_TYPES:
            errors.append(unsupported("scoringStrategy.type", strategy.type, SCORING_STRATEGY_TYPES))
        for i, res in enumerate(strategy.resources):
            if res.weight <= 0 or res.weight > _MAX_WEIGHT:
                errors.append(
                    invalid(
                        f"scoringStrategy.resources[{i}].weight",
                        res.weight,
                        f"resource weight of {res.name} not in valid range (0, 100]",
                    )
                )
        raise_field_errors(errors)
