"""Linux cpulists ("0-3,8,10-11"): the format of cpusets in annotations and NRT reports.

Parsing follows k8s ``cpuset.Parse``: comma-separated single ids or inclusive ``a-b``
ranges, an empty string meaning no CPUs; anything else is a ValueError whose text
names the bad part, so a malformed annotation is reported on its own object.
Formatting follows ``CPUSet.String``: ascending, runs of two or more as ranges.
"""

from __future__ import annotations

from collections.abc import Iterable

CPUSet = frozenset[int]
EMPTY: CPUSet = frozenset()
#: The largest CPU id Linux can number (``NR_CPUS`` is at most 8192): a cpulist naming more is
#: refused before a set of that size is built ("0-999999999" would take a billion ints).
MAX_CPU_ID = 8191


def _int(text: str, whole: str) -> int:
    if not text.isdigit() or not text.isascii():
        raise ValueError(f"invalid cpuset {whole!r}: {text!r} is not a CPU number")
    if len(text.lstrip("0")) > len(str(MAX_CPU_ID)) or int(text) > MAX_CPU_ID:
        raise ValueError(f"invalid cpuset {whole!r}: CPU {text} is out of range (0 to {MAX_CPU_ID})")
    return int(text)


def parse_cpuset(text: str) -> CPUSet:
    """The CPUs of a cpulist; "" is the empty set."""
    if text == "":
        return EMPTY
    out: set[int] = set()
    for part in text.split(","):
        bounds = part.split("-")
        if len(bounds) == 1:
            out.add(_int(bounds[0], text))
        elif len(bounds) == 2:
            start, end = _int(bounds[0], text), _int(bounds[1], text)
            if start > end:
                raise ValueError(f"invalid cpuset {text!r}: invalid range {part!r} ({start} > {end})")
            out.update(range(start, end + 1))
        else:
            raise ValueError(f"invalid cpuset {text!r}: invalid range {part!r}")
    return frozenset(out)


def format_cpuset(cpus: Iterable[int]) -> str:
    """A cpulist, e.g. {0, 1, 2, 3, 8, 10, 11} -> "0-3,8,10-11"."""
    ordered = sorted(set(cpus))
    if not ordered:
        return ""
    parts: list[str] = []
    start = prev = ordered[0]
    for cpu in ordered[1:]:
        if cpu == prev + 1:
            prev = cpu
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)
