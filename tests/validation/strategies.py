"""Hypothesis strategies for hostile input: quantities, enum strings, JSON, ids, nesting."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from koordsched.api.koordinator import (
    ANNOTATION_DEVICE_ALLOCATE_HINT,
    ANNOTATION_DEVICE_JOINT_ALLOCATE,
    ANNOTATION_GPU_PARTITION_SPEC,
    ANNOTATION_NUMA_TOPOLOGY_SPEC,
    ANNOTATION_RESOURCE_SPEC,
)
from koordsched.api.koordinator_checks import (
    ALLOCATE_STRATEGIES,
    CPU_BIND_POLICIES,
    CPU_EXCLUSIVE_POLICIES,
    DEVICE_EXCLUSIVE_POLICIES,
    JOINT_ALLOCATE_SCOPES,
    NUMA_EXCLUSIVE_POLICIES,
    NUMA_TOPOLOGY_POLICIES,
    PARTITION_ALLOCATE_POLICIES,
    TOPOLOGY_SCOPES,
)

SUFFIXES = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E"]
#: Values found by hand that broke things once; always among the examples' candidates.
KNOWN_QUANTITIES = [
    "8Ei",
    "7Ei",
    "99999999999999999999",
    "1e18",
    "-30",
    "-4",
    "9223372036854775807",
    "9223372036854775808",
    "9223372036854775807m",
    "1e99999",
    "1" * 5000,
    "0.1m",
    "",
    "lots",
]


@st.composite
def well_formed_quantities(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "+", "-"]))
    whole = draw(st.text("0123456789", min_size=1, max_size=25))
    frac = draw(st.one_of(st.just(""), st.text("0123456789", max_size=12).map(lambda d: "." + d)))
    exp = draw(
        st.one_of(
            st.sampled_from(SUFFIXES),
            st.integers(-40, 40).map(lambda e: f"e{e}"),
            st.integers(-99999, 99999).map(lambda e: f"E{e}"),
        )
    )
    return f"{sign}{whole}{frac}{exp}"


def quantities() -> st.SearchStrategy[Any]:
    """Strings a manifest may hold as a quantity, well-formed or not, plus YAML numbers."""
    return st.one_of(
        st.sampled_from(KNOWN_QUANTITIES),
        well_formed_quantities(),
        st.text(max_size=12),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
    )


def wide_ints() -> st.SearchStrategy[int]:
    """Ids and counts, concentrated near the edges of int32/int64 and of small ranges."""
    edges = [0, -1, 1, 2**15, 2**16, 2**20, 2**31 - 1, 2**31, 2**40, 2**62, 2**63 - 1, 2**63, -(2**63)]
    return st.one_of(st.sampled_from(edges), st.integers(-(2**64), 2**64), st.integers(-5, 70000))


def enum_values(valid: Sequence[str]) -> st.SearchStrategy[str]:
    """A Koordinator enum field: a valid value, empty, or any other string."""
    return st.one_of(st.sampled_from(list(valid)), st.just(""), st.text(max_size=10))


def json_values() -> st.SearchStrategy[Any]:
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False),
        st.text(max_size=8),
    )
    return st.recursive(
        leaves,
        lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(st.text(max_size=8), c, max_size=4)),
        max_leaves=12,
    )


def nested_json(depth: int) -> str:
    return "[" * depth + "]" * depth


def annotation_texts(doc: st.SearchStrategy[Any]) -> st.SearchStrategy[str]:
    """An annotation value: ``doc`` as JSON, arbitrary JSON, text, deep nesting, or empty."""
    return st.one_of(
        doc.map(json.dumps),
        json_values().map(json.dumps),
        st.text(max_size=30),
        st.integers(1, 20_000).map(nested_json),
        st.just(""),
    )


# --- Koordinator annotation documents ---------------------------------------------------------

hint_docs = st.dictionaries(
    st.one_of(st.sampled_from(["gpu", "rdma", "fpga"]), st.text(max_size=5)),
    st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {},
            optional={
                "allocateStrategy": enum_values(ALLOCATE_STRATEGIES),
                "requiredTopologyScope": enum_values(TOPOLOGY_SCOPES),
                "exclusivePolicy": enum_values(DEVICE_EXCLUSIVE_POLICIES),
            },
        ),
    ),
    max_size=3,
)
partition_docs = st.fixed_dictionaries(
    {},
    optional={"allocatePolicy": enum_values(PARTITION_ALLOCATE_POLICIES), "ringBusBandwidth": quantities()},
)
joint_docs = st.fixed_dictionaries(
    {},
    optional={
        "deviceTypes": st.lists(st.sampled_from(["gpu", "rdma", "fpga"]), max_size=3),
        "requiredScope": enum_values(JOINT_ALLOCATE_SCOPES),
    },
)
resource_spec_docs = st.fixed_dictionaries(
    {},
    optional={
        "requiredCPUBindPolicy": enum_values(CPU_BIND_POLICIES),
        "preferredCPUBindPolicy": enum_values(CPU_BIND_POLICIES),
        "preferredCPUExclusivePolicy": enum_values(CPU_EXCLUSIVE_POLICIES),
    },
)
numa_spec_docs = st.fixed_dictionaries(
    {},
    optional={
        "numaTopologyPolicy": enum_values(NUMA_TOPOLOGY_POLICIES),
        "singleNUMANodeExclusive": enum_values(NUMA_EXCLUSIVE_POLICIES),
    },
)
DOCS = {
    ANNOTATION_DEVICE_ALLOCATE_HINT: hint_docs,
    ANNOTATION_GPU_PARTITION_SPEC: partition_docs,
    ANNOTATION_DEVICE_JOINT_ALLOCATE: joint_docs,
    ANNOTATION_RESOURCE_SPEC: resource_spec_docs,
    ANNOTATION_NUMA_TOPOLOGY_SPEC: numa_spec_docs,
}
VALID = {
    "allocateStrategy": ALLOCATE_STRATEGIES,
    "requiredTopologyScope": TOPOLOGY_SCOPES,
    "exclusivePolicy": DEVICE_EXCLUSIVE_POLICIES,
    "allocatePolicy": PARTITION_ALLOCATE_POLICIES,
    "requiredScope": JOINT_ALLOCATE_SCOPES,
    "requiredCPUBindPolicy": CPU_BIND_POLICIES,
    "preferredCPUBindPolicy": CPU_BIND_POLICIES,
    "preferredCPUExclusivePolicy": CPU_EXCLUSIVE_POLICIES,
    "numaTopologyPolicy": NUMA_TOPOLOGY_POLICIES,
    "singleNUMANodeExclusive": NUMA_EXCLUSIVE_POLICIES,
}


def bad_enums(doc: Any) -> list[tuple[str, str]]:
    """(field, value) pairs of ``doc`` that are not among Koordinator's values."""
    out: list[tuple[str, str]] = []
    if not isinstance(doc, dict):
        return out
    for key, value in doc.items():
        if isinstance(value, dict):
            out += bad_enums(value)
        elif key in VALID and value and value not in VALID[key]:
            out.append((key, value))
    return out
