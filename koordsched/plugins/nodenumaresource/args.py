"""NodeNUMAResourceArgs (Koordinator v1.6, spec 4.2 "Args"): defaults and validation.

Defaults follow ``SetDefaults_NodeNUMAResourceArgs``: ``defaultCPUBindPolicy`` FullPCPUs
when absent (an explicit "" stays "", meaning no binding unless the pod asks), and both
scoring strategies LeastAllocated over cpu and memory with weight 1 when absent.
Validation follows ``ValidateNodeNUMAResourceArgs`` (field paths as Go prints them with a
nil root path) plus the strategy-type check Go makes when it builds the plugin.
"""

from __future__ import annotations

import msgspec

from koordsched.config.catalog import PluginArgs
from koordsched.plugins.helper import invalid, raise_field_errors
from koordsched.plugins.nodenumaresource.options import (
    CPU_BIND_FULL_PCPUS,
    CPU_BIND_SPREAD_BY_PCPUS,
    NUMA_LEAST_ALLOCATED,
    NUMA_MOST_ALLOCATED,
)
from koordsched.plugins.nodenumaresource.scoring import LEAST_ALLOCATED, MOST_ALLOCATED, SCORING_TYPES
from koordsched.plugins.scoring_args import ResourceSpec, ScoringStrategy


def _default_strategy() -> ScoringStrategy:
    return ScoringStrategy(
        type=LEAST_ALLOCATED,
        resources=[ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1)],
    )


class NodeNUMAResourceArgs(PluginArgs):
    default_cpu_bind_policy: str | None = msgspec.field(default=None, name="defaultCPUBindPolicy")
    scoring_strategy: ScoringStrategy | None = None
    numa_scoring_strategy: ScoringStrategy | None = msgspec.field(default=None, name="numaScoringStrategy")

    def __post_init__(self) -> None:
        if self.default_cpu_bind_policy is None:
            self.default_cpu_bind_policy = CPU_BIND_FULL_PCPUS
        if self.scoring_strategy is None:
            self.scoring_strategy = _default_strategy()
        if self.numa_scoring_strategy is None:
            self.numa_scoring_strategy = _default_strategy()

    @property
    def bind_policy(self) -> str:
        return self.default_cpu_bind_policy or ""

    @property
    def scoring(self) -> ScoringStrategy:
        assert self.scoring_strategy is not None
        return self.scoring_strategy

    @property
    def numa_scoring(self) -> ScoringStrategy:
        assert self.numa_scoring_strategy is not None
        return self.numa_scoring_strategy

    @property
    def default_numa_allocate_strategy(self) -> str:
        """``GetDefaultNUMAAllocateStrategy``: MostAllocated iff the NUMA scoring type is MostAllocated."""
        return NUMA_MOST_ALLOCATED if self.numa_scoring.type == MOST_ALLOCATED else NUMA_LEAST_ALLOCATED

    def validate(self) -> None:
        errors: list[str] = []
        policy = self.bind_policy
        if policy not in ("", CPU_BIND_FULL_PCPUS, CPU_BIND_SPREAD_BY_PCPUS):
            errors.append(
                invalid(
                    "defaultCPUBindPolicy",
                    policy,
                    "must specified CPU bind policy FullPCPUs or SpreadByPCPUs",
                )
            )
        for strategy in (self.scoring, self.numa_scoring):
            for i, res in enumerate(strategy.resources):
                if res.weight <= 0 or res.weight > 100:
                    errors.append(
                        invalid(
                            f"resources[{i}].weight",
                            res.weight,
                            f"resource weight of {res.name} not in valid range (0, 100]",
                        )
                    )
        if self.scoring.type not in SCORING_TYPES:
            errors.append(f"scoring strategy {self.scoring.type} is not supported")
        if self.numa_scoring.type not in SCORING_TYPES:
            errors.append(f"numa scoring strategy {self.numa_scoring.type} is not supported")
        raise_field_errors(errors)
