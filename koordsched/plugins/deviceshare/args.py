"""DeviceShareArgs (``scheduling.koordinator.sh`` config, Koordinator v1.6).

Defaults as Koordinator's ``SetDefaults_DeviceShareArgs``: LeastAllocated over
``koordinator.sh/gpu-memory-ratio``, ``koordinator.sh/rdma`` and ``koordinator.sh/fpga``
with weight 1 each (gpu-core is deliberately not scored). ``validate`` refuses any other
strategy type (Koordinator fails plugin creation) and weights outside (0, 100].

Koordinator v1.7 adds ``gpuSharedResourceTemplatesConfig`` (the vNPU templates' ConfigMap and the
resources that make a shared request follow them; each field defaults on its own) and v1.8
``gpuShareUnsupportedModels`` (vendor/model pairs refused for shared requests; no default).
"""

from __future__ import annotations

from typing import Final

import msgspec

from koordsched.api.koordinator import FPGA, GPU_MEMORY_RATIO, NPU_CORE, RDMA
from koordsched.config.catalog import PluginArgs
from koordsched.plugins.deviceshare.scorer import LEAST_ALLOCATED, MOST_ALLOCATED
from koordsched.plugins.helper import invalid, raise_field_errors, required, unsupported
from koordsched.plugins.scoring_args import ResourceSpec, ScoringStrategy

SCORING_STRATEGY_TYPES: Final = (LEAST_ALLOCATED, MOST_ALLOCATED)
_MAX_WEIGHT: Final = 100
DEFAULT_TEMPLATES_NAMESPACE: Final = "koordinator-system"
DEFAULT_TEMPLATES_NAME: Final = "gpu-shared-resource-templates"
DEFAULT_MATCHED_RESOURCES: Final = (NPU_CORE,)


def default_scoring_strategy() -> ScoringStrategy:
    return ScoringStrategy(
        type=LEAST_ALLOCATED,
        resources=[ResourceSpec(name=n, weight=1) for n in (GPU_MEMORY_RATIO, RDMA, FPGA)],
    )


class GPUSharedResourceTemplatesConfig(
    msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True
):
    """Where the vNPU templates live and which requested resources make a shared request use them."""

    config_map_namespace: str = DEFAULT_TEMPLATES_NAMESPACE
    config_map_name: str = DEFAULT_TEMPLATES_NAME
    #: None (absent) takes the default; an empty list enforces templates for no request.
    matched_resources: list[str] | None = None

    def __post_init__(self) -> None:
        # An empty string is "not set", as Go's defaulting of a zero value reads it.
        self.config_map_namespace = self.config_map_namespace or DEFAULT_TEMPLATES_NAMESPACE
        self.config_map_name = self.config_map_name or DEFAULT_TEMPLATES_NAME
        if self.matched_resources is None:
            self.matched_resources = list(DEFAULT_MATCHED_RESOURCES)

    @property
    def matched(self) -> frozenset[str]:
        return frozenset(self.matched_resources or ())

    @property
    def key(self) -> str:
        """The ConfigMap's store key (``namespace/name``)."""
        return f"{self.config_map_namespace}/{self.config_map_name}"


class UnsupportedModel(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """A GPU model of a vendor that cannot be shared (the Node's gpu-vendor / gpu-model labels)."""

    vendor: str = ""
    model: str = ""


class DeviceShareArgs(PluginArgs):
    scoring_strategy: ScoringStrategy | None = None
    disable_device_numa_topology_alignment: bool = msgspec.field(
        default=False, name="disableDeviceNUMATopologyAlignment"
    )
    #: Deprecated and ignored, accepted so old configs still load.
    allocator: str | None = None
    gpu_shared_resource_templates_config: GPUSharedResourceTemplatesConfig | None = None
    gpu_share_unsupported_models: list[UnsupportedModel] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        if self.scoring_strategy is None:
            self.scoring_strategy = default_scoring_strategy()
        if self.gpu_shared_resource_templates_config is None:
            self.gpu_shared_resource_templates_config = GPUSharedResourceTemplatesConfig()

    @property
    def templates(self) -> GPUSharedResourceTemplatesConfig:
        assert self.gpu_shared_resource_templates_config is not None
        return self.gpu_shared_resource_templates_config

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
        for i, name in enumerate(self.templates.matched_resources or ()):
            if not name:
                errors.append(
                    required(f"gpuSharedResourceTemplatesConfig.matchedResources[{i}]", "a resource name")
                )
        for i, m in enumerate(self.gpu_share_unsupported_models):
            for what, value in (("vendor", m.vendor), ("model", m.model)):
                if not value:
                    errors.append(
                        required(f"gpuShareUnsupportedModels[{i}].{what}", f"the GPU {what} label's value")
                    )
        raise_field_errors(errors)
