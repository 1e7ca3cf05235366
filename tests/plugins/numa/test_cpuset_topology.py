"""Linux cpulists and the CPU topology built from the NRT's cpu-topology annotation."""

from __future__ import annotations

import random

import pytest

from koordsched.api.koordinator import CPUInfo
from koordsched.plugins.nodenumaresource.cpuset import format_cpuset, parse_cpuset
from koordsched.plugins.nodenumaresource.topology import EMPTY_TOPOLOGY, CPUTopology
from tests.plugins.numa.helpers import topology

ROUND_TRIPS = [
    ("", set()),
    ("0", {0}),
    ("0-3", {0, 1, 2, 3}),
    ("0-3,8,10-11", {0, 1, 2, 3, 8, 10, 11}),
    ("1,3,5", {1, 3, 5}),
    ("0-1", {0, 1}),
    ("7,9-10,12-15", {7, 9, 10, 12, 13, 14, 15}),
]


@pytest.mark.parametrize(("text", "cpus"), ROUND_TRIPS)
def test_round_trip(text: str, cpus: set[int]) -> None:
    assert parse_cpuset(text) == cpus
    assert format_cpuset(cpus) == text


@pytest.mark.parametrize(
    ("text", "canonical"), [("3,2,1,0", "0-3"), ("0-2,1-4", "0-4"), ("5,5", "5"), ("2-2", "2")]
)
def test_non_canonical_input_is_normalised(text: str, canonical: str) -> None:
    assert format_cpuset(parse_cpuset(text)) == canonical


@pytest.mark.parametrize("text", ["a", "1-", "-1", "3-1", "1,,2", "1-2-3", " 1", "1.5", "٣"])
def test_invalid(text: str) -> None:
    with pytest.raises(ValueError, match="invalid cpuset"):
        parse_cpuset(text)


def test_random_round_trips() -> None:
    rng = random.Random(7)
    for _ in range(200):
        cpus = {rng.randrange(64) for _ in range(rng.randrange(20))}
        assert parse_cpuset(format_cpuset(cpus)) == cpus


def test_topology_counts() -> None:
    t = topology(2, 2, 4, 2)
    assert (t.num_sockets, t.num_nodes, t.num_cores, t.num_cpus) == (2, 4, 16, 32)
    assert (t.cpus_per_core, t.cpus_per_node, t.cpus_per_socket) == (2, 8, 16)
    assert t.is_valid()
    assert t.cpus_in_node[1] == frozenset(range(8, 16))
    assert t.cpus_in_core[0] == (0, 1)


def test_core_ids_are_unique_across_sockets() -> None:
    # Both sockets number their cores from 0: socket << 16 | core keeps them apart.
    infos = [
        CPUInfo(id=0, core=0, socket=0, node=0),
        CPUInfo(id=1, core=0, socket=0, node=0),
        CPUInfo(id=2, core=0, socket=1, node=1),
        CPUInfo(id=3, core=0, socket=1, node=1),
    ]
    t = CPUTopology.build(infos)
    assert t.num_cores == 2 and t.cpus_per_core == 2
    assert t.details[2].core == 1 << 16
    assert set(t.cpus_in_core) == {0, 1 << 16}


def test_validity() -> None:
    assert not EMPTY_TOPOLOGY.is_valid()
    assert EMPTY_TOPOLOGY.cpus_per_core == 0
    assert CPUTopology.build([CPUInfo(id=0)]).is_valid()
