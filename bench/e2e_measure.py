"""bench/e2e.py's measurements: CPU from /proc, and what a scheduler's /metrics and /configz say."""

from __future__ import annotations

import os
import ssl
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from tests.e2e.helpers import parse_metrics as parse_samples

CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------------------
# /proc accounting


def proc_cpu(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds; NaN once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return float("nan")
    fields = stat.rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_busy() -> tuple[float, float]:
    """CPU seconds the whole machine spent busy (all cores), and the part of it in irq/softirq."""
    with open("/proc/stat") as f:
        parts = f.readline().split()
    vals = [int(v) for v in parts[1:9]]  # user nice system idle iowait irq softirq steal
    return (sum(vals) - vals[3] - vals[4]) / CLK_TCK, (vals[5] + vals[6]) / CLK_TCK


def all_procs() -> dict[int, tuple[str, float, int]]:
    """pid -> (comm, cpu seconds, start time) for every process, to name the "other" CPU users."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        head, _, rest = stat.rpartition(")")
        fields = rest.split()
        cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK
        out[int(entry.name)] = (head.partition("(")[2], cpu, int(fields[19]))
    return out


@dataclass
class CpuSample:
    t: float
    procs: dict[str, float]
    machine: float
    irq: float
    everyone: dict[int, tuple[str, float, int]]

    @staticmethod
    def take(pids: dict[str, int]) -> CpuSample:
        busy, irq = machine_busy()
        return CpuSample(time.monotonic(), {k: proc_cpu(p) for k, p in pids.items()}, busy, irq, all_procs())


def cpu_split(a: CpuSample, b: CpuSample, pids: dict[str, int]) -> dict[str, Any]:
    """CPU seconds and cores (CPU seconds per wall second) per process between two samples.

    ``irq`` is the kernel's irq+softirq time (loopback TCP, mostly), ``other`` every other
    process on the machine (other users' work included), ``top_other`` the biggest of those.
    """
    wall = max(b.t - a.t, 1e-9)
    secs = {k: round(b.procs[k] - a.procs.get(k, 0.0), 2) for k in b.procs}
    machine = b.machine - a.machine
    secs["irq"] = round(b.irq - a.irq, 2)
    secs["other"] = round(machine - sum(secs.values()), 2)
    ours = set(pids.values())
    others: dict[str, float] = defaultdict(float)
    for pid, (comm, cpu, started) in b.everyone.items():
        if pid in ours:
            continue
        before = a.everyone.get(pid)  # the same process only if it started at the same time
        used = cpu - (before[1] if before and before[2] == started else 0.0)
        if used > 0:
            others[f"{comm}[{pid}]"] += used
    return {
        "wall_s": round(wall, 2),
        "cpu_s": secs,
        "cores": {k: round(v / wall, 2) for k, v in secs.items()},
        "machine_cores_busy": round(machine / wall, 2),
        "top_other": [(k, round(v, 2)) for k, v in sorted(others.items(), key=lambda kv: -kv[1])[:4]],
    }


# ---------------------------------------------------------------------------------------------
# metrics


def parse_metrics(text: str) -> list[tuple[str, dict[str, str], float]]:
    """The samples of a /metrics text as (name, labels, value), the e2e tests' parser reshaped."""
    return [(name, dict(labels), value) for (name, labels), value in parse_samples(text).items()]


def histogram_quantiles(
    samples: list[tuple[str, dict[str, str], float]],
    name: str,
    qs: tuple[float, ...] = (0.5, 0.9, 0.99),
    **match: str,
) -> dict[str, Any] | None:
    """Prometheus ``histogram_quantile`` (linear within a bucket) over every matching series summed."""
    buckets: dict[float, float] = defaultdict(float)
    total_sum = 0.0
    for metric, labels, value in samples:
        if any(labels.get(k) != v for k, v in match.items()):
            continue
        if metric == name + "_bucket":
            buckets[float(labels["le"])] += value
        elif metric == name + "_sum":
            total_sum += value
    if not buckets:
        return None
    bounds = sorted(buckets)
    count = buckets[bounds[-1]]
    if count <= 0:
        return None
    result: dict[str, Any] = {"count": int(count), "mean_ms": round(1000 * total_sum / count, 2)}
    for q in qs:
        rank = q * count
        lo_bound, lo_count = 0.0, 0.0
        value = bounds[-2] if len(bounds) > 1 else 0.0
        for b in bounds:
            c = buckets[b]
            if c >= rank:
                if b == float("inf"):
                    value = lo_bound  # as Prometheus does: the highest finite bound
                else:
                    value = lo_bound + (b - lo_bound) * ((rank - lo_count) / max(c - lo_count, 1e-12))
                break
            lo_bound, lo_count = b, c
        result[f"p{round(q * 100):d}_ms"] = round(1000 * value, 2)
    return result


def histogram_mean(samples: list[tuple[str, dict[str, str], float]], name: str) -> float | None:
    total = sum(v for m, _, v in samples if m == name + "_sum")
    count = sum(v for m, _, v in samples if m == name + "_count")
    return round(total / count, 1) if count else None


def counter_by(samples: list[tuple[str, dict[str, str], float]], name: str, label: str) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for metric, labels, value in samples:
        if metric == name:
            out[labels.get(label, "")] += int(value)
    return dict(out)


def _ci(d: Any, key: str) -> Any:
    """``d[key]`` ignoring case (``qps``/``QPS``, ``clientConnection``/``ClientConnection``)."""
    if isinstance(d, dict):
        for k, v in d.items():
            if k.lower() == key.lower():
                return v
    return None


def configz_summary(cfg: dict[str, Any]) -> dict[str, Any]:
    cc = _ci(cfg, "clientConnection") or {}
    le = _ci(cfg, "leaderElection") or {}
    profiles = _ci(cfg, "profiles") or []
    return {
        "qps": _ci(cc, "qps"),
        "burst": _ci(cc, "burst"),
        "leaderElect": _ci(le, "leaderElect"),
        "percentageOfNodesToScore": _ci(cfg, "percentageOfNodesToScore"),
        "profiles": [_ci(p, "schedulerName") for p in profiles],
    }


def scrape(url: str, token: str | None = None) -> str:
    """GET ``url``; koordsched's port is HTTPS with a self-signed certificate and wants a token."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    req = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
        return str(resp.read().decode())
