"""Which numba kernels came from the on-disk cache and which were compiled by this process.

The image ships a cache (NUMBA_CACHE_DIR) so that start-up loads the kernels instead of compiling
them (seconds of CPU). numba falls back to compiling, silently, when the cache does not match:
another CPU model, source files at another path or with other content than the build's. The
report says so: ``koordsched run`` logs it once the plugins are loaded, and the image build
fails when a fresh process in the runtime layout does not load every kernel from the cache.

Kernels are found among the loaded modules of ``koordsched`` (the shared ones here and those in
plugin packages), so this module imports no plugin.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from numba.core.dispatcher import Dispatcher


@dataclass(frozen=True)
class KernelCacheReport:
    """Per kernel signature: loaded from the cache, or compiled (a miss, or a kernel without cache)."""

    loaded: int = 0
    compiled: int = 0
    #: ``module.function`` of each kernel that compiled at least one signature.
    compiled_kernels: tuple[str, ...] = ()
    #: The cache directories in use (one per source directory under NUMBA_CACHE_DIR).
    cache_paths: tuple[str, ...] = field(default=())

    @property
    def kernels(self) -> int:
        return self.loaded + self.compiled

    def summary(self) -> str:
        where = ", ".join(self.cache_paths) or "no cache directory"
        if not self.compiled:
            return f"{self.loaded} numba kernel signatures loaded from the cache ({where})"
        return (
            f"{self.compiled} of {self.kernels} numba kernel signatures compiled at start-up, not loaded "
            f"from the cache ({where}): {', '.join(self.compiled_kernels)}"
        )


def _dispatchers(prefix: str) -> list[tuple[str, Dispatcher]]:
    seen: set[int] = set()
    out: list[tuple[str, Dispatcher]] = []
    for name, module in list(sys.modules.items()):
        if module is None or not (name == prefix or name.startswith(prefix + ".")):
            continue
        for attr, value in list(vars(module).items()):
            # Only kernels defined in the module itself: imported names are counted where they live.
            if isinstance(value, Dispatcher) and id(value) not in seen and value.py_func.__module__ == name:
                seen.add(id(value))
                out.append((f"{name}.{attr}", value))
    return out


def kernel_cache_report(prefix: str = "koordsched") -> KernelCacheReport:
    """What the kernels of the loaded ``prefix`` modules have done so far (import and warm-up)."""
    loaded = compiled = 0
    names: list[str] = []
    paths: set[str] = set()
    for name, dispatcher in sorted(_dispatchers(prefix)):
        stats = dispatcher.stats
        hits = sum(stats.cache_hits.values())
        misses = sum(stats.cache_misses.values())
        if stats.cache_path:
            paths.add(str(stats.cache_path))
        # A kernel with no cache (cache=False) counts its compiled signatures as compiled.
        uncached = len(dispatcher.overloads) - hits - misses if not stats.cache_path else 0
        loaded += hits
        compiled += misses + max(0, uncached)
        if misses or uncached > 0:
            names.append(name)
    return KernelCacheReport(loaded, compiled, tuple(names), tuple(sorted(paths)))


def check() -> int:
    """Print the report; 1 unless every kernel loaded so far came from the cache (and some did).

    The image build calls it in the runtime stage, as the runtime user, after importing every
    plugin and warming the kernels up, which is what ``koordsched run`` does at start.
    """
    report = kernel_cache_report()
    print(report.summary())
    return 1 if report.compiled or not report.loaded else 0
