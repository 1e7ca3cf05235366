"""NUMA affinity masks as plain ints, with kubelet's ``bitmask`` semantics.

A mask is an ``int`` whose bit i stands for NUMA node i (at most 64 nodes, as in Go,
where the mask is a uint64). Plain ints keep hint merging cheap: AND, popcount and
comparison are single operations, and hints hash and compare by value.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

#: Go's bitmask is a uint64: NUMA ids outside [0, 64) cannot be represented.
MAX_BITS = 64


def from_bits(bits: Iterable[int]) -> int:
    """``bitmask.NewBitMask(bits...)``; a bit outside [0, 64) is a ValueError, as Go returns an error."""
    mask = 0
    for b in bits:
        if b < 0 or b >= MAX_BITS:
            raise ValueError(f"bit number must be in range 0-63, got {b}")
        mask |= 1 << b
    return mask


def bits_of(mask: int) -> list[int]:
    """The set bits, ascending (``GetBits``)."""
    out = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out


def count(mask: int) -> int:
    return mask.bit_count()


def is_narrower(a: int, b: int) -> bool:
    """``IsNarrowerThan``: fewer bits set, or as many bits and a smaller number (lower nodes win)."""
    ca, cb = a.bit_count(), b.bit_count()
    if ca == cb and a < b:
        return True
    return ca < cb


def to_string(mask: int | None) -> str:
    """Go's ``fmt.Sprintf("%v", mask)``: binary digits padded to an even width; ``<nil>`` for no mask.

    The width rule compares with ``>`` (not ``>=``), so 4 prints as "100" and 5 as "0101",
    exactly as kubelet's ``bitMask.String`` does; this text appears in Unaligned NUMA reasons.
    """
    if mask is None:
        return "<nil>"
    grouping = 2
    for shift in range(64 - grouping, 0, -grouping):
        if mask > (1 << shift):
            return format(mask, f"0{shift + grouping}b")
    return format(mask, f"0{grouping}b")


def iterate_masks(nodes: Iterable[int]) -> Iterator[int]:
    """``IterateBitMasks``: every non-empty subset of ``nodes`` as a mask, by size, in combination order."""
    ordered = list(nodes)
    for size in range(1, len(ordered) + 1):
        for combo in itertools.combinations(ordered, size):
            yield from_bits(combo)
