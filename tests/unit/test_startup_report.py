"""Start-up reporting: the process clock the phases count from, and the numba cache report."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from koordsched.kernels import cache
from koordsched.kernels.cache import KernelCacheReport, kernel_cache_report
from koordsched.observability import startup
from koordsched.observability.startup import StartupTimeline, since_process_start
from koordsched.plugins.registry import in_tree_registry

REPO = Path(__file__).resolve().parents[2]


def test_the_clock_starts_when_the_process_started() -> None:
    # ps counts elapsed time from the same kernel start time, in whole seconds.
    etimes = int(subprocess.check_output(["ps", "-o", "etimes=", "-p", str(os.getpid())]).split()[0])
    assert etimes - 1 <= since_process_start() <= etimes + 2
    assert startup._process_start_wall() is not None


def test_the_timeline_logs_each_phase_once_in_the_format_the_bench_reads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    timeline = StartupTimeline()
    with caplog.at_level(logging.INFO, logger="koordsched.startup"):
        timeline.mark(startup.SERVING)
        timeline.mark(startup.SERVING)
        timeline.mark(startup.READY)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0].startswith("start-up: serving after ") and "s (cpu " in lines[0]
    assert lines[1].startswith("start-up: ready after ")
    wall, cpu = timeline.marks[startup.READY]
    assert wall >= timeline.marks[startup.SERVING][0] and cpu <= time.process_time()
    assert timeline.reached(startup.SERVING) and not timeline.reached(startup.CACHES_SYNCED)


def test_the_report_counts_every_kernel_signature_of_the_loaded_modules() -> None:
    in_tree_registry().warm_up()
    report = kernel_cache_report()
    found = cache._dispatchers("koordsched")
    names = {name for name, _ in found}
    # The shared kernels and the plugins' own.
    assert "koordsched.kernels.resources.fit_filter" in names
    assert any(n.startswith("koordsched.plugins.deviceshare.kernels.") for n in names)
    assert report.kernels == sum(len(d.overloads) for _, d in found) > 0
    assert set(report.compiled_kernels) <= names
    assert report.cache_paths and all(Path(p).is_absolute() for p in report.cache_paths)


def test_summary_and_check_name_what_compiled(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    good = KernelCacheReport(loaded=37, compiled=0, cache_paths=("/c/kernels_x",))
    assert good.summary() == "37 numba kernel signatures loaded from the cache (/c/kernels_x)"
    bad = KernelCacheReport(
        loaded=35, compiled=2, compiled_kernels=("m.a", "m.b"), cache_paths=("/c/kernels_x",)
    )
    assert bad.summary() == (
        "2 of 37 numba kernel signatures compiled at start-up, not loaded from the cache "
        "(/c/kernels_x): m.a, m.b"
    )
    for report, status in [(good, 0), (bad, 1), (KernelCacheReport(), 1)]:
        monkeypatch.setattr(cache, "kernel_cache_report", lambda r=report: r)
        assert cache.check() == status
        assert capsys.readouterr().out == report.summary() + "\n"


def test_the_image_check_passes_in_a_fresh_process_on_a_warm_cache() -> None:
    """The Dockerfile's runtime-stage command, on this checkout's cache (warmed above)."""
    in_tree_registry().warm_up()
    command = (
        "from koordsched.plugins.registry import in_tree_registry as r; r().warm_up(); "
        "from koordsched.kernels.cache import check; raise SystemExit(check())"
    )
    assert command in (REPO / "Dockerfile").read_text()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", command], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "numba kernel signatures loaded from the cache" in done.stdout
