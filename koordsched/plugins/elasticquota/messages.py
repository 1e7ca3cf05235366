"""Koordinator's ElasticQuota messages, and resource lists printed as it prints them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from koordsched.api.quantity import BINARY_SI, DECIMAL_SI, format_milli_cpu, format_quantity

INSUFFICIENT: Final = (
    "Insufficient quotas, quotaName: {name}, runtime: {limit}, used: {used}, pod's request: {request}, "
    "exceedDimensions: {exceed}"
)
INSUFFICIENT_TOPO: Final = (
    "Insufficient quotas, quotaNameTopo: {topo}, runtime: {limit}, used: {used}, pod's request: {request}, "
    "exceedDimensions: {exceed}"
)
INSUFFICIENT_NON_PREEMPTIBLE: Final = (
    "Insufficient non-preemptible quotas, quotaName: {name}, min: {min}, nonPreemptibleUsed: {used}, "
    "pod's request: {request}, exceedDimensions: {exceed}"
)


def quantity(resource: str, amount: int) -> str:
    """``Quantity.String()`` of a canonical amount: cpu from millicores ("2", "1500m"); other
    resources in BinarySI when a whole multiple of 1024 ("4Gi"), else DecimalSI ("1G", "3").

    Go prints a sum in the format of its first operand; the amounts here are sums kept as
    integers, so the format is chosen from the value (the same string for the usual "Gi" and
    "G" amounts)."""
    if resource == "cpu":
        return format_milli_cpu(amount)
    if amount >= 1024 and amount % 1024 == 0:
        return format_quantity(amount, BINARY_SI)
    return format_quantity(amount, DECIMAL_SI)


def resource_list(amounts: Mapping[str, int]) -> str:
    """``printResourceList``: ``name:quantity`` pairs, sorted, joined by commas."""
    return ",".join(sorted(f"{r}:{quantity(r, v)}" for r, v in amounts.items()))


def go_list(names: Iterable[str]) -> str:
    """A Go slice printed with ``%v``: ``[cpu memory]``."""
    return "[" + " ".join(names) + "]"


def exceeded(total: Mapping[str, int], limit: Mapping[str, int]) -> list[str]:
    """``quotav1.LessThanOrEqual(total, limit)``'s failing dimensions: the resources of ``limit``
    that ``total`` names and passes, sorted (Go lists them in map order)."""
    return sorted(r for r, cap in limit.items() if r in total and total[r] > cap)


def exceeded_sum(request: Mapping[str, int], used: Mapping[str, int], limit: Mapping[str, int]) -> list[str]:
    """:func:`exceeded` of ``request + used`` without building the sum (PreFilter's check)."""
    over = [
        r
        for r, cap in limit.items()
        if (r in request or r in used) and request.get(r, 0) + used.get(r, 0) > cap
    ]
    return sorted(over) if len(over) > 1 else over


def add(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    out = dict(a)
    for r, v in b.items():
        out[r] = out.get(r, 0) + v
    return out
