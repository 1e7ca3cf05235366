"""NodeResourcesFitArgs and NodeResourcesBalancedAllocationArgs (kubescheduler.config.k8s.io/v1).

Defaults are applied in ``__post_init__`` exactly as upstream's ``SetDefaults_*`` do, so a
decoded Struct is what kube-scheduler would see after defaulting; ``validate`` then
mirrors ``ValidateNodeResourcesFitArgs`` / ``ValidateNodeResourcesBalancedAllocationArgs``
and raises one ArgsError carrying every problem, each named by its field path.
"""

from __future__ import annotations

import msgspec

from koordsched.api.selectors import is_qualified_name
from koordsched.config.catalog import PluginArgs
from koordsched.plugins.helper import duplicate, invalid, raise_field_errors, required, unsupported

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
SCORING_STRATEGY_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)

#: ``config.MaxCustomPriorityScore``: shape scores are given on 0..10.
MAX_CUSTOM_PRIORITY_SCORE = 10
_MAX_UTILIZATION = 100
_MAX_WEIGHT = 100

_LABEL_NAME_DETAIL = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character, with an optional DNS subdomain prefix and '/'"
)


class _Part(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    pass


class ResourceSpec(_Part):
    name: str
    #: 0 (unset) is defaulted to 1.
    weight: int = 0


class UtilizationShapePoint(_Part):
    utilization: int
    score: int


class RequestedToCapacityRatioParam(_Part):
    shape: list[UtilizationShapePoint] = []


class ScoringStrategy(_Part):
    #: No default inside a given strategy: upstream rejects an empty type.
    type: str = ""
    resources: list[ResourceSpec] = []
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None


def default_resources() -> list[ResourceSpec]:
    return [ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1)]


class NodeResourcesFitArgs(PluginArgs):
    ignored_resources: list[str] = []
    ignored_resource_groups: list[str] = []
    scoring_strategy: ScoringStrategy | None = None

    def __post_init__(self) -> None:
        if self.scoring_strategy is None:
            self.scoring_strategy = ScoringStrategy(type=LEAST_ALLOCATED, resources=default_resources())
        strategy = self.scoring_strategy
        if not strategy.resources:
            strategy.resources = default_resources()
        for res in strategy.resources:
            if res.weight == 0:
                res.weight = 1

    @property
    def strategy(self) -> ScoringStrategy:
        """The scoring strategy, never None after defaulting."""
        assert self.scoring_strategy is not None
        return self.scoring_strategy

    def validate(self) -> None:
        errors: list[str] = []
        for i, res in enumerate(self.ignored_resources):
            if not is_qualified_name(res):
                errors.append(invalid(f"ignoredResources[{i}]", res, _LABEL_NAME_DETAIL))
        for i, group in enumerate(self.ignored_resource_groups):
            path = f"ignoredResourceGroups[{i}]"
            if "/" in group:
                errors.append(invalid(path, group, "resource group name can't contain '/'"))
            if not is_qualified_name(group):
                errors.append(invalid(path, group, _LABEL_NAME_DETAIL))
        strategy = self.scoring_strategy
        if strategy is not None:
            if strategy.type not in SCORING_STRATEGY_TYPES:
                errors.append(unsupported("scoringStrategy.type", strategy.type, SCORING_STRATEGY_TYPES))
            errors.extend(_validate_resources(strategy.resources, "scoringStrategy.resources"))
            rtcr = strategy.requested_to_capacity_ratio
            if rtcr is not None:
                # Upstream reports shape errors under scoringStrategy.shape, not ...requestedToCapacityRatio.
                errors.extend(_validate_shape(rtcr.shape, "scoringStrategy.shape"))
            elif strategy.type == REQUESTED_TO_CAPACITY_RATIO:
                # Upstream dereferences the missing shape and crashes; refuse it instead.
                errors.append(
                    required(
                        "scoringStrategy.requestedToCapacityRatio",
                        "needed by the RequestedToCapacityRatio type",
                    )
                )
        raise_field_errors(errors)


def _validate_resources(resources: list[ResourceSpec], path: str) -> list[str]:
    return [
        invalid(
            f"{path}[{i}].weight", res.weight, f"resource weight of {res.name} not in valid range (0, 100]"
        )
        for i, res in enumerate(resources)
        if res.weight <= 0 or res.weight > _MAX_WEIGHT
    ]


def _validate_shape(shape: list[UtilizationShapePoint], path: str) -> list[str]:
    if not shape:
        return [required(path, "at least one point must be specified")]
    errors: list[str] = []
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            errors.append(
                invalid(
                    f"{path}[{i}].utilization",
                    shape[i].utilization,
                    "values must be sorted in increasing order",
                )
            )
            break
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= _MAX_UTILIZATION:
            errors.append(
                invalid(f"{path}[{i}].utilization", point.utilization, "not in valid range [0, 100]")
            )
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            errors.append(invalid(f"{path}[{i}].score", point.score, "not in valid range [0, 10]"))
    return errors


class NodeResourcesBalancedAllocationArgs(PluginArgs):
    resources: list[ResourceSpec] = []

    def __post_init__(self) -> None:
        if not self.resources:
            self.resources = default_resources()
            return
        for res in self.resources:
            if res.weight == 0:
                res.weight = 1

    def validate(self) -> None:
        errors: list[str] = []
        seen: set[str] = set()
        for i, res in enumerate(self.resources):
            if res.name in seen:
                errors.append(duplicate(f"resources[{i}].name", res.name))
            else:
                seen.add(res.name)
            if res.weight != 1:
                errors.append(invalid(f"resources[{i}].weight", res.weight, "must be 1"))
        raise_field_errors(errors)
