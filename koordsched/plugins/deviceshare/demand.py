"""What a pod may ask of DeviceShare, per device type: one declarative table.

Every rule that depends on the device type reads it from here: which resource names a pod's
request is masked to (Koordinator's ``DeviceResourceNames``), which combinations of them are
valid and how each is checked and converted (``ValidateDeviceRequest``,
``ConvertDeviceRequest``), which names the percentage rule checks one by one, how the request
per device and the device count are derived (:data:`RULE_GPU` or :data:`RULE_UNITS`), and which
resources a device's kernel slot holds (the columns of ``DeviceRows``' free and total arrays).

The request parser (:mod:`~koordsched.plugins.deviceshare.requests`), the exact allocator and
the kernels' pod vector and row arrays are all derived from :data:`TABLE`, so a device type
(or a resource of one) is added by one entry here. The kernels read the table's size from the
arrays' shapes, so one compiled kernel serves any table.

:data:`TABLE` is read at call time, never copied at import: a test may install another table
(``monkeypatch.setattr(demand, "TABLE", ...)``) before it builds a plugin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, Literal

import msgspec

from koordsched.api.koordinator import (
    AMD_GPU,
    DEVICE_FPGA,
    DEVICE_GPU,
    DEVICE_RDMA,
    FPGA,
    GPU,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_SHARED,
    HYGON_DCU,
    NVIDIA_GPU,
    RDMA,
)

#: GPU rules: ``calcDesiredRequestsAndCountForGPU`` (count from ``gpu.shared`` or whole-card ratios),
#: partition tables and topology scopes. At most one type follows them (``GPURequirements``).
RULE_GPU: Final = "gpu"
#: Percentage units (100 per device): a multiple of 100 above 100 is that many whole devices;
#: ``ApplyForAll`` and ``RequestsAsCount`` hints apply (rdma, fpga).
RULE_UNITS: Final = "units"
Rule = Literal["gpu", "units"]

#: Combination checks (implemented in ``requests``): none; the percentage rule on core and ratio;
#: the ``gpu.shared`` rule (core and ratio split evenly into at most 100 per card).
CHECK_ALWAYS: Final = "always"
CHECK_PERCENTAGES: Final = "percentages"
CHECK_SHARED: Final = "shared"
Check = Literal["always", "percentages", "shared"]

#: Most device types a table may hold: the filter kernel's per-type reason codes must stay below
#: ``kernels.FIRST_DYNAMIC_CODE``.
MAX_TYPES: Final = 7


class Convert(msgspec.Struct, frozen=True):
    """One converted resource: ``target = factor * request[source]``."""

    target: str
    source: str
    factor: int = 1


class Combination(msgspec.Struct, frozen=True):
    """A valid set of requested resource names, how it is checked and how it is converted."""

    names: frozenset[str]
    check: Check = "always"
    #: Empty: the request is kept as it is.
    convert: tuple[Convert, ...] = ()


class DeviceDemand(msgspec.Struct, frozen=True):
    """One device type's request rules."""

    device_type: str
    #: Names masked into the type's request, in Koordinator's order.
    resources: tuple[str, ...]
    #: Resources a device's kernel slot holds, by column (after conversion).
    columns: tuple[str, ...]
    rule: Rule
    combinations: tuple[Combination, ...]
    #: Names checked one by one with the percentage rule (``V <= 100 or V % 100 == 0``).
    percentage_checked: frozenset[str] = frozenset()

    @property
    def unit(self) -> str:
        """The resource the units rule reads (the first masked name)."""
        return self.resources[0]


def _whole(name: str) -> Combination:
    """A whole-card name: N cards become N*100 core and N*100 memory ratio."""
    return Combination(
        frozenset({name}), convert=(Convert(GPU_CORE, name, 100), Convert(GPU_MEMORY_RATIO, name, 100))
    )


