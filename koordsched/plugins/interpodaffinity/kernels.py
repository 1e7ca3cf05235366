"""InterPodAffinity's passes over snapshot rows.

Counts live per node row (matching pods on that node, kept incrementally); a topology key's
column gives each row its domain id (-1 without the label). PreFilter and PreScore fold row
counts into per-domain arrays (``add_domain_counts``); Filter and Score read those arrays
back for each candidate row (``mark_key`` then ``filter_codes``, and ``add_gathered``).
Domain arrays are indexed by domain id; an id past an array's end reads as 0.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit
from numba import types as nbt

I64Array = npt.NDArray[np.int64]
I32Array = npt.NDArray[np.int32]
U8Array = npt.NDArray[np.uint8]

_I64_1D = nbt.int64[::1]
_I32_1D = nbt.int32[::1]
_U8_1D = nbt.uint8[::1]

#: Filter codes, in upstream's order of checks.
CODE_AFFINITY = 1
CODE_ANTI_AFFINITY = 2
CODE_EXISTING_ANTI_AFFINITY = 3

# Per-row flags gathered over the topology keys.
_MISSING_KEY = 1  # the node lacks a key of the pod's required affinity
_NO_MATCH = 2  # a required-affinity domain of the node holds no matching pod
_ANTI = 4  # a domain of the node holds a pod the incoming pod's anti-affinity matches
_EXISTING = 8  # a domain of the node holds a pod whose anti-affinity matches the incoming pod


@njit(nbt.int64(_I64_1D, _I32_1D, nbt.int64, _I64_1D, nbt.int64), cache=True, nogil=True)
def add_domain_counts(counts: I64Array, domains: I32Array, n: int, out: I64Array, weight: int) -> int:
    """``out[domain] += weight * count`` over the first ``n`` rows that have the key.

    Returns how many pods were counted (rows with the key), so a caller can tell "no pod
    in any domain" (upstream's empty map) from counts that happen to sum to zero.
    """
    seen = 0
    for row in range(n):
        c = counts[row]
        if c != 0:
            d = domains[row]
            if d >= 0:
                out[d] += weight * c
                seen += c
    return seen


@njit(
    nbt.void(_I64_1D, _I32_1D, _I64_1D, _I64_1D, _I64_1D, nbt.boolean, _U8_1D),
    cache=True,
    nogil=True,
)
def mark_key(
    rows: I64Array,
    domains: I32Array,
    affinity: I64Array,
    anti: I64Array,
    existing: I64Array,
    is_affinity_key: bool,
    flags: U8Array,
) -> None:
    """Set each row's flags for one topology key (``affinity`` etc. are per-domain counts)."""
    n_aff = len(affinity)
    n_anti = len(anti)
    n_existing = len(existing)
    for i in range(len(rows)):
        d = domains[rows[i]]
        if d < 0:
            if is_affinity_key:
                flags[i] |= _MISSING_KEY
            continue
        if is_affinity_key and (d >= n_aff or affinity[d] <= 0):
            flags[i] |= _NO_MATCH
        if d < n_anti and anti[d] > 0:
            flags[i] |= _ANTI
        if d < n_existing and existing[d] > 0:
            flags[i] |= _EXISTING


@njit(_I64_1D(_U8_1D, nbt.boolean), cache=True, nogil=True)
def filter_codes(flags: U8Array, first_of_group: bool) -> I64Array:
    """Each row's code from its flags: affinity, then anti-affinity, then existing pods' anti-affinity.

    ``first_of_group``: no pod anywhere matches the required affinity and the pod matches its
    own terms, so a node that has every key passes affinity.
    """
    out = np.zeros(len(flags), dtype=np.int64)
    for i in range(len(flags)):
        f = flags[i]
        if f & _MISSING_KEY or (f & _NO_MATCH and not first_of_group):
            out[i] = CODE_AFFINITY
        elif f & _ANTI:
            out[i] = CODE_ANTI_AFFINITY
        elif f & _EXISTING:
            out[i] = CODE_EXISTING_ANTI_AFFINITY
    return out


@njit(nbt.void(_I64_1D, _I32_1D, _I64_1D, _I64_1D), cache=True, nogil=True)
def add_gathered(rows: I64Array, domains: I32Array, per_domain: I64Array, out: I64Array) -> None:
    """``out[i] += per_domain[domain of rows[i]]`` where the row has the key."""
    size = len(per_domain)
    for i in range(len(rows)):
        d = domains[rows[i]]
        if 0 <= d < size:
            out[i] += per_domain[d]


def warm_up() -> None:
    """Run every kernel once (the plugin's ``PluginSpec.warm_up``)."""
    rows = np.zeros(1, dtype=np.int64)
    domains = np.zeros(1, dtype=np.int32)
    counts = np.ones(1, dtype=np.int64)
    out = np.zeros(1, dtype=np.int64)
    flags = np.zeros(1, dtype=np.uint8)
    add_domain_counts(counts, domains, 1, out, 1)
    mark_key(rows, domains, counts, counts, counts, True, flags)
    filter_codes(flags, False)
    add_gathered(rows, domains, out, out)
