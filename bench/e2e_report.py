"""bench/e2e.py's results: the schedulers' names, the tables, and the profile summaries.

Kept apart from the runs themselves so that ``--table`` can re-render saved JSON lines, and so
that each module stays small.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]

#: In the order the tables show them: the headline three, then the labelled extras.
SCHEDULERS = (
    "binder",
    "koordsched",
    "kube-scheduler",
    "binder-events",
    "koordsched-reduced",
    "kube-scheduler-matched",
    "koordsched-baseline",
)
BINDERS = ("binder", "binder-events")
HEADLINE = ("binder", "koordsched", "kube-scheduler")
KUBE_SCHEDULERS = ("kube-scheduler", "kube-scheduler-matched")
KOORDSCHEDS = ("koordsched", "koordsched-reduced", "koordsched-baseline")
#: Names older JSON lines used (before the binder; "koordsched" was the reduced profile then).
_OLD_KINDS = {"koordsched": "koordsched-reduced", "koordsched-bundled": "koordsched"}


def kind_of(r: dict[str, Any]) -> str:
    """A result's scheduler under today's names (lines without ``config`` predate the renaming)."""
    kind = str(r["scheduler"])
    return kind if "config" in r else _OLD_KINDS.get(kind, kind)


#: Where a GIL-holding sample belongs: the first rule (in this order) with a frame in the stack.
PROFILE_CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("scheduling cycle (Scheduler.schedule_one)", ("Scheduler.schedule_one",)),
    ("bind request (KubePort.bind: kubernetes_asyncio + aiohttp)", ("KubePort.bind",)),
    ("event/status writes (BackgroundWriter)", ("BackgroundWriter.",)),
    ("watch streams (Reflector: decode + handlers)", ("Reflector.",)),
    ("aiohttp trust_env proxy/netrc lookup (thread pool)", ("get_env_proxy_for_url", "netrc_from_env")),
    ("other scheduler-loop code (Scheduler.*)", ("Scheduler.",)),
    ("metrics/health HTTP server", ("HttpServer.", "web_protocol")),
)
TRANSPORT = "HTTP/TLS transport callbacks (aiohttp protocol, ssl, asyncio transports)"
LOOP = "event loop and the rest"


def _categorize(funcs: list[str], leaf_module: str) -> str:
    for label, needles in PROFILE_CATEGORIES:
        if any(n in f for f in funcs for n in needles):
            return label
    if leaf_module.split(".")[0] in ("aiohttp", "ssl", "yarl", "multidict") or leaf_module in (
        "asyncio.sslproto",
        "asyncio.selector_events",
    ):
        return TRANSPORT
    return LOOP


def summarize_profile(path: Path, top: int = 25) -> dict[str, Any]:
    """Categories, self time by leaf function and package, inclusive time by koordsched function."""
    self_fn: Counter[str] = Counter()
    self_pkg: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    cats: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        count = int(n)
        frames = [f for f in stack.split(";") if " (" in f]
        if not frames:
            continue
        total += count
        names = [_frame_name(f) for f in frames]
        self_fn[names[-1]] += count
        self_pkg[_package(frames[-1])] += count
        cats[_categorize([f.partition(" (")[0] for f in frames], names[-1].split(":")[0])] += count
        for name in set(names):
            if name.startswith("koordsched"):
                incl[name] += count

    def pct(c: Counter[str], n: int = top) -> list[tuple[str, float]]:
        return [(k, round(100 * v / total, 1)) for k, v in c.most_common(n)] if total else []

    return {
        "samples": total,
        "categories": pct(cats, len(cats)),
        "self_by_package": pct(self_pkg),
        "self_by_function": pct(self_fn),
        "inclusive_koordsched": pct(incl),
    }


def _frame_name(frame: str) -> str:
    func, _, where = frame.partition(" (")
    file = where.rstrip(")").rpartition(":")[0]
    return f"{_module(file)}:{func}"


def _module(file: str) -> str:
    for marker in ("/site-packages/", "/lib/python3.11/", f"{REPO_ROOT}/", "/work/main/"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    return file.removesuffix(".py").replace("/", ".")


def _package(frame: str) -> str:
    mod = _frame_name(frame).split(":")[0]
    parts = mod.split(".")
    if parts[0] == "koordsched":
        return ".".join(parts[:3]) if parts[1] == "backends" else ".".join(parts[:2])
    return parts[0]


def summarize_cprofile(path: Path, top: int = 30) -> dict[str, Any]:
    """The functions with the most own time and the koordsched ones with the most cumulative time.

    The whole run is profiled (start-up too): read the shares of ``Scheduler.run`` and the write
    path against each other, not against the total.
    """
    import pstats

    stats = pstats.Stats(str(path))
    rows = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for (_, _, tt, _, _) in rows.values()) or 1e-9

    def name(fn: tuple[str, int, str]) -> str:
        file, line, func = fn
        return f"{_module(file)}:{func}:{line}" if file != "~" else func

    by_tt = sorted(rows.items(), key=lambda kv: -kv[1][2])[:top]
    by_ct = sorted(((fn, v) for fn, v in rows.items() if "koordsched" in fn[0]), key=lambda kv: -kv[1][3])[
        :top
    ]
    return {
        "file": str(path),
        "total_s": round(total, 2),
        "self": [(name(fn), round(v[2], 2), v[1]) for fn, v in by_tt],
        "cumulative_koordsched": [(name(fn), round(v[3], 2), v[1]) for fn, v in by_ct],
    }


# ---------------------------------------------------------------------------------------------
# report


def _median(vals: list[float]) -> float:
    vals = sorted(vals)
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def _fmt(v: float | None) -> str:
    if v is None or v != v:  # None or NaN
        return "-"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def _verdict(r: dict[str, Any]) -> str:
    return "yes" if r.get("ok") else "NO: " + str(r.get("error", r.get("checks")))


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def markdown(results: list[dict[str, Any]]) -> str:
    """The headline (binder, koordsched's bundled profile, kube-scheduler: medians over repeats and
    the ratios), the labelled reduced profiles beside it, scheduler CPU per pod, then each run."""
    rate: dict[tuple[int, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    cpu: dict[tuple[int, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    total: dict[tuple[int, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    rate_all: dict[tuple[int, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    total_all: dict[tuple[int, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        kind = kind_of(r)
        if r.get("pods_per_s"):
            rate[(r["nodes"], r["pods"])][kind].append(r["pods_per_s"])
        if r.get("pods_per_s_all_writes"):
            rate_all[(r["nodes"], r["pods"])][kind].append(r["pods_per_s_all_writes"])
        if r.get("cpu_ms_per_pod_all_writes"):
            ms = r["cpu_ms_per_pod_all_writes"]
            total_all[(r["nodes"], r["pods"])][kind].append(ms["scheduler"] + ms["apiserver"] + ms["etcd"])
        if r.get("cpu_ms_per_pod"):
            ms = r["cpu_ms_per_pod"]
            cpu[(r["nodes"], r["pods"])][kind].append(ms["scheduler"])
            total[(r["nodes"], r["pods"])][kind].append(ms["scheduler"] + ms["apiserver"] + ms["etcd"])
    present = [k for k in SCHEDULERS if any(k in g for g in rate.values())]
    lines = [
        "| nodes | pods | binder pods/s (ceiling) | koordsched pods/s (bundled profile) "
        "| kube-scheduler pods/s (default profile) | koordsched / binder | kube-scheduler / binder "
        "| koordsched / kube-scheduler |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (nodes, pods), by_kind in rate.items():
        med = {k: _median(v) for k, v in by_kind.items()}
        cells = [f"{_fmt(med.get(k))} (n={len(by_kind.get(k, []))})" for k in HEADLINE]
        b, k, ks = med.get("binder"), med.get("koordsched"), med.get("kube-scheduler")
        cells += [f"**{_ratio(k, b)}**", _ratio(ks, b), _ratio(k, ks)]
        lines.append(f"| {nodes:,} | {pods:,} | " + " | ".join(cells) + " |")
    if rate_all:
        # The same to the last write: a scheduler whose Scheduled events trail its binds has not
        # finished its work at the last bind.
        lines += [
            "",
            "To the last write (the later of the last bind and the last Scheduled event); "
            "CPU-bound ratio from CPU per pod over the same span",
            "",
            "| nodes | pods | "
            + " | ".join(f"{k} pods/s" for k in present if k in SCHEDULERS)
            + " | koordsched / binder | kube-scheduler / binder | koordsched / binder-events "
            "| CPU-bound: koordsched | CPU-bound: kube-scheduler |",
            "|---:|---:|" + "---:|" * (len(present) + 5),
        ]
        for size, by_kind in rate_all.items():
            med = {k: _median(v) for k, v in by_kind.items()}
            tot = {k: _median(v) for k, v in total_all[size].items()}
            cells = [f"{_fmt(med.get(k))} (n={len(by_kind.get(k, []))})" for k in present]
            b = med.get("binder")
            cells += [
                f"**{_ratio(med.get('koordsched'), b)}**",
                _ratio(med.get("kube-scheduler"), b),
                _ratio(med.get("koordsched"), med.get("binder-events")),
                _ratio(tot.get("binder"), tot.get("koordsched")),
                _ratio(tot.get("binder"), tot.get("kube-scheduler")),
            ]
            lines.append(f"| {size[0]:,} | {size[1]:,} | " + " | ".join(cells) + " |")
    extras = [k for k in present if k not in HEADLINE]
    if extras:
        lines += [
            "",
            "Beside it, labelled (not the headline): reduced profiles and the binder writing events",
            "",
            f"| nodes | pods | {' | '.join(f'{k} pods/s | {k} / binder' for k in extras)}"
            + (" | koordsched / binder-events |" if "binder-events" in extras else " |"),
            "|---:|---:|" + "---:|---:|" * len(extras) + ("---:|" if "binder-events" in extras else ""),
        ]
        for (nodes, pods), by_kind in rate.items():
            med = {k: _median(v) for k, v in by_kind.items()}
            cells = []
            for k in extras:
                cells += [
                    f"{_fmt(med.get(k))} (n={len(by_kind.get(k, []))})",
                    _ratio(med.get(k), med.get("binder")),
                ]
            if "binder-events" in extras:
                cells.append(_ratio(med.get("koordsched"), med.get("binder-events")))
            lines.append(f"| {nodes:,} | {pods:,} | " + " | ".join(cells) + " |")
    # CPU per pod is less sensitive than pods/s to what else the machine runs. Where the scheduler,
    # the API server and etcd share a CPU-bound machine, pods/s goes as 1 / their CPU per pod
    # together, so the binder's total over another's is the ratio that machine would show.
    lines += [
        "",
        "CPU ms per pod bound, scheduler and scheduler + kube-apiserver + etcd; "
        "CPU-bound ratio = binder's total / this one's",
        "",
        f"| nodes | pods | {' | '.join(f'{k} sched / total | CPU-bound ratio' for k in present)} |",
        "|---:|---:|" + "---:|---:|" * len(present),
    ]
    for (nodes, pods), by_kind in cpu.items():
        med = {k: _median(v) for k, v in by_kind.items()}
        tot = {k: _median(v) for k, v in total[(nodes, pods)].items()}
        cells = [
            f"{_fmt(med.get(k))} / {_fmt(tot.get(k))} | {_ratio(tot.get('binder'), tot.get(k))}"
            for k in present
        ]
        lines.append(f"| {nodes:,} | {pods:,} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| nodes | pods | scheduler | pods/s (10-90%) | attempt p50/p90/p99 ms | algorithm p50/p99 ms "
        "| time-to-bind from start p50/p99 s | start-up s | CPU ms/pod: sched / apiserver / etcd "
        "| CPU cores: sched / apiserver / etcd / bench / irq / other | sockets | Scheduled events | ok |",
        "|---:|---:|---|---:|---|---|---|---:|---|---|---:|---:|---|",
    ]
    for r in results:
        e2e, alg = r.get("e2e_scheduling_ms") or {}, r.get("algorithm_ms") or {}
        ttb = r.get("time_to_bind_from_start_ms") or {}
        busy = (r.get("cpu_bind_window") or {}).get("cores")
        cores = (
            " / ".join(_fmt(busy.get(k)) for k in ("scheduler", "apiserver", "etcd", "bench", "irq", "other"))
            if busy
            else "-"
        )
        ms = r.get("cpu_ms_per_pod")
        per_pod = " / ".join(_fmt(ms[k]) for k in ("scheduler", "apiserver", "etcd")) if ms else "-"
        attempt = " / ".join(_fmt(e2e.get(f"p{q}_ms")) for q in (50, 90, 99))
        algorithm = " / ".join(_fmt(alg.get(f"p{q}_ms")) for q in (50, 99))
        to_bind = " / ".join(_fmt(ttb[f"p{q}"] / 1000) if f"p{q}" in ttb else "-" for q in (50, 99))
        socks = (r.get("scheduler_sockets") or {}).get("sockets_seen", "-")
        events = (r.get("checks") or {}).get("events_by_reason")
        scheduled_events = events.get("Scheduled", 0) if events is not None else "-"
        lines.append(
            f"| {r['nodes']:,} | {r['pods']:,} | {kind_of(r)} "
            f"| {_fmt(r.get('pods_per_s'))} ({_fmt(r.get('pods_per_s_10_90'))}) | {attempt} | {algorithm} "
            f"| {to_bind} | {_fmt(r.get('startup_s'))} | {per_pod} | {cores} | {socks} "
            f"| {scheduled_events} | {_verdict(r)} |"
        )
    return "\n".join(lines)
