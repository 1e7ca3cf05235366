"""GPUFragmentationArgs: how the workload mix is found (koordsched's own plugin, no upstream).

``workloadMix`` empty (the default) learns the mix from the pods the scheduler sees; given,
it fixes the mix: each entry is a pod's requests as written (any GPU form), the GPU models it
accepts (empty: any) and its weight.
"""

from __future__ import annotations

import math
from typing import Final

import msgspec

from koordsched.api.quantity import QuantityError, int_value, milli_value
from koordsched.config.catalog import PluginArgs
from koordsched.plugins.deviceshare import DeviceRequestError
from koordsched.plugins.gpufragmentation.demand import requests_shape
from koordsched.plugins.helper import invalid, raise_field_errors, required

DEFAULT_HALF_LIFE_SECONDS: Final = 3600.0
DEFAULT_MAX_SHAPES: Final = 256
#: More shapes than this make every node's measure slow to compute (cost grows with shapes).
LIMIT_MAX_SHAPES: Final = 4096


class WorkloadShapeArgs(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    #: A pod's requests (cpu, memory and any GPU resource), as quantities.
    requests: dict[str, str | int | float] = {}
    #: GPU models (``node.koordinator.sh/gpu-model``) the pods accept; empty: any.
    gpu_models: list[str] = []
    #: The shape's share of the workload, relative to the others.
    weight: float = 1.0

    def parsed_requests(self) -> dict[str, int]:
        """The requests in the scheduler's units (cpu in milli); raises QuantityError."""
        return {n: (milli_value(q) if n == "cpu" else int_value(q)) for n, q in self.requests.items()}


class GPUFragmentationArgs(PluginArgs):
    #: Fixed mix; empty: learned from the pods seen.
    workload_mix: list[WorkloadShapeArgs] = []
    #: The learned mix: a pod seen this long ago weighs half what one seen now does.
    half_life_seconds: float = DEFAULT_HALF_LIFE_SECONDS
    #: The learned mix keeps its heaviest shapes, at most this many.
    max_shapes: int = DEFAULT_MAX_SHAPES
    #: Weigh each shape by how scarce the nodes that can hold it are (see the mix module).
    scarcity_weighting: bool = True

    def validate(self) -> None:
        errors: list[str] = []
        if not (math.isfinite(self.half_life_seconds) and self.half_life_seconds > 0):
            errors.append(invalid("halfLifeSeconds", self.half_life_seconds, "must be a positive number"))
        if not 1 <= self.max_shapes <= LIMIT_MAX_SHAPES:
            errors.append(invalid("maxShapes", self.max_shapes, f"must be between 1 and {LIMIT_MAX_SHAPES}"))
        if len(self.workload_mix) > LIMIT_MAX_SHAPES:
            errors.append(
                invalid(
                    "workloadMix", len(self.workload_mix), f"must have at most {LIMIT_MAX_SHAPES} entries"
                )
            )
        for i, entry in enumerate(self.workload_mix):
            path = f"workloadMix[{i}]"
            if not (math.isfinite(entry.weight) and entry.weight > 0):
                errors.append(invalid(f"{path}.weight", entry.weight, "must be a positive number"))
            if not entry.requests:
                errors.append(required(f"{path}.requests", "a pod's requests"))
            parsed: dict[str, int] = {}
            for name, q in entry.requests.items():
                try:
                    value = parsed[name] = milli_value(q) if name == "cpu" else int_value(q)
                except QuantityError as err:
                    errors.append(invalid(f"{path}.requests[{name}]", q, str(err)))
                    continue
                if value < 0:
                    errors.append(invalid(f"{path}.requests[{name}]", q, "must not be negative"))
            if len(parsed) < len(entry.requests):
                continue  # a quantity is unreadable: said above
            try:
                requests_shape(parsed)
            except DeviceRequestError as err:
                errors.append(invalid(f"{path}.requests", dict(entry.requests), str(err)))
        raise_field_errors(errors)
