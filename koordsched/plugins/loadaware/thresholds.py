"""Per-node usage thresholds: the ``scheduling.koordinator.sh/usage-thresholds`` annotation over the args.

``generateUsageThresholdsFilterProfile`` (spec 4.6 Filter, step 4): each field the annotation
leaves empty falls back to the args; its ``aggregatedUsage`` counts only with thresholds and
a type, else the args' ``aggregated`` counts when it has both. An annotation that does not
decode (bad JSON, a non-integer threshold, a malformed duration) is logged once and the
args are used entirely. Profiles are shared by every node with the same annotation text.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

import msgspec

from koordsched.api.annotations import decode_annotation
from koordsched.api.core import Node
from koordsched.api.durations import DurationError, duration_ns
from koordsched.plugins.loadaware.args import LoadAwareSchedulingArgs

log = logging.getLogger(__name__)

ANNOTATION_USAGE_THRESHOLDS: Final = "scheduling.koordinator.sh/usage-thresholds"
#: Distinct annotation texts remembered before starting afresh.
_MAX_PROFILES: Final = 4096


class CustomAggregatedUsage(msgspec.Struct, kw_only=True, rename="camel"):
    usage_thresholds: dict[str, int] | None = None
    usage_aggregation_type: str = ""
    usage_aggregated_duration: str | None = None


class CustomUsageThresholds(msgspec.Struct, kw_only=True, rename="camel"):
    """The annotation's JSON (``extension.CustomUsageThresholds``); unknown fields are ignored, as in Go."""

    usage_thresholds: dict[str, int] | None = None
    prod_usage_thresholds: dict[str, int] | None = None
    aggregated_usage: CustomAggregatedUsage | None = None


@dataclass(frozen=True, slots=True)
class AggregatedThresholds:
    thresholds: dict[str, int]
    agg_type: str
    #: Window in ns; 0: the longest one the NodeMetric has.
    duration: int


@dataclass(frozen=True, slots=True)
class FilterProfile:
    usage: dict[str, int]
    prod: dict[str, int]
    aggregated: AggregatedThresholds | None


def args_profile(args: LoadAwareSchedulingArgs) -> FilterProfile:
    agg = args.filter_aggregated
    aggregated = None
    if agg is not None:
        aggregated = AggregatedThresholds(
            dict(agg.usage_thresholds), agg.usage_aggregation_type, agg.usage_duration_ns
        )
    return FilterProfile(dict(args.usage_thresholds), dict(args.prod_usage_thresholds), aggregated)


class ThresholdProfiles:
    """Node -> its FilterProfile, memoised by annotation text."""

    def __init__(self, args: LoadAwareSchedulingArgs) -> None:
        self.default = args_profile(args)
        self._by_text: dict[str, FilterProfile] = {}

    def of(self, node: Node) -> FilterProfile:
        raw = node.metadata.annotations.get(ANNOTATION_USAGE_THRESHOLDS)
        if not raw:
            return self.default
        profile = self._by_text.get(raw)
        if profile is None:
            if len(self._by_text) >= _MAX_PROFILES:
                self._by_text.clear()
            profile = self._by_text[raw] = self._parse(node.metadata.name, raw)
        return profile

    def _parse(self, node_name: str, raw: str) -> FilterProfile:
        default = self.default
        try:
            custom: CustomUsageThresholds = decode_annotation(raw, CustomUsageThresholds)
            custom_agg = custom.aggregated_usage
            aggregated = default.aggregated
            if custom_agg is not None and custom_agg.usage_thresholds and custom_agg.usage_aggregation_type:
                aggregated = AggregatedThresholds(
                    dict(custom_agg.usage_thresholds),
                    custom_agg.usage_aggregation_type,
                    duration_ns(custom_agg.usage_aggregated_duration),
                )
        except (msgspec.DecodeError, DurationError) as err:
            # Logged once per distinct text: profiles are memoised by it.
            log.warning(
                "node %s: invalid %s annotation, the plugin args' thresholds apply: %s",
                node_name,
                ANNOTATION_USAGE_THRESHOLDS,
                err,
            )
            return default
        return FilterProfile(
            dict(custom.usage_thresholds) if custom.usage_thresholds else default.usage,
            dict(custom.prod_usage_thresholds) if custom.prod_usage_thresholds else default.prod,
            aggregated,
        )
