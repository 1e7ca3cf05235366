"""The CPU accumulator on a 2 sockets x 2 NUMA nodes x 4 cores x 2 threads machine (32 CPUs).

CPU numbering (siblings adjacent): NUMA node 0 = CPUs 0-7 (cores 0-3), node 1 = 8-15
(socket 0), node 2 = 16-23, node 3 = 24-31 (socket 1). Expected sets were worked out by
hand from the steps in spec 4.2 "CPU accumulator".
"""

from __future__ import annotations

import pytest

from koordsched.plugins.nodenumaresource.accumulator import (
    ERR_NOT_ENOUGH_CPUS,
    AllocatedCPU,
    CPUAllocationError,
    take_cpus,
    take_preferred_cpus,
)
from koordsched.plugins.nodenumaresource.cpuset import format_cpuset, parse_cpuset
from tests.plugins.numa.helpers import topology

TOPO = topology(2, 2, 4, 2)
ONE_THREAD = topology(2, 1, 4, 1)
ALL = TOPO.cpus

LEAST = "LeastAllocated"
MOST = "MostAllocated"
FULL = "FullPCPUs"
SPREAD = "SpreadByPCPUs"

# (name, needed, policy, strategy, allocated cpulist, allocated exclusive policy, pod exclusive, expected)
CASES = [
    ("full: first NUMA node, first cores", 4, FULL, LEAST, "", "", "", "0-3"),
    ("full most-allocated: fullest NUMA node that fits", 4, FULL, MOST, "0-1", "", "", "2-5"),
    (
        "full least-allocated: emptiest node, emptier socket breaks ties",
        4,
        FULL,
        LEAST,
        "0-1",
        "",
        "",
        "16-19",
    ),
    ("full: more than a node, within a socket", 10, FULL, LEAST, "", "", "", "0-9"),
    ("full: more than a socket, whole socket then cores", 20, FULL, LEAST, "", "", "", "0-19"),
    ("spread: one CPU per core in one node", 4, SPREAD, LEAST, "", "", "", "0,2,4,6"),
    ("spread: siblings once every core is used", 6, SPREAD, LEAST, "", "", "", "0-4,6"),
    ("spread: within a socket", 10, SPREAD, LEAST, "", "", "", "0-4,6,8,10,12,14"),
    (
        "spread: beyond a socket, round robin over cores",
        18,
        SPREAD,
        LEAST,
        "",
        "",
        "",
        "0-4,6,8,10,12,14,16,18,20,22,24,26,28,30",
    ),
    (
        "spread PCPULevel avoids the sibling of an exclusive core",
        2,
        SPREAD,
        MOST,
        "0",
        "PCPULevel",
        "PCPULevel",
        "2,4",
    ),
    ("spread without exclusivity takes the sibling", 2, SPREAD, MOST, "0", "PCPULevel", "", "1-2"),
    (
        "full NUMANodeLevel avoids an exclusive NUMA node",
        2,
        FULL,
        MOST,
        "0-1",
        "NUMANodeLevel",
        "NUMANodeLevel",
        "8-9",
    ),
    ("full without exclusivity packs into the used node", 2, FULL, MOST, "0-1", "NUMANodeLevel", "", "2-3"),
    ("nothing needed", 0, FULL, LEAST, "", "", "", ""),
]


@pytest.mark.parametrize(
    ("needed", "policy", "strategy", "used", "used_excl", "excl", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_take_cpus(
    needed: int, policy: str, strategy: str, used: str, used_excl: str, excl: str, expected: str
) -> None:
    held = parse_cpuset(used)
    allocated = {c: AllocatedCPU(1, used_excl) for c in held}
    got = take_cpus(TOPO, 1, ALL - held, allocated, needed, policy, excl, strategy)
    assert format_cpuset(got) == expected
    assert len(got) == needed and not got & held


def test_one_thread_per_core_takes_the_core_path_even_for_spread() -> None:
    got = take_cpus(ONE_THREAD, 1, ONE_THREAD.cpus, {}, 2, SPREAD, "", LEAST)
    assert format_cpuset(got) == "0-1"


def test_not_enough() -> None:
    with pytest.raises(CPUAllocationError, match=ERR_NOT_ENOUGH_CPUS):
        take_cpus(TOPO, 1, ALL, {}, 33, FULL, "", LEAST)


def test_full_pcpus_with_fragmented_cores_falls_back_to_loose_cpus() -> None:
    # Every core has one sibling taken: no whole core is left, the final step still finds 4 CPUs.
    held = frozenset(range(0, 32, 2))
    got = take_cpus(TOPO, 1, ALL - held, {c: AllocatedCPU(1) for c in held}, 4, FULL, "", LEAST)
    assert len(got) == 4 and not got & held


def test_preferred_cpus_first() -> None:
    preferred = parse_cpuset("24-27")
    got = take_preferred_cpus(TOPO, 1, ALL, preferred, {}, 6, FULL, "", LEAST)
    assert preferred <= got and len(got) == 6


def test_deterministic() -> None:
    held = parse_cpuset("3,9,17")
    allocated = {c: AllocatedCPU(1) for c in held}
    runs = {take_cpus(TOPO, 1, ALL - held, allocated, 7, SPREAD, "", MOST) for _ in range(5)}
    assert len(runs) == 1