def _gpu_combinations() -> tuple[Combination, ...]:
    percentages = [
        frozenset({GPU_MEMORY}),
        frozenset({GPU_MEMORY_RATIO}),
        frozenset({GPU_CORE, GPU_MEMORY}),
        frozenset({GPU_CORE, GPU_MEMORY_RATIO}),
    ]
    shared = [
        frozenset({GPU_SHARED, GPU_MEMORY}),
        frozenset({GPU_SHARED, GPU_MEMORY_RATIO}),
        frozenset({GPU_SHARED, GPU_CORE, GPU_MEMORY}),
        frozenset({GPU_SHARED, GPU_CORE, GPU_MEMORY_RATIO}),
    ]
    return (
        _whole(NVIDIA_GPU),
        _whole(AMD_GPU),
        _whole(HYGON_DCU),
        Combination(frozenset({GPU}), convert=(Convert(GPU_CORE, GPU), Convert(GPU_MEMORY_RATIO, GPU))),
        *(Combination(names, check="percentages") for names in percentages),
        *(Combination(names, check="shared") for names in shared),
    )


def _units(device_type: str, name: str) -> DeviceDemand:
    return DeviceDemand(
        device_type,
        resources=(name,),
        columns=(name,),
        rule=RULE_UNITS,
        combinations=(Combination(frozenset({name})),),
        percentage_checked=frozenset({name}),
    )


#: Koordinator v1.6's device types, in the order used wherever Go ranges over a map of them.
DEMANDS: Final = (
    DeviceDemand(
        DEVICE_GPU,
        resources=(NVIDIA_GPU, AMD_GPU, HYGON_DCU, GPU, GPU_SHARED, GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO),
        columns=(GPU_CORE, GPU_MEMORY_RATIO, GPU_MEMORY),
        rule=RULE_GPU,
        combinations=_gpu_combinations(),
        percentage_checked=frozenset({GPU}),
    ),
    _units(DEVICE_RDMA, RDMA),
    _units(DEVICE_FPGA, FPGA),
)


class DemandTable:
    """The table with the lookups its readers need (built once per table)."""

    __slots__ = (
        "all_names",
        "by_type",
        "columns",
        "combinations",
        "demands",
        "gpu_type",
        "index",
        "nr",
        "nt",
        "resource_names",
        "types",
    )

    def __init__(self, demands: Iterable[DeviceDemand]) -> None:
        self.demands: tuple[DeviceDemand, ...] = tuple(demands)
        #: Device types by kernel index (also the order requests are parsed and allocated in).
        self.types: tuple[str, ...] = tuple(d.device_type for d in self.demands)
        if len(set(self.types)) != len(self.types) or not 0 < len(self.types) <= MAX_TYPES:
            raise ValueError(f"device demand table: 1 to {MAX_TYPES} distinct device types, got {self.types}")
        gpu_types = [d.device_type for d in self.demands if d.rule == RULE_GPU]
        if len(gpu_types) > 1:
            raise ValueError(f"device demand table: at most one type follows the GPU rules, got {gpu_types}")
        self.gpu_type: str = gpu_types[0] if gpu_types else ""
        self.index: Mapping[str, int] = {t: i for i, t in enumerate(self.types)}
        self.by_type: Mapping[str, DeviceDemand] = {d.device_type: d for d in self.demands}
        self.resource_names: Mapping[str, tuple[str, ...]] = {
            d.device_type: d.resources for d in self.demands
        }
        self.all_names: frozenset[str] = frozenset(n for d in self.demands for n in d.resources)
        #: Per kernel index: the resources its slots hold.
        self.columns: tuple[tuple[str, ...], ...] = tuple(d.columns for d in self.demands)
        self.nt: int = len(self.types)
        self.nr: int = max(len(c) for c in self.columns)
        #: Per device type: the valid name sets.
        self.combinations: Mapping[str, Mapping[frozenset[str], Combination]] = {
            d.device_type: {c.names: c for c in d.combinations} for d in self.demands
        }

    def with_demand(self, demand: DeviceDemand) -> DemandTable:
        """This table plus one more type (appended last)."""
        return DemandTable((*self.demands, demand))


#: The table every reader uses.
TABLE: DemandTable = DemandTable(DEMANDS)
