"""Counters and histograms cheap enough for the per-pod hot path, exposed through prometheus-client.

prometheus-client's Histogram takes a lock and increments a counter object per bucket
and for the sum on every observation: about 2-4 µs, and a scheduling cycle observes a
dozen of them. The scheduler records from a single event-loop thread and is scraped
from that same loop, so plain integer arithmetic is enough: an observation here is a
bisect and two additions. The exposition (names, labels, ``le`` values, ``_bucket``,
``_sum``, ``_count``, ``_total``) is produced by prometheus-client's own metric
families, so scrapers see exactly what the library would have written.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString


def _go_float(value: float) -> str:
    """``le`` as prometheus-client formats it for its own histograms."""
    text: str = floatToGoString(value)  # type: ignore[no-untyped-call]
    return text


class HistogramChild:
    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self._bounds = bounds
        #: Per-bucket (not cumulative) counts; the last slot is +Inf.
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        # Buckets are inclusive upper bounds (value <= le), which bisect_left gives directly.
        self.counts[bisect_left(self._bounds, value)] += 1
        self.sum += value


class CounterChild:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("counters can only increase")
        self.value += amount


class _Family(Collector):
    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], registry: CollectorRegistry | None
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        if registry is not None:
            registry.register(self)

    def describe(self) -> list[Metric]:
        return list(self._families(empty=True))

    def collect(self) -> Iterator[Metric]:
        return self._families(empty=False)

    def _families(self, empty: bool) -> Iterator[Metric]:
        raise NotImplementedError


class FastHistogram(_Family):
    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float],
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._bounds = tuple(float(b) for b in buckets if b != float("inf"))
        self._children: dict[tuple[str, ...], HistogramChild] = {}
        super().__init__(name, documentation, labelnames, registry)
        if not self.labelnames:
            self.labels()  # an unlabelled metric is exposed (with zeros) from the start, as upstream

    def labels(self, *values: str) -> HistogramChild:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {values}")
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = HistogramChild(self._bounds)
        return child

    def observe(self, value: float) -> None:
        self.labels().observe(value)

    def remove(self, *values: str) -> None:
        """Drop one labelled series (a garbage-collected vector's idle series)."""
        self._children.pop(values, None)

    def _families(self, empty: bool) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        if not empty:
            les = [_go_float(b) for b in self._bounds] + ["+Inf"]
            for values, child in self._children.items():
                running = 0
                buckets = []
                for le, n in zip(les, child.counts, strict=True):
                    running += n
                    buckets.append((le, running))
                family.add_metric(list(values), buckets, child.sum)
        yield family


class FastCounter(_Family):
    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._children: dict[tuple[str, ...], CounterChild] = {}
        super().__init__(name, documentation, labelnames, registry)
        if not self.labelnames:
            self.labels()

    def labels(self, *values: str) -> CounterChild:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {values}")
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = CounterChild()
        return child

    def inc(self, amount: float = 1.0) -> None:
        self.labels().inc(amount)

    def _families(self, empty: bool) -> Iterator[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        if not empty:
            for values, child in self._children.items():
                family.add_metric(list(values), child.value)
        yield family
