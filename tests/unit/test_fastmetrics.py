"""The hot-path histogram and counter expose what prometheus-client's own would."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from koordsched.observability.fastmetrics import FastCounter, FastHistogram


@pytest.mark.parametrize("values", [[0.5, 1.0, 1.5, 4.0, 100.0], [], [0.0, 2.0, 2.0]])
def test_histogram_exposition_matches_prometheus_client(values: list[float]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    fast = FastHistogram("x_seconds", "help", ["a"], buckets=(1.0, 2.0, 4.0), registry=ours)
    ref = Histogram("x_seconds", "help", ["a"], buckets=(1.0, 2.0, 4.0), registry=theirs)
    for v in values:
        fast.labels("v").observe(v)
        ref.labels("v").observe(v)
    if not values:
        fast.labels("v")
        ref.labels("v")
    strip = [line for line in generate_latest(theirs).splitlines() if b"_created" not in line]
    assert generate_latest(ours).splitlines() == strip


def test_counter_and_label_checks() -> None:
    reg = CollectorRegistry()
    c = FastCounter("y_total", "help", ["k"], registry=reg)
    c.labels("a").inc()
    c.labels("a").inc(2)
    assert reg.get_sample_value("y_total", {"k": "a"}) == 3
    with pytest.raises(ValueError):
        c.labels("a", "b")
    with pytest.raises(ValueError):
        c.labels("a").inc(-1)


def test_unlabelled_metrics_start_at_zero() -> None:
    reg = CollectorRegistry()
    FastHistogram("z_seconds", "help", buckets=(1.0,), registry=reg)
    assert reg.get_sample_value("z_seconds_count") == 0
